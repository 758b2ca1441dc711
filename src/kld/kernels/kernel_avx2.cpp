// AVX2 + FMA form of the fast kernel (kernel_fast.h). 16 floats per step in
// two halves of 8; fp64 lanes 0-3, 4-7, 8-11, 12-15 live in four 4-wide
// accumulators, the lanes of the scalar definition, and every operation is
// the scalar one, so results are bit-identical to it (and to AVX-512).
#include <immintrin.h>

#include "kld/kernels/kernel_fast.h"

namespace sluice::kld::fastk {

namespace {

inline __m256 exp8(__m256 t) {
    const __m256 lo = _mm256_set1_ps(kExpLo);
    const __m256 under = _mm256_cmp_ps(t, lo, _CMP_NGE_UQ);  // !(t >= lo)
    const __m256 tc = _mm256_blendv_ps(t, lo, under);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(tc, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kC1), tc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kC2), r);
    __m256 p = _mm256_set1_ps(kP0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
    const __m256 rr = _mm256_mul_ps(r, r);
    const __m256 e = _mm256_add_ps(_mm256_fmadd_ps(p, rr, r), _mm256_set1_ps(1.0f));
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(e, _mm256_castsi256_ps(bits)));
}

inline __m256 g8(__m256 u) {
    const __m256 w = _mm256_mul_ps(u, u);
    __m256 P = _mm256_set1_ps(kG4);
    P = _mm256_fmadd_ps(P, w, _mm256_set1_ps(kG3));
    P = _mm256_fmadd_ps(P, w, _mm256_set1_ps(kG2));
    P = _mm256_fmadd_ps(P, w, _mm256_set1_ps(kG1));
    P = _mm256_fmadd_ps(P, w, _mm256_set1_ps(kG0));
    const __m256 gs = _mm256_fnmadd_ps(w, P, _mm256_mul_ps(_mm256_set1_ps(0.5f), u));
    const __m256 s = exp8(_mm256_sub_ps(_mm256_setzero_ps(), u));
    const __m256 r = _mm256_div_ps(s, _mm256_add_ps(_mm256_set1_ps(2.0f), s));
    const __m256 r2 = _mm256_mul_ps(r, r);
    __m256 Q = _mm256_set1_ps(kA5);
    Q = _mm256_fmadd_ps(Q, r2, _mm256_set1_ps(kA4));
    Q = _mm256_fmadd_ps(Q, r2, _mm256_set1_ps(kA3));
    Q = _mm256_fmadd_ps(Q, r2, _mm256_set1_ps(kA2));
    Q = _mm256_fmadd_ps(Q, r2, _mm256_set1_ps(kA1));
    Q = _mm256_fmadd_ps(Q, r2, _mm256_set1_ps(kA0));
    const __m256 gl = _mm256_sub_ps(_mm256_set1_ps(kLn2f), _mm256_mul_ps(r, Q));
    return _mm256_blendv_ps(gl, gs, _mm256_cmp_ps(u, _mm256_set1_ps(kGSplit), _CMP_LT_OQ));
}

inline __m256d lo_pd(__m256 v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
inline __m256d hi_pd(__m256 v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }
inline __m256 to_ps(__m256d lo, __m256d hi) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
}
// A float lane mask (all-ones/zero per 32 bits) widened to the matching
// 4 double lanes.
inline __m256d mask_lo(__m256 m) { return _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(_mm256_castps_si256(m)))); }
inline __m256d mask_hi(__m256 m) { return _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(_mm256_castps_si256(m), 1))); }
inline __m256d abs_pd(__m256d v) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), v); }
// acc + v in the lanes of m; acc elsewhere (the scalar code skips those).
inline __m256d add_if(__m256d acc, __m256d m, __m256d v) { return _mm256_blendv_pd(acc, _mm256_add_pd(acc, v), m); }

// exp32_wide of kernel_fast.h on 8 lanes: fp32 reduction and polynomial,
// then 1 + q and the exact scaling by 2^n in fp64 (lanes 0-3 and 4-7).
inline void exp8_wide(__m256 t, __m256d* lo, __m256d* hi) {
    const __m256 lim = _mm256_set1_ps(kExpLo);
    const __m256 under = _mm256_cmp_ps(t, lim, _CMP_NGE_UQ);
    const __m256 tc = _mm256_blendv_ps(t, lim, under);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(tc, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kC1), tc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kC2), r);
    __m256 p = _mm256_set1_ps(kP0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
    const __m256 q = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    // 2^n as fp64 bits: (n + 1023) << 52, n in [-126, 0].
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i b0 = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(ni)), _mm256_set1_epi64x(1023)), 52);
    const __m256i b1 = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(ni, 1)), _mm256_set1_epi64x(1023)), 52);
    const __m256d one = _mm256_set1_pd(1.0);
    *lo = _mm256_andnot_pd(mask_lo(under), _mm256_mul_pd(_mm256_add_pd(one, lo_pd(q)), _mm256_castsi256_pd(b0)));
    *hi = _mm256_andnot_pd(mask_hi(under), _mm256_mul_pd(_mm256_add_pd(one, hi_pd(q)), _mm256_castsi256_pd(b1)));
}

