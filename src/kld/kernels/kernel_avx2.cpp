// AVX2 + FMA form of the fast kernel: the pack of kernel_simd.h on 8 floats
// and 4 doubles, so a 16-lane step is two float vectors feeding four fp64
// accumulators (lanes 0-3, 4-7, 8-11, 12-15). Masks are all-ones lanes.
#include "kld/kernels/kernel_simd.h"

namespace sluice::kld::fastk {

namespace {

struct Avx2 {
    using F = __m256;
    using D = __m256d;
    using FM = __m256;   // all-ones / zero per float lane
    using DM = __m256d;  // the same per double lane
    static constexpr int kF = 8, kD = 4;

    static F setf(float v) { return _mm256_set1_ps(v); }
    static F loadf(const float* p) { return _mm256_loadu_ps(p); }
    static F zerof() { return _mm256_setzero_ps(); }
    static F add(F a, F b) { return _mm256_add_ps(a, b); }
    static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
    static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
    static F div(F a, F b) { return _mm256_div_ps(a, b); }
    static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
    static F fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
    static F maxf(F a, F b) { return _mm256_max_ps(a, b); }
    static F roundn(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

    static FM nge(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_NGE_UQ); }
    static FM lt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
    static FM eq(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
    static FM neq(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_NEQ_OQ); }
    static FM nlt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_NLT_UQ); }
    static F blendf(FM m, F a, F b) { return _mm256_blendv_ps(a, b, m); }
    static FM and_(FM a, FM b) { return _mm256_and_ps(a, b); }
    static FM or_(FM a, FM b) { return _mm256_or_ps(a, b); }
    static FM andnot(FM a, FM b) { return _mm256_andnot_ps(a, b); }
    static FM none() { return _mm256_setzero_ps(); }
    static bool any(FM m) { return _mm256_movemask_ps(m) != 0; }
    static unsigned bits(FM m) { return unsigned(_mm256_movemask_ps(m)); }

    static F exp_scale(F e, F n, FM under) {
        const __m256i b = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
        return _mm256_andnot_ps(under, _mm256_mul_ps(e, _mm256_castsi256_ps(b)));
    }
    static void wide_scale(F q, F n, FM under, D* lo, D* hi) {
        // 2^n as fp64 bits: (n + 1023) << 52, n in [-126, 0].
        const __m256i ni = _mm256_cvtps_epi32(n);
        const __m256i b0 = _mm256_slli_epi64(
            _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(ni)), _mm256_set1_epi64x(1023)), 52);
        const __m256i b1 = _mm256_slli_epi64(
            _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(ni, 1)), _mm256_set1_epi64x(1023)), 52);
        const D one = _mm256_set1_pd(1.0);
        *lo = _mm256_andnot_pd(dm_lo(under), _mm256_mul_pd(_mm256_add_pd(one, lo_pd(q)), _mm256_castsi256_pd(b0)));
        *hi = _mm256_andnot_pd(dm_hi(under), _mm256_mul_pd(_mm256_add_pd(one, hi_pd(q)), _mm256_castsi256_pd(b1)));
    }

    static D lo_pd(F v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
    static D hi_pd(F v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }
    static F to_ps(D lo, D hi) {
        return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
    }
    static D setd(double v) { return _mm256_set1_pd(v); }
    static D loadd(const double* p) { return _mm256_loadu_pd(p); }
    static void stored(double* p, D v) { _mm256_storeu_pd(p, v); }
    static D zerod() { return _mm256_setzero_pd(); }
    static D addd(D a, D b) { return _mm256_add_pd(a, b); }
    static D subd(D a, D b) { return _mm256_sub_pd(a, b); }
    static D muld(D a, D b) { return _mm256_mul_pd(a, b); }
    static D maxd(D a, D b) { return _mm256_max_pd(a, b); }
    static D absd(D v) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), v); }
    // A float lane mask widened to the matching 4 double lanes.
    static DM dm_lo(FM m) {
        return _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(_mm256_castps_si256(m))));
    }
    static DM dm_hi(FM m) {
        return _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(_mm256_castps_si256(m), 1)));
    }
    static DM ge(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_GE_OQ); }
    static DM le(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_LE_OQ); }
    static D blendd(DM m, D a, D b) { return _mm256_blendv_pd(a, b, m); }
    static D add_if(D acc, DM m, D v) { return _mm256_blendv_pd(acc, _mm256_add_pd(acc, v), m); }
    // Masked lanes offer +0, which never exceeds acc (>= +0).
    static D max_if(D acc, DM m, D v) { return _mm256_max_pd(acc, _mm256_and_pd(m, v)); }

    static float hmaxf(F v) {
        alignas(32) float m8[8];
        _mm256_store_ps(m8, v);
        float m = m8[0];
        for (int i = 1; i < 8; ++i) m = m8[i] > m ? m8[i] : m;
        return m;
    }
    static double hmaxd(D v) {
        alignas(32) double m4[4];
        _mm256_store_pd(m4, v);
        double m = 0;
        for (double x : m4) m = x > m ? x : m;
        return m;
    }
};

using K = SimdKernel<Avx2>;
const Kernels kAvx2 = {"avx2", K::head, K::pass2};

}  // namespace

const Kernels* kernels_avx2() { return &kAvx2; }

}  // namespace sluice::kld::fastk
