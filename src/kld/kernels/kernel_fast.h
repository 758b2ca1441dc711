// The fast per-row kernel of KLD.md §7.4, internal to src/eval.
//
// Elementwise exp and log1p run in fp32 (SIMD where the CPU has it); every
// sum is fp64 in 16 fixed lanes (element v feeds lane v % 16) merged by one
// fixed tree. The scalar code in this header *defines* the arithmetic: the
// AVX2, AVX-512 and NEON kernels perform the same IEEE operations (same fused
// multiply-adds, same conversions, same lane of every element), so all
// four give bit-identical rows, and a row never depends on the thread
// count. Functions here are `static` because each ISA translation unit
// compiles its own copy with its own flags (no ODR merging across flags).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace sluice::kld::fastk {

constexpr int kLanes = 16;
constexpr double kLn2d = 0.69314718055994530942;
constexpr float kLn2f = 0.693147180559945309f;
constexpr float kInfF = std::numeric_limits<float>::infinity();

// exp: Cephes expf range reduction (C1 has few bits, so n*C1 is exact) and
// its degree-5 polynomial, evaluated with fused multiply-adds.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kC1 = 0.693359375f;
constexpr float kC2 = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f, kP3 = 4.1665795894e-2f,
                kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
// Inputs below this are flushed to 0 (e^-87 = 1.6e-38): the result stays a
// normal float and the scale 2^n needs no special case. Such a probability
// changes no sum that matters (KL terms of 1e-37).
constexpr float kExpLo = -87.0f;

// g(u) = ln 2 - log1p(exp(-u)) for u = |a - b| >= 0: a - m and b - m of the
// JS mixture are g and g - u. Written so that g(0) = 0 exactly and g keeps
// its relative accuracy for small u (a plain ln2 - log1p(...) loses it to
// cancellation): below kGSplit a series of u/2 - ln cosh(u/2), above it
// log1p(s) = 2 atanh(s / (2 + s)) with s = e^-u <= 0.61.
constexpr float kGSplit = 0.5f;
constexpr float kG0 = 1.0f / 8, kG1 = -1.0f / 192, kG2 = 1.0f / 2880, kG3 = -17.0f / 645120, kG4 = 31.0f / 14515200;
constexpr float kA0 = 2.0f, kA1 = 2.0f / 3, kA2 = 2.0f / 5, kA3 = 2.0f / 7, kA4 = 2.0f / 9, kA5 = 2.0f / 11;

static inline float exp32(float t) {
    const bool under = !(t >= kExpLo);  // also -inf
    const float tc = under ? kExpLo : t;
    const float n = std::nearbyint(tc * kLog2e);
    float r = std::fma(-n, kC1, tc);
    r = std::fma(-n, kC2, r);
    float p = kP0;
    p = std::fma(p, r, kP1);
    p = std::fma(p, r, kP2);
    p = std::fma(p, r, kP3);
    p = std::fma(p, r, kP4);
    p = std::fma(p, r, kP5);
    const float rr = r * r;
    const float e = std::fma(p, rr, r) + 1.0f;
    const int32_t bits = (int32_t(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, 4);
    return under ? 0.0f : e * scale;
}

// Pass 1's terms of Σ exp(x - M): the same reduction and polynomial as
// exp32, but 1 + (e^r - 1) and the scaling by 2^n are done in fp64 (both
// exact there). Rounding e^r to fp32 costs up to 6e-8 relative, and on
// BF16-valued rows x - M takes few distinct values, so those roundings do
// not average out: the log-normaliser drifted by ~1.5e-9 and the mean KL
// by ~3e-9. Without that last rounding the drift is ~4x smaller.
static inline double exp32_wide(float t) {
    const bool under = !(t >= kExpLo);  // also -inf
    const float tc = under ? kExpLo : t;
    const float n = std::nearbyint(tc * kLog2e);
    float r = std::fma(-n, kC1, tc);
    r = std::fma(-n, kC2, r);
    float p = kP0;
    p = std::fma(p, r, kP1);
    p = std::fma(p, r, kP2);
    p = std::fma(p, r, kP3);
    p = std::fma(p, r, kP4);
    p = std::fma(p, r, kP5);
    const float rr = r * r;
    const float q = std::fma(p, rr, r);  // e^r - 1
    return under ? 0.0 : std::ldexp(1.0 + double(q), int(n));
}

static inline float g32(float u) {
    const float w = u * u;
    float P = kG4;
    P = std::fma(P, w, kG3);
    P = std::fma(P, w, kG2);
    P = std::fma(P, w, kG1);
    P = std::fma(P, w, kG0);
    const float gs = std::fma(-w, P, 0.5f * u);
    const float s = exp32(-u);
    const float r = s / (2.0f + s);
    const float r2 = r * r;
    float Q = kA5;
    Q = std::fma(Q, r2, kA4);
    Q = std::fma(Q, r2, kA3);
    Q = std::fma(Q, r2, kA2);
    Q = std::fma(Q, r2, kA1);
    Q = std::fma(Q, r2, kA0);
    const float gl = kLn2f - r * Q;
    return u < kGSplit ? gs : gl;
}

// The fixed merge tree of the 16 lanes.
static inline double lane_total(const double* l) {
    return (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))) +
           (((l[8] + l[9]) + (l[10] + l[11])) + ((l[12] + l[13]) + (l[14] + l[15])));
}

// Pass 1 of one operand.
struct Head {
    float max = -kInfF;
    int64_t argmax = -1, n_max = 0;
    double sum = 0;  // Σ exp(x - max), fixed lanes
};