bool tile_max(const float* x, int64_t t0, int64_t t1, float* M) {
    const int64_t e8 = t0 + ((t1 - t0) & ~int64_t(7));
    const __m256 inf = _mm256_set1_ps(kInfF);
    __m256 mx = _mm256_set1_ps(-kInfF), bad = _mm256_setzero_ps();
    for (int64_t v = t0; v < e8; v += 8) {
        const __m256 xv = _mm256_loadu_ps(x + v);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(xv, inf, _CMP_NLT_UQ));  // NaN or +inf
        mx = _mm256_max_ps(mx, xv);
    }
    alignas(32) float m8[8];
    _mm256_store_ps(m8, mx);
    float m = m8[0];
    for (int i = 1; i < 8; ++i) m = m8[i] > m ? m8[i] : m;
    *M = m;
    return !_mm256_movemask_ps(bad) && max_scalar(x, e8, t1, M);
}

void tile_sum(const float* x, int64_t t0, int64_t t1, float M, double* lanes, Head* h) {
    const int64_t e16 = t0 + ((t1 - t0) & ~int64_t(15));
    const __m256 Mv = _mm256_set1_ps(M);
    __m256d acc[4];
    for (int i = 0; i < 4; ++i) acc[i] = _mm256_loadu_pd(lanes + 4 * i);
    for (int64_t v = t0; v < e16; v += 16)
        for (int half = 0; half < 2; ++half) {
            const int64_t at = v + 8 * half;
            // Fetch the next tile's line while this one's exps run (see AVX-512).
            if (half == 0) _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(x + v) + kTile * 4), _MM_HINT_T0);
            const __m256 xv = _mm256_loadu_ps(x + at);
            __m256d elo, ehi;
            exp8_wide(_mm256_sub_ps(xv, Mv), &elo, &ehi);
            acc[2 * half] = _mm256_add_pd(acc[2 * half], elo);
            acc[2 * half + 1] = _mm256_add_pd(acc[2 * half + 1], ehi);
            const unsigned eq = unsigned(_mm256_movemask_ps(_mm256_cmp_ps(xv, Mv, _CMP_EQ_OQ)));
            if (eq) {
                if (h->argmax < 0) h->argmax = at + __builtin_ctz(eq);
                h->n_max += __builtin_popcount(eq);
            }
        }
    for (int i = 0; i < 4; ++i) _mm256_storeu_pd(lanes + 4 * i, acc[i]);
    sum_scalar(x, e16, t1, M, lanes, h);
}

bool head(const float* x, int64_t V, Head* h) { return head_tiled(x, V, h, tile_max, tile_sum); }

