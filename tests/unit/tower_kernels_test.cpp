// The vision tower's kernels (quant/tower_math.h): every SIMD set
// bit-identical to the scalar reference, and the reference itself against
// libm's double exp / tanh / erf forms.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "quant/kernels.h"
#include "quant/tower_math.h"

using namespace sluice;

namespace {

const Kernels *simd_set(sluice_backend b, std::string *why_not) {
    const Kernels *k = nullptr;
    const char *why = nullptr;
    if (!select_kernels(b, &k, &why)) {
        *why_not = why ? why : "not available";
        return nullptr;
    }
    return k;
}

// Inputs for the GELUs: a dense sweep over the range activations take, a
// random normal sample, and the edges (zeros, huge, tiny, infinities).
std::vector<float> gelu_inputs() {
    std::vector<float> x;
    for (int i = -200000; i <= 200000; i++) x.push_back((float)i * 1e-4f);
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (int i = 0; i < 100003; i++) x.push_back(nd(rng));
    for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 2.5f * 1.41421356f, -2.5f * 1.41421356f, 30.0f, -30.0f, 1e20f, -1e20f,
                    INFINITY, -INFINITY, 3.4e38f, -3.4e38f})
        x.push_back(v);
    return x;  // odd length: every backend runs a tail
}

struct AttnCase {
    int64_t L, hd;
};

// One head's rows through attn_row: q, k, v random, kT transposed as the
// tower lays it out, v rows at a stride wider than hd.
std::vector<float> attn_rows(const Kernels &k, const AttnCase &c, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    const int64_t ldv = c.hd + 5;
    std::vector<float> q((size_t)(c.L * c.hd)), kT((size_t)(c.hd * c.L)), v((size_t)(c.L * ldv)), out((size_t)(c.L * c.hd));
    for (auto &x : q) x = nd(rng);
    for (auto &x : kT) x = nd(rng);
    for (auto &x : v) x = nd(rng);
    std::vector<double> scratch((size_t)(c.L + c.hd));
    for (int64_t p = 0; p < c.L; p++)
        k.attn_row(q.data() + p * c.hd, kT.data(), c.L, c.hd, v.data(), ldv, 1.0 / std::sqrt((double)c.hd),
                   scratch.data(), out.data() + p * c.hd);
    return out;
}

const AttnCase kAttnCases[] = {{1, 8}, {3, 5}, {7, 64}, {24, 64}, {61, 72}, {100, 128}, {130, 13}};

void simd_matches_scalar(sluice_backend b) {
    std::string why;
    const Kernels *k = simd_set(b, &why);
    if (!k) GTEST_SKIP() << why;
    const Kernels &s = kernels_scalar();
    int64_t n_attn = 0;
    for (const AttnCase &c : kAttnCases) {
        std::vector<float> a = attn_rows(s, c, 11), b2 = attn_rows(*k, c, 11);
        ASSERT_EQ(std::memcmp(a.data(), b2.data(), a.size() * 4), 0) << k->name << " attn_row L=" << c.L << " hd=" << c.hd;
        n_attn += (int64_t)a.size();
    }
    std::vector<float> x = gelu_inputs();
    for (auto f : {&Kernels::gelu_tanh, &Kernels::gelu_erf}) {
        std::vector<float> a = x, b2 = x;
        (s.*f)(a.data(), (int64_t)a.size());
        (k->*f)(b2.data(), (int64_t)b2.size());
        int differ = 0;
        for (size_t i = 0; i < a.size(); i++) differ += std::memcmp(&a[i], &b2[i], 4) != 0;
        EXPECT_EQ(differ, 0) << k->name << (f == &Kernels::gelu_tanh ? " gelu_tanh" : " gelu_erf");
    }
    std::printf("%s: %lld attention outputs and 2 x %zu GELU values bit-identical to scalar\n", k->name,
                (long long)n_attn, x.size());
}

}  // namespace

TEST(TowerKernels, Avx2MatchesScalar) { simd_matches_scalar(SLUICE_BACKEND_AVX2); }
TEST(TowerKernels, Avx512MatchesScalar) { simd_matches_scalar(SLUICE_BACKEND_AVX512); }
TEST(TowerKernels, NeonMatchesScalar) { simd_matches_scalar(SLUICE_BACKEND_NEON); }

