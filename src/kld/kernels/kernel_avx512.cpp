// AVX-512 form of the fast kernel: the pack of kernel_simd.h on 16 floats
// and 8 doubles, so a 16-lane step is one float vector feeding two fp64
// accumulators (lanes 0-7, 8-15). Masks are k-registers. Chosen at run time
// only when CPUID reports F, DQ, VL and BW.
#include "kld/kernels/kernel_simd.h"

namespace sluice::kld::fastk {

namespace {

struct Avx512 {
    using F = __m512;
    using D = __m512d;
    using FM = __mmask16;
    using DM = __mmask8;
    static constexpr int kF = 16, kD = 8;

    static F setf(float v) { return _mm512_set1_ps(v); }
    static F loadf(const float* p) { return _mm512_loadu_ps(p); }
    static F zerof() { return _mm512_setzero_ps(); }
    static F add(F a, F b) { return _mm512_add_ps(a, b); }
    static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
    static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
    static F div(F a, F b) { return _mm512_div_ps(a, b); }
    static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
    static F maxf(F a, F b) { return _mm512_max_ps(a, b); }
    static F roundn(F a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

    static FM nge(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_NGE_UQ); }
    static FM lt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
    static FM eq(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
    static FM neq(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_OQ); }
    static FM nlt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_NLT_UQ); }
    static F blendf(FM m, F a, F b) { return _mm512_mask_blend_ps(m, a, b); }
    static FM and_(FM a, FM b) { return FM(a & b); }
    static FM or_(FM a, FM b) { return FM(a | b); }
    static FM andnot(FM a, FM b) { return FM(~a & b); }
    static FM none() { return 0; }
    static bool any(FM m) { return m != 0; }
    static unsigned bits(FM m) { return unsigned(m); }

    static F exp_scale(F e, F n, FM under) {
        const __m512i b = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
        return _mm512_maskz_mul_ps(FM(~under), e, _mm512_castsi512_ps(b));
    }
    static void wide_scale(F q, F n, FM under, D* lo, D* hi) {
        const D one = _mm512_set1_pd(1.0);
        const FM keep = FM(~under);
        *lo = _mm512_maskz_scalef_pd(DM(keep), _mm512_add_pd(one, _mm512_cvtps_pd(_mm512_castps512_ps256(q))),
                                     _mm512_cvtps_pd(_mm512_castps512_ps256(n)));
        *hi = _mm512_maskz_scalef_pd(DM(keep >> 8), _mm512_add_pd(one, _mm512_cvtps_pd(_mm512_extractf32x8_ps(q, 1))),
                                     _mm512_cvtps_pd(_mm512_extractf32x8_ps(n, 1)));
    }

    static D lo_pd(F v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
    static D hi_pd(F v) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)); }
    static F to_ps(D lo, D hi) {
        return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
    }
    static D setd(double v) { return _mm512_set1_pd(v); }
    static D loadd(const double* p) { return _mm512_loadu_pd(p); }
    static void stored(double* p, D v) { _mm512_storeu_pd(p, v); }
    static D zerod() { return _mm512_setzero_pd(); }
    static D addd(D a, D b) { return _mm512_add_pd(a, b); }
    static D subd(D a, D b) { return _mm512_sub_pd(a, b); }
    static D muld(D a, D b) { return _mm512_mul_pd(a, b); }
    static D maxd(D a, D b) { return _mm512_max_pd(a, b); }
    static D absd(D v) { return _mm512_abs_pd(v); }
    static DM dm_lo(FM m) { return DM(m); }
    static DM dm_hi(FM m) { return DM(m >> 8); }
    static DM ge(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_GE_OQ); }
    static DM le(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_LE_OQ); }
    static D blendd(DM m, D a, D b) { return _mm512_mask_blend_pd(m, a, b); }
    static D add_if(D acc, DM m, D v) { return _mm512_mask_add_pd(acc, m, acc, v); }
    static D max_if(D acc, DM m, D v) { return _mm512_mask_max_pd(acc, m, acc, v); }

    static float hmaxf(F v) { return _mm512_reduce_max_ps(v); }
    static double hmaxd(D v) { return _mm512_reduce_max_pd(v); }
};

using K = SimdKernel<Avx512>;
const Kernels kAvx512 = {"avx512", K::head, K::pass2};

}  // namespace

const Kernels* kernels_avx512() { return &kAvx512; }

}  // namespace sluice::kld::fastk
