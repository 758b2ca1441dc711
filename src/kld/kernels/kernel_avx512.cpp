// AVX-512 form of the fast kernel (kernel_fast.h). 16 floats per step; the
// low 8 feed fp64 lanes 0-7 and the high 8 lanes 8-15, exactly the lanes the
// scalar definition uses, and every operation is the scalar one on 16 lanes,
// so results are bit-identical to it. Compiled with AVX-512 flags; chosen
// at run time only when CPUID reports F, DQ, VL and BW.
#include <immintrin.h>

#include "kld/kernels/kernel_fast.h"

namespace sluice::kld::fastk {

namespace {

inline __m512 exp16(__m512 t) {
    const __m512 lo = _mm512_set1_ps(kExpLo);
    const __mmask16 under = _mm512_cmp_ps_mask(t, lo, _CMP_NGE_UQ);  // !(t >= lo)
    const __m512 tc = _mm512_mask_blend_ps(under, t, lo);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(tc, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kC1), tc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kC2), r);
    __m512 p = _mm512_set1_ps(kP0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
    const __m512 rr = _mm512_mul_ps(r, r);
    const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(p, rr, r), _mm512_set1_ps(1.0f));
    const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps(__mmask16(~under), e, _mm512_castsi512_ps(bits));
}

// exp32_wide of kernel_fast.h on 16 lanes: fp32 reduction and polynomial,
// then 1 + q and the exact scaling by 2^n in fp64 (lanes 0-7 and 8-15).
inline void exp16_wide(__m512 t, __m512d* lo, __m512d* hi) {
    const __m512 lim = _mm512_set1_ps(kExpLo);
    const __mmask16 under = _mm512_cmp_ps_mask(t, lim, _CMP_NGE_UQ);
    const __m512 tc = _mm512_mask_blend_ps(under, t, lim);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(tc, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kC1), tc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kC2), r);
    __m512 p = _mm512_set1_ps(kP0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
    const __m512 q = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    const __m512d one = _mm512_set1_pd(1.0);
    const __mmask16 keep = __mmask16(~under);
    *lo = _mm512_maskz_scalef_pd(__mmask8(keep), _mm512_add_pd(one, _mm512_cvtps_pd(_mm512_castps512_ps256(q))),
                                 _mm512_cvtps_pd(_mm512_castps512_ps256(n)));
    *hi = _mm512_maskz_scalef_pd(__mmask8(keep >> 8), _mm512_add_pd(one, _mm512_cvtps_pd(_mm512_extractf32x8_ps(q, 1))),
                                 _mm512_cvtps_pd(_mm512_extractf32x8_ps(n, 1)));
}

inline __m512 g16(__m512 u) {
    const __m512 w = _mm512_mul_ps(u, u);
    __m512 P = _mm512_set1_ps(kG4);
    P = _mm512_fmadd_ps(P, w, _mm512_set1_ps(kG3));
    P = _mm512_fmadd_ps(P, w, _mm512_set1_ps(kG2));
    P = _mm512_fmadd_ps(P, w, _mm512_set1_ps(kG1));
    P = _mm512_fmadd_ps(P, w, _mm512_set1_ps(kG0));
    const __m512 gs = _mm512_fnmadd_ps(w, P, _mm512_mul_ps(_mm512_set1_ps(0.5f), u));
    const __m512 s = exp16(_mm512_sub_ps(_mm512_setzero_ps(), u));
    const __m512 r = _mm512_div_ps(s, _mm512_add_ps(_mm512_set1_ps(2.0f), s));
    const __m512 r2 = _mm512_mul_ps(r, r);
    __m512 Q = _mm512_set1_ps(kA5);
    Q = _mm512_fmadd_ps(Q, r2, _mm512_set1_ps(kA4));
    Q = _mm512_fmadd_ps(Q, r2, _mm512_set1_ps(kA3));
    Q = _mm512_fmadd_ps(Q, r2, _mm512_set1_ps(kA2));
    Q = _mm512_fmadd_ps(Q, r2, _mm512_set1_ps(kA1));
    Q = _mm512_fmadd_ps(Q, r2, _mm512_set1_ps(kA0));
    const __m512 gl = _mm512_sub_ps(_mm512_set1_ps(kLn2f), _mm512_mul_ps(r, Q));
    const __mmask16 small = _mm512_cmp_ps_mask(u, _mm512_set1_ps(kGSplit), _CMP_LT_OQ);
    return _mm512_mask_blend_ps(small, gl, gs);
}