// Pass 2 of a row pair.
struct Pass2 {
    double kl = 0;       // Σ p (a - b) over entries finite on both sides
    double js2 = 0;      // 2·JS = Σ p(a - m) + q(b - m)
    double ae_sum = 0;   // Σ |x - y| over entries finite on both sides
    double ae_max = 0;
    bool kl_inf = false;  // reference finite where the candidate is -inf
    bool tie_hit = false; // some index is a maximum of both rows
};

// Lane accumulators shared by the vector body and the scalar tail.
struct Acc {
    double kl[kLanes] = {}, js[kLanes] = {}, ae[kLanes] = {};
    double ae_max = 0;
    bool kl_inf = false, tie = false;
};

// ---- the scalar definition (also the tail of the vector kernels) ----------

// Max over [v0, V) into *M: false on NaN or +inf.
static inline bool max_scalar(const float* x, int64_t v0, int64_t V, float* M) {
    for (int64_t v = v0; v < V; ++v) {
        const float t = x[v];
        if (!(t < kInfF)) return false;
        if (t > *M) *M = t;
    }
    return true;
}

// Σ exp(x - M) over [v0, V) into the lanes; argmax/tie bookkeeping.
static inline void sum_scalar(const float* x, int64_t v0, int64_t V, float M, double* lanes, Head* h) {
    for (int64_t v = v0; v < V; ++v) {
        lanes[v & (kLanes - 1)] += exp32_wide(x[v] - M);
        if (x[v] == M) {
            if (h->argmax < 0) h->argmax = v;
            ++h->n_max;
        }
    }
}

// Pass 1 in one sweep: tiles of kTile elements (a multiple of 16, so every
// element keeps lane v % 16). A tile's max is taken while the tile sits in
// L1, and the lane sums are rescaled in fp64 when the running max rises, so
// each operand row is read from memory once instead of twice (a separate
// max sweep was the first, memory-bound touch of rows fresh from disk).
constexpr int64_t kTile = 4096;

template <class TileMax, class TileSum>
static inline bool head_tiled(const float* x, int64_t V, Head* h, TileMax tile_max, TileSum tile_sum) {
    *h = Head{};
    double lanes[kLanes] = {};
    float M = -kInfF;
    for (int64_t t0 = 0; t0 < V; t0 += kTile) {
        const int64_t t1 = V - t0 < kTile ? V : t0 + kTile;
        float m = -kInfF;
        if (!tile_max(x, t0, t1, &m)) return false;  // NaN or +inf
        if (m > M) {
            if (M != -kInfF) {
                const double f = std::exp(double(M) - double(m));
                for (double& l : lanes) l *= f;
            }
            M = m;
            h->argmax = -1;  // earlier "maxima" were not
            h->n_max = 0;
        }
        if (M == -kInfF) continue;  // all -inf so far: nothing to add
        tile_sum(x, t0, t1, M, lanes, h);
    }
    if (M == -kInfF) return false;  // no finite value
    h->max = M;
    h->sum = lane_total(lanes);
    return true;
}

static inline void pass2_scalar(const float* x, const float* y, int64_t v0, int64_t V, float Mx, float My, double ox,
                                double oy, bool want_js, Acc* A) {
    const float ninf = -kInfF;
    for (int64_t v = v0; v < V; ++v) {
        const int lane = int(v & (kLanes - 1));
        const float xv = x[v], yv = y[v];
        if (xv == Mx && yv == My) A->tie = true;
        const bool xf = xv != ninf, yf = yv != ninf;
        if (!xf && !yf) continue;
        const double xd = xv, yd = yv;
        const double a = xd - ox, b = yd - oy, d = a - b;
        const float p = exp32(float(a));
        if (xf && yf) {
            const double ad = std::fabs(xd - yd);
            A->ae[lane] += ad;
            if (ad > A->ae_max) A->ae_max = ad;
            A->kl[lane] += double(p) * d;
        } else if (xf) {
            A->kl_inf = true;
        }
        if (!want_js) continue;
        const float q = exp32(float(b));
        double s;
        if (xf && yf) {
            const double ud = std::fabs(d);
            const double g = g32(float(ud));
            const double ga = d >= 0 ? g : g - ud;
            const double gb = d <= 0 ? g : g - ud;
            s = double(p) * ga + double(q) * gb;
        } else if (xf) {
            s = double(p) * kLn2d;  // m = a - ln 2
        } else {
            s = double(q) * kLn2d;  // m = b - ln 2
        }
        A->js[lane] += s;
    }
}

static inline void finish(const Acc& A, Pass2* o) {
    o->kl = lane_total(A.kl);
    o->js2 = lane_total(A.js);
    o->ae_sum = lane_total(A.ae);
    o->ae_max = A.ae_max;
    o->kl_inf = A.kl_inf;
    o->tie_hit = A.tie;
}

// One ISA's kernels. head() returns false on NaN/+inf or a row without a
// finite value (the caller reports the offender through the fp64 path).
struct Kernels {
    const char* name;
    bool (*head)(const float* x, int64_t V, Head* h);
    void (*pass2)(const float* x, const float* y, int64_t V, float Mx, float My, double ox, double oy, bool want_js,
                  Pass2* o);
};

const Kernels& kernels_scalar();
const Kernels* kernels_avx2();    // null when not built for this target
const Kernels* kernels_avx512();  // null when not built for this target
const Kernels* kernels_neon();    // null when not built for this target

}  // namespace sluice::kld::fastk
