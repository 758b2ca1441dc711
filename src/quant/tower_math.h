// The vision tower's attention row and GELUs (VISION.md §5.3, §5.5, §5.8),
// written once over a pack of W doubles and instantiated per backend: the
// scalar set with W = 1 (the reference), AVX2 W = 4, AVX-512 W = 8, NEON
// W = 2. Every lane performs the same IEEE double operations in the same
// order whatever W is (no reduction ever runs across lanes; the few
// sequential sums stay scalar), and nothing here may be contracted into an
// FMA (the build's -ffp-contract=off), so all backends give the same bits.
//
// exp, the tanh form and erf are computed here rather than by libm because
// the SIMD paths need the same function, not merely an accurate one: a
// degree-13 Taylor polynomial after a ln 2 reduction (about 1 ulp), the
// tanh-form GELU as z / (1 + e^(-2u)) (the same function as
// 0.5·z·(1 + tanh u), without its cancellation), and erf from its Taylor
// series below 2.5 and the Laplace continued fraction of erfc above
// (absolute error below 5e-15 against libm, docs/LEARNED.md). Results are
// rounded to float once, so the choice of these forms is far below the
// tower's float32 contract.
//
// A lane pack V provides: set, load/store (double), loadf/storef (W floats,
// converted with the current rounding mode), + - * /, lt/gt masks, sel
// (mask ? a : b) and shl52 (the bits shifted left by 52).
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>