// The reference's exp against libm, and its edges.
TEST(TowerKernels, ExpAgainstLibm) {
    using tower::D1;
    double worst = 0.0;
    for (int i = -707900; i <= 708900; i += 7) {
        const double x = i * 1e-3 + 1e-7 * (i % 13);
        const double got = tower::exp_d(D1::set(x)).v, want = std::exp(x);
        worst = std::max(worst, std::fabs(got - want) / want);
    }
    std::printf("exp_d vs std::exp on [-708, 709]: max relative diff %.3g\n", worst);
    EXPECT_LE(worst, 4e-16);
    EXPECT_EQ(tower::exp_d(D1::set(0.0)).v, 1.0);
    EXPECT_EQ(tower::exp_d(D1::set(-800.0)).v, 0.0);
    EXPECT_EQ(tower::exp_d(D1::set(800.0)).v, INFINITY);
    EXPECT_EQ(tower::exp_d(D1::set(-INFINITY)).v, 0.0);
    EXPECT_TRUE(std::isnan(tower::exp_d(D1::set(NAN)).v));
}

// The scalar GELUs and attention against libm's double forms: the result is
// rounded to float, so they may differ by at most one float ulp, and rarely.
TEST(TowerKernels, ScalarAgainstLibmForms) {
    const Kernels &s = kernels_scalar();
    std::vector<float> x = gelu_inputs();
    for (int which = 0; which < 2; which++) {
        std::vector<float> got = x;
        (which ? s.gelu_erf : s.gelu_tanh)(got.data(), (int64_t)got.size());
        int ulp1 = 0, worse = 0;
        double max_abs = 0.0;
        for (size_t i = 0; i < x.size(); i++) {
            const double z = x[i];
            // 1 + erf(z/√2) = erfc(−z/√2), 1 + tanh u = 2 / (1 + e^(−2u)): the
            // forms without cancellation for negative z.
            const float want = which ? (float)(0.5 * z * std::erfc(-z / std::sqrt(2.0)))
                                     : (float)(z / (1.0 + std::exp(-2.0 * (0.7978845608028654 * (z + 0.044715 * z * z * z)))));
            if (std::isnan(want) || std::isnan(got[i])) {
                worse += std::isnan(want) != std::isnan(got[i]);
                continue;
            }
            if (got[i] == want) continue;
            const float up = std::nextafter(want, INFINITY), dn = std::nextafter(want, -INFINITY);
            if (got[i] == up || got[i] == dn) ulp1++;
            else if (worse++ < 5) std::printf("  x %.9g: got %.9g want %.9g\n", x[i], got[i], want);
            if (std::isfinite(want)) max_abs = std::max(max_abs, std::fabs((double)got[i] - (double)want));
        }
        std::printf("%s vs libm double form: %zu values, %d one float ulp apart, %d further, max|diff| %.3g\n",
                    which ? "gelu_erf" : "gelu_tanh", x.size(), ulp1, worse, max_abs);
        EXPECT_EQ(worse, 0);
        EXPECT_LE(ulp1, (int)(x.size() / 1000));
    }
    // Attention: against the same computation with std::exp.
    for (const AttnCase &c : kAttnCases) {
        std::mt19937 rng(11);
        std::normal_distribution<float> nd(0.0f, 2.0f);
        const int64_t ldv = c.hd + 5;
        std::vector<float> q((size_t)(c.L * c.hd)), kT((size_t)(c.hd * c.L)), v((size_t)(c.L * ldv));
        for (auto &t : q) t = nd(rng);
        for (auto &t : kT) t = nd(rng);
        for (auto &t : v) t = nd(rng);
        std::vector<float> got = attn_rows(s, c, 11);
        double max_rel = 0.0;
        for (int64_t p = 0; p < c.L; p++) {
            std::vector<double> sc((size_t)c.L), acc((size_t)c.hd, 0.0);
            double mx = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < c.L; j++) {
                double d = 0.0;
                for (int64_t e = 0; e < c.hd; e++) d += (double)q[(size_t)(p * c.hd + e)] * (double)kT[(size_t)(e * c.L + j)];
                sc[(size_t)j] = d / std::sqrt((double)c.hd);
                mx = std::max(mx, sc[(size_t)j]);
            }
            for (auto &t : sc) sum += (t = std::exp(t - mx));
            for (int64_t j = 0; j < c.L; j++)
                for (int64_t e = 0; e < c.hd; e++) acc[(size_t)e] += sc[(size_t)j] * v[(size_t)(j * ldv + e)];
            for (int64_t e = 0; e < c.hd; e++) {
                const double want = acc[(size_t)e] / sum, g = got[(size_t)(p * c.hd + e)];
                max_rel = std::max(max_rel, std::fabs(g - want) / std::max(std::fabs(want), 1e-3));
            }
        }
        std::printf("attn_row L=%lld hd=%lld vs std::exp form: max relative diff %.3g\n", (long long)c.L,
                    (long long)c.hd, max_rel);
        EXPECT_LE(max_rel, 1.2e-7);  // one float rounding
    }
}