inline __m512d lo_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
inline __m512d hi_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)); }
inline __m512 to_ps(__m512d lo, __m512d hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}

bool tile_max(const float* x, int64_t t0, int64_t t1, float* M) {
    const int64_t e16 = t0 + ((t1 - t0) & ~int64_t(15));
    const __m512 inf = _mm512_set1_ps(kInfF);
    __m512 mx = _mm512_set1_ps(-kInfF);
    __mmask16 bad = 0;
    for (int64_t v = t0; v < e16; v += 16) {
        const __m512 xv = _mm512_loadu_ps(x + v);
        bad |= _mm512_cmp_ps_mask(xv, inf, _CMP_NLT_UQ);  // NaN or +inf
        mx = _mm512_max_ps(mx, xv);
    }
    *M = _mm512_reduce_max_ps(mx);
    return !bad && max_scalar(x, e16, t1, M);
}

void tile_sum(const float* x, int64_t t0, int64_t t1, float M, double* lanes, Head* h) {
    const int64_t e16 = t0 + ((t1 - t0) & ~int64_t(15));
    const __m512 Mv = _mm512_set1_ps(M);
    __m512d a0 = _mm512_loadu_pd(lanes), a1 = _mm512_loadu_pd(lanes + 8);
    for (int64_t v = t0; v < e16; v += 16) {
        // Rows arrive from disk buffers, not cache: fetch the next tile's
        // line while this one's exps run, so the next tile's max sweep does
        // not wait on memory. (A prefetch never faults; past the row it is
        // only wasted.)
        _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(x + v) + kTile * 4), _MM_HINT_T0);
        const __m512 xv = _mm512_loadu_ps(x + v);
        __m512d elo, ehi;
        exp16_wide(_mm512_sub_ps(xv, Mv), &elo, &ehi);
        a0 = _mm512_add_pd(a0, elo);
        a1 = _mm512_add_pd(a1, ehi);
        const __mmask16 eq = _mm512_cmp_ps_mask(xv, Mv, _CMP_EQ_OQ);
        if (eq) {
            if (h->argmax < 0) h->argmax = v + __builtin_ctz(unsigned(eq));
            h->n_max += __builtin_popcount(unsigned(eq));
        }
    }
    _mm512_storeu_pd(lanes, a0);
    _mm512_storeu_pd(lanes + 8, a1);
    sum_scalar(x, e16, t1, M, lanes, h);
}

bool head(const float* x, int64_t V, Head* h) { return head_tiled(x, V, h, tile_max, tile_sum); }