// Internal linkage on purpose: each kernel file is compiled with its own
// ISA flags, so its copies (the D1 tails included) must not be merged with
// another file's by the linker.
namespace sluice::tower {
namespace {

struct D1 {
    static constexpr int W = 1;
    double v;
    using M = bool;
    static D1 set(double x) { return {x}; }
    static D1 load(const double *p) { return {*p}; }
    static D1 loadf(const float *p) { return {(double)*p}; }
    void store(double *p) const { *p = v; }
    void storef(float *p) const { *p = (float)v; }
    friend D1 operator+(D1 a, D1 b) { return {a.v + b.v}; }
    friend D1 operator-(D1 a, D1 b) { return {a.v - b.v}; }
    friend D1 operator*(D1 a, D1 b) { return {a.v * b.v}; }
    friend D1 operator/(D1 a, D1 b) { return {a.v / b.v}; }
    static M lt(D1 a, D1 b) { return a.v < b.v; }
    static M gt(D1 a, D1 b) { return a.v > b.v; }
    static D1 sel(M m, D1 a, D1 b) { return m ? a : b; }
    static D1 shl52(D1 a) {
        uint64_t u;
        std::memcpy(&u, &a.v, 8);
        u <<= 52;
        D1 r;
        std::memcpy(&r.v, &u, 8);
        return r;
    }
};

// e^x. Inputs below -708 give 0 and above 709 give +inf (the reduction's
// 2^n stays a normal number in between); NaN stays NaN.
template <class V>
inline V exp_d(V x) {
    const V lo = V::set(-708.0), hi = V::set(709.0);
    V xc = V::sel(V::lt(x, lo), lo, x);
    xc = V::sel(V::gt(xc, hi), hi, xc);
    // n = nearest integer to x/ln2, formed by the 1.5·2^52 shifter; 1023 is
    // folded in so that the low 12 bits of t are n's biased exponent.
    const V shifter = V::set(6755399441055744.0 + 1023.0);
    const V t = xc * V::set(1.4426950408889634) + shifter;
    const V n = t - shifter;
    // ln2 split so that n·ln2_hi is exact for |n| < 2^21.
    const V r = (xc - n * V::set(6.93147180369123816490e-01)) - n * V::set(1.90821492927058770002e-10);
    static constexpr double c[14] = {1.0,
                                     1.0,
                                     1.0 / 2,
                                     1.0 / 6,
                                     1.0 / 24,
                                     1.0 / 120,
                                     1.0 / 720,
                                     1.0 / 5040,
                                     1.0 / 40320,
                                     1.0 / 362880,
                                     1.0 / 3628800,
                                     1.0 / 39916800,
                                     1.0 / 479001600,
                                     1.0 / 6227020800.0};
    V p = V::set(c[13]);
    for (int k = 12; k >= 0; k--) p = p * r + V::set(c[k]);
    V y = p * V::shl52(t);
    y = V::sel(V::lt(x, lo), V::set(0.0), y);
    return V::sel(V::gt(x, hi), V::set(std::numeric_limits<double>::infinity()), y);
}

// gelu_tanh(z) = 0.5·z·(1 + tanh u), u = 0.7978845608028654·(z + 0.044715·z³),
// as z / (1 + e^(-2u)).
template <class V>
inline V gelu_tanh_d(V x) {
    const V u = V::set(0.7978845608028654) * (x + V::set(0.044715) * x * x * x);
    return x / (V::set(1.0) + exp_d(V::set(-2.0) * u));
}

// gelu_erf(z) = 0.5·z·(1 + erf(z/√2)). 1 + erf is formed without
// cancellation on either side: 1 ± erf(a) below a = 2.5, erfc(a) or
// 2 − erfc(a) above.
template <class V>
inline V gelu_erf_d(V x) {
    const V zero = V::set(0.0), one = V::set(1.0), cut = V::set(2.5);
    const V z = x * V::set(0.70710678118654752440);
    const V a = V::sel(V::lt(z, zero), zero - z, z);
    // erf(a), a < 2.5: (2/√π)·a·Σ_{k<40} (−1)^k a^(2k) / (k!·(2k+1)), Horner in a².
    const V as = V::sel(V::gt(a, cut), cut, a), a2 = as * as;
    static const auto coef = [] {
        struct C { double v[40]; } c{};
        double f = 1.0;  // k!
        for (int k = 0; k < 40; k++) {
            if (k) f *= (double)k;
            c.v[k] = (k % 2 ? -1.0 : 1.0) / (f * (double)(2 * k + 1));
        }
        return c;
    }();
    V p = V::set(coef.v[39]);
    for (int k = 38; k >= 0; k--) p = p * a2 + V::set(coef.v[k]);
    const V e_small = V::set(1.1283791670955126) * as * p;
    // erfc(a), a >= 2.5: e^(−a²)/√π / (a + (1/2)/(a + 1/(a + (3/2)/(a + ...)))), 40 levels.
    const V ab = V::sel(V::lt(a, cut), cut, a);
    V f = ab;
    for (int k = 40; k >= 1; k--) f = ab + V::set(0.5 * k) / f;
    const V c_big = exp_d(zero - ab * ab) * V::set(0.56418958354775628695) / f;
    const auto neg = V::lt(z, zero);
    const V onep = V::sel(V::lt(a, cut), V::sel(neg, one - e_small, one + e_small),
                          V::sel(neg, c_big, V::set(2.0) - c_big));
    return V::set(0.5) * x * onep;
}

// Applies f to n floats in place: packs of W, then the tail one at a time
// (the same operations, so the tail's lanes match the packs').
template <class V, class F>
inline void map_floats(float *x, int64_t n, F f) {
    int64_t i = 0;
    for (; i + V::W <= n; i += V::W) f(V::loadf(x + i)).storef(x + i);
    for (; i < n; i++) f(D1::loadf(x + i)).storef(x + i);
}

template <class V>
void gelu_tanh(float *x, int64_t n) {
    map_floats<V>(x, n, [](auto v) { return gelu_tanh_d(v); });
}
template <class V>
void gelu_erf(float *x, int64_t n) {
    map_floats<V>(x, n, [](auto v) { return gelu_erf_d(v); });
}

// One query row of one head's full attention (VISION.md §5.5):
//   s_j = (q · k_j) · scale, α = softmax(s), out = Σ_j α_j v_j
// kT is the head's keys transposed, [hd][L] (key j of component e at
// kT[e·L + j]); v_j is at V + j·ldv. Scores and the weighted sum are in
// double, each a sequential sum over its own index (the dot over e, the
// weighted sum over j), vectorised across j and across e respectively; the
// max and the softmax denominator are scalar loops over j. scratch holds
// L + hd doubles. Each output is rounded to float once.
template <class V>
void attn_row(const float *q, const float *kT, int64_t L, int64_t hd, const float *Vp, int64_t ldv, double scale,
              double *scratch, float *out) {
    double *s = scratch, *acc = scratch + L;
    auto scores = [&](auto tag, int64_t j) {
        using P = decltype(tag);
        P d = P::set(0.0);
        for (int64_t e = 0; e < hd; e++) d = d + P::set((double)q[e]) * P::loadf(kT + e * L + j);
        (d * P::set(scale)).store(s + j);
    };
    int64_t j = 0;
    for (; j + V::W <= L; j += V::W) scores(V{}, j);
    for (; j < L; j++) scores(D1{}, j);
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < L; i++) mx = mx < s[i] ? s[i] : mx;
    j = 0;
    for (; j + V::W <= L; j += V::W) exp_d(V::load(s + j) - V::set(mx)).store(s + j);
    for (; j < L; j++) exp_d(D1::load(s + j) - D1::set(mx)).store(s + j);
    double sum = 0.0;
    for (int64_t i = 0; i < L; i++) sum += s[i];
    for (int64_t e = 0; e < hd; e++) acc[e] = 0.0;
    for (int64_t i = 0; i < L; i++) {
        const float *v = Vp + i * ldv;
        int64_t e = 0;
        for (; e + V::W <= hd; e += V::W) (V::load(acc + e) + V::set(s[i]) * V::loadf(v + e)).store(acc + e);
        for (; e < hd; e++) (D1::load(acc + e) + D1::set(s[i]) * D1::loadf(v + e)).store(acc + e);
    }
    int64_t e = 0;
    for (; e + V::W <= hd; e += V::W) (V::load(acc + e) / V::set(sum)).storef(out + e);
    for (; e < hd; e++) (D1::load(acc + e) / D1::set(sum)).storef(out + e);
}

}  // namespace
}  // namespace sluice::tower