void pass2(const float* x, const float* y, int64_t V, float Mx, float My, double ox, double oy, bool want_js, Pass2* o) {
    const int64_t V16 = V & ~int64_t(15);
    const __m256 ninf = _mm256_set1_ps(-kInfF), Mxv = _mm256_set1_ps(Mx), Myv = _mm256_set1_ps(My);
    const __m256d oxv = _mm256_set1_pd(ox), oyv = _mm256_set1_pd(oy), zero = _mm256_setzero_pd(), ln2 = _mm256_set1_pd(kLn2d);
    __m256d kl[4], js[4], ae[4], am[4];
    for (int i = 0; i < 4; ++i) kl[i] = js[i] = ae[i] = am[i] = zero;
    __m256 inf_any = _mm256_setzero_ps(), tie_any = _mm256_setzero_ps();
    for (int64_t v = 0; v < V16; v += 16)
        for (int half = 0; half < 2; ++half) {
            const int k = 2 * half;  // accumulators k (low 4 floats) and k+1 (high 4)
            const __m256 xv = _mm256_loadu_ps(x + v + 8 * half), yv = _mm256_loadu_ps(y + v + 8 * half);
            tie_any = _mm256_or_ps(tie_any, _mm256_and_ps(_mm256_cmp_ps(xv, Mxv, _CMP_EQ_OQ), _mm256_cmp_ps(yv, Myv, _CMP_EQ_OQ)));
            const __m256 xf = _mm256_cmp_ps(xv, ninf, _CMP_NEQ_OQ), yf = _mm256_cmp_ps(yv, ninf, _CMP_NEQ_OQ);
            const __m256 both = _mm256_and_ps(xf, yf), xonly = _mm256_andnot_ps(yf, xf), yonly = _mm256_andnot_ps(xf, yf);
            const __m256 any = _mm256_or_ps(xf, yf);
            inf_any = _mm256_or_ps(inf_any, xonly);
            const __m256d b0 = mask_lo(both), b1 = mask_hi(both);
            const __m256d xl = lo_pd(xv), xh = hi_pd(xv), yl = lo_pd(yv), yh = hi_pd(yv);
            const __m256d al = _mm256_sub_pd(xl, oxv), ah = _mm256_sub_pd(xh, oxv);
            const __m256d bl = _mm256_sub_pd(yl, oyv), bh = _mm256_sub_pd(yh, oyv);
            const __m256d dl = _mm256_sub_pd(al, bl), dh = _mm256_sub_pd(ah, bh);
            const __m256 p = exp8(to_ps(al, ah));
            const __m256d pl = lo_pd(p), ph = hi_pd(p);
            const __m256d adl = abs_pd(_mm256_sub_pd(xl, yl)), adh = abs_pd(_mm256_sub_pd(xh, yh));
            ae[k] = add_if(ae[k], b0, adl);
            ae[k + 1] = add_if(ae[k + 1], b1, adh);
            am[k] = _mm256_max_pd(am[k], _mm256_and_pd(b0, adl));  // masked lanes offer 0 <= max
            am[k + 1] = _mm256_max_pd(am[k + 1], _mm256_and_pd(b1, adh));
            kl[k] = add_if(kl[k], b0, _mm256_mul_pd(pl, dl));
            kl[k + 1] = add_if(kl[k + 1], b1, _mm256_mul_pd(ph, dh));
            if (!want_js) continue;
            const __m256 q = exp8(to_ps(bl, bh));
            const __m256d ql = lo_pd(q), qh = hi_pd(q);
            const __m256d ul = abs_pd(dl), uh = abs_pd(dh);
            const __m256 g = g8(to_ps(ul, uh));
            const __m256d gl = lo_pd(g), gh = hi_pd(g);
            const __m256d gml = _mm256_sub_pd(gl, ul), gmh = _mm256_sub_pd(gh, uh);
            // a - m = g where a >= b, else g - u; b - m likewise.
            const __m256d gal = _mm256_blendv_pd(gml, gl, _mm256_cmp_pd(dl, zero, _CMP_GE_OQ));
            const __m256d gah = _mm256_blendv_pd(gmh, gh, _mm256_cmp_pd(dh, zero, _CMP_GE_OQ));
            const __m256d gbl = _mm256_blendv_pd(gml, gl, _mm256_cmp_pd(dl, zero, _CMP_LE_OQ));
            const __m256d gbh = _mm256_blendv_pd(gmh, gh, _mm256_cmp_pd(dh, zero, _CMP_LE_OQ));
            __m256d sl = _mm256_add_pd(_mm256_mul_pd(pl, gal), _mm256_mul_pd(ql, gbl));
            __m256d sh = _mm256_add_pd(_mm256_mul_pd(ph, gah), _mm256_mul_pd(qh, gbh));
            sl = _mm256_blendv_pd(sl, _mm256_mul_pd(pl, ln2), mask_lo(xonly));
            sh = _mm256_blendv_pd(sh, _mm256_mul_pd(ph, ln2), mask_hi(xonly));
            sl = _mm256_blendv_pd(sl, _mm256_mul_pd(ql, ln2), mask_lo(yonly));
            sh = _mm256_blendv_pd(sh, _mm256_mul_pd(qh, ln2), mask_hi(yonly));
            js[k] = add_if(js[k], mask_lo(any), sl);
            js[k + 1] = add_if(js[k + 1], mask_hi(any), sh);
        }
    Acc A;
    for (int i = 0; i < 4; ++i) {
        _mm256_storeu_pd(A.kl + 4 * i, kl[i]);
        _mm256_storeu_pd(A.js + 4 * i, js[i]);
        _mm256_storeu_pd(A.ae + 4 * i, ae[i]);
    }
    alignas(32) double m4[4];
    _mm256_store_pd(m4, _mm256_max_pd(_mm256_max_pd(am[0], am[1]), _mm256_max_pd(am[2], am[3])));
    A.ae_max = 0;
    for (double m : m4) A.ae_max = m > A.ae_max ? m : A.ae_max;
    A.kl_inf = _mm256_movemask_ps(inf_any) != 0;
    A.tie = _mm256_movemask_ps(tie_any) != 0;
    pass2_scalar(x, y, V16, V, Mx, My, ox, oy, want_js, &A);
    finish(A, o);
}

const Kernels kAvx2 = {"avx2", head, pass2};

}  // namespace

const Kernels* kernels_avx2() { return &kAvx2; }

}  // namespace sluice::kld::fastk