void pass2(const float* x, const float* y, int64_t V, float Mx, float My, double ox, double oy, bool want_js, Pass2* o) {
    const int64_t V16 = V & ~int64_t(15);
    const __m512 ninf = _mm512_set1_ps(-kInfF), Mxv = _mm512_set1_ps(Mx), Myv = _mm512_set1_ps(My);
    const __m512d oxv = _mm512_set1_pd(ox), oyv = _mm512_set1_pd(oy), zero = _mm512_setzero_pd(), ln2 = _mm512_set1_pd(kLn2d);
    __m512d kl0 = zero, kl1 = zero, js0 = zero, js1 = zero, ae0 = zero, ae1 = zero, am0 = zero, am1 = zero;
    __mmask16 inf_any = 0, tie_any = 0;
    for (int64_t v = 0; v < V16; v += 16) {
        const __m512 xv = _mm512_loadu_ps(x + v), yv = _mm512_loadu_ps(y + v);
        tie_any |= _mm512_cmp_ps_mask(xv, Mxv, _CMP_EQ_OQ) & _mm512_cmp_ps_mask(yv, Myv, _CMP_EQ_OQ);
        const __mmask16 xf = _mm512_cmp_ps_mask(xv, ninf, _CMP_NEQ_OQ), yf = _mm512_cmp_ps_mask(yv, ninf, _CMP_NEQ_OQ);
        const __mmask16 both = xf & yf, xonly = xf & __mmask16(~yf), yonly = __mmask16(~xf) & yf, any = xf | yf;
        inf_any |= xonly;
        const __mmask8 b0 = __mmask8(both), b1 = __mmask8(both >> 8);
        const __m512d xl = lo_pd(xv), xh = hi_pd(xv), yl = lo_pd(yv), yh = hi_pd(yv);
        const __m512d al = _mm512_sub_pd(xl, oxv), ah = _mm512_sub_pd(xh, oxv);
        const __m512d bl = _mm512_sub_pd(yl, oyv), bh = _mm512_sub_pd(yh, oyv);
        const __m512d dl = _mm512_sub_pd(al, bl), dh = _mm512_sub_pd(ah, bh);
        const __m512 p = exp16(to_ps(al, ah));
        const __m512d pl = lo_pd(p), ph = hi_pd(p);
        const __m512d adl = _mm512_abs_pd(_mm512_sub_pd(xl, yl)), adh = _mm512_abs_pd(_mm512_sub_pd(xh, yh));
        ae0 = _mm512_mask_add_pd(ae0, b0, ae0, adl);
        ae1 = _mm512_mask_add_pd(ae1, b1, ae1, adh);
        am0 = _mm512_mask_max_pd(am0, b0, am0, adl);
        am1 = _mm512_mask_max_pd(am1, b1, am1, adh);
        kl0 = _mm512_mask_add_pd(kl0, b0, kl0, _mm512_mul_pd(pl, dl));
        kl1 = _mm512_mask_add_pd(kl1, b1, kl1, _mm512_mul_pd(ph, dh));
        if (!want_js) continue;
        const __m512 q = exp16(to_ps(bl, bh));
        const __m512d ql = lo_pd(q), qh = hi_pd(q);
        const __m512d ul = _mm512_abs_pd(dl), uh = _mm512_abs_pd(dh);
        const __m512 g = g16(to_ps(ul, uh));
        const __m512d gl = lo_pd(g), gh = hi_pd(g);
        const __m512d gml = _mm512_sub_pd(gl, ul), gmh = _mm512_sub_pd(gh, uh);
        // a - m = g where a >= b, else g - u; b - m likewise.
        const __m512d gal = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(dl, zero, _CMP_GE_OQ), gml, gl);
        const __m512d gah = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(dh, zero, _CMP_GE_OQ), gmh, gh);
        const __m512d gbl = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(dl, zero, _CMP_LE_OQ), gml, gl);
        const __m512d gbh = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(dh, zero, _CMP_LE_OQ), gmh, gh);
        __m512d sl = _mm512_add_pd(_mm512_mul_pd(pl, gal), _mm512_mul_pd(ql, gbl));
        __m512d sh = _mm512_add_pd(_mm512_mul_pd(ph, gah), _mm512_mul_pd(qh, gbh));
        sl = _mm512_mask_mul_pd(sl, __mmask8(xonly), pl, ln2);
        sh = _mm512_mask_mul_pd(sh, __mmask8(xonly >> 8), ph, ln2);
        sl = _mm512_mask_mul_pd(sl, __mmask8(yonly), ql, ln2);
        sh = _mm512_mask_mul_pd(sh, __mmask8(yonly >> 8), qh, ln2);
        js0 = _mm512_mask_add_pd(js0, __mmask8(any), js0, sl);
        js1 = _mm512_mask_add_pd(js1, __mmask8(any >> 8), js1, sh);
    }
    Acc A;
    _mm512_storeu_pd(A.kl, kl0);
    _mm512_storeu_pd(A.kl + 8, kl1);
    _mm512_storeu_pd(A.js, js0);
    _mm512_storeu_pd(A.js + 8, js1);
    _mm512_storeu_pd(A.ae, ae0);
    _mm512_storeu_pd(A.ae + 8, ae1);
    A.ae_max = _mm512_reduce_max_pd(_mm512_max_pd(am0, am1));
    A.kl_inf = inf_any != 0;
    A.tie = tie_any != 0;
    pass2_scalar(x, y, V16, V, Mx, My, ox, oy, want_js, &A);
    finish(A, o);
}

const Kernels kAvx512 = {"avx512", head, pass2};

}  // namespace

const Kernels* kernels_avx512() { return &kAvx512; }

}  // namespace sluice::kld::fastk
