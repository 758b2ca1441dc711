// NEON (AArch64) form of the fast kernel (kernel_fast.h). 16 floats per step
// in four quarters of 4; fp64 lanes 2k, 2k+1 of the scalar definition live in
// accumulator k (eight 2-wide registers), and every operation is the scalar
// one (same fused multiply-adds, conversions and lane of every element), so
// results are bit-identical to it and to AVX2 / AVX-512.
#include <arm_neon.h>

#include "kld/kernels/kernel_fast.h"

namespace sluice::kld::fastk {

namespace {

inline float32x4_t exp4(float32x4_t t) {
    const float32x4_t lo = vdupq_n_f32(kExpLo);
    const uint32x4_t under = vmvnq_u32(vcgeq_f32(t, lo));  // !(t >= lo), also NaN
    const float32x4_t tc = vbslq_f32(under, lo, t);
    const float32x4_t n = vrndnq_f32(vmulq_f32(tc, vdupq_n_f32(kLog2e)));  // nearest, ties to even
    float32x4_t r = vfmsq_f32(tc, n, vdupq_n_f32(kC1));                      // fma(-n, C1, tc)
    r = vfmsq_f32(r, n, vdupq_n_f32(kC2));
    float32x4_t p = vdupq_n_f32(kP0);
    p = vfmaq_f32(vdupq_n_f32(kP1), p, r);
    p = vfmaq_f32(vdupq_n_f32(kP2), p, r);
    p = vfmaq_f32(vdupq_n_f32(kP3), p, r);
    p = vfmaq_f32(vdupq_n_f32(kP4), p, r);
    p = vfmaq_f32(vdupq_n_f32(kP5), p, r);
    const float32x4_t rr = vmulq_f32(r, r);
    const float32x4_t e = vaddq_f32(vfmaq_f32(r, p, rr), vdupq_n_f32(1.0f));
    const int32x4_t bits = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vbslq_f32(under, vdupq_n_f32(0.0f), vmulq_f32(e, vreinterpretq_f32_s32(bits)));
}

inline float32x4_t g4(float32x4_t u) {
    const float32x4_t w = vmulq_f32(u, u);
    float32x4_t P = vdupq_n_f32(kG4);
    P = vfmaq_f32(vdupq_n_f32(kG3), P, w);
    P = vfmaq_f32(vdupq_n_f32(kG2), P, w);
    P = vfmaq_f32(vdupq_n_f32(kG1), P, w);
    P = vfmaq_f32(vdupq_n_f32(kG0), P, w);
    const float32x4_t gs = vfmsq_f32(vmulq_f32(vdupq_n_f32(0.5f), u), w, P);  // fma(-w, P, 0.5u)
    const float32x4_t s = exp4(vnegq_f32(u));
    const float32x4_t r = vdivq_f32(s, vaddq_f32(vdupq_n_f32(2.0f), s));
    const float32x4_t r2 = vmulq_f32(r, r);
    float32x4_t Q = vdupq_n_f32(kA5);
    Q = vfmaq_f32(vdupq_n_f32(kA4), Q, r2);
    Q = vfmaq_f32(vdupq_n_f32(kA3), Q, r2);
    Q = vfmaq_f32(vdupq_n_f32(kA2), Q, r2);
    Q = vfmaq_f32(vdupq_n_f32(kA1), Q, r2);
    Q = vfmaq_f32(vdupq_n_f32(kA0), Q, r2);
    const float32x4_t gl = vsubq_f32(vdupq_n_f32(kLn2f), vmulq_f32(r, Q));
    return vbslq_f32(vcltq_f32(u, vdupq_n_f32(kGSplit)), gs, gl);
}

inline float64x2_t lo_pd(float32x4_t v) { return vcvt_f64_f32(vget_low_f32(v)); }
inline float64x2_t hi_pd(float32x4_t v) { return vcvt_high_f64_f32(v); }
inline float32x4_t to_ps(float64x2_t lo, float64x2_t hi) { return vcvt_high_f32_f64(vcvt_f32_f64(lo), hi); }
// A float lane mask widened to the matching 2 double lanes.
inline uint64x2_t mask_lo(uint32x4_t m) { return vreinterpretq_u64_s64(vmovl_s32(vget_low_s32(vreinterpretq_s32_u32(m)))); }
inline uint64x2_t mask_hi(uint32x4_t m) { return vreinterpretq_u64_s64(vmovl_high_s32(vreinterpretq_s32_u32(m))); }
// acc + v in the lanes of m; acc elsewhere (the scalar code skips those).
inline float64x2_t add_if(float64x2_t acc, uint64x2_t m, float64x2_t v) { return vbslq_f64(m, vaddq_f64(acc, v), acc); }

// exp32_wide of kernel_fast.h on 4 lanes: fp32 reduction and polynomial,
// then 1 + q and the exact scaling by 2^n in fp64.
inline void exp4_wide(float32x4_t t, float64x2_t* lo, float64x2_t* hi) {
    const float32x4_t lim = vdupq_n_f32(kExpLo);
    const uint32x4_t under = vmvnq_u32(vcgeq_f32(t, lim));
    const float32x4_t tc = vbslq_f32(under, lim, t);
    const float32x4_t n = vrndnq_f32(vmulq_f32(tc, vdupq_n_f32(kLog2e)));
    float32x4_t r = vfmsq_f32(tc, n, vdupq_n_f32(kC1));
    r = vfmsq_f32(r, n, vdupq_n_f32(kC2));
    float32x4_t p = vdupq_n_f32(kP0);
    p = vfmaq_f32(vdupq_n_f32(kP1), p, r);
    p = vfmaq_f32(vdupq_n_f32(kP2), p, r);
    p = vfmaq_f32(vdupq_n_f32(kP3), p, r);
    p = vfmaq_f32(vdupq_n_f32(kP4), p, r);
    p = vfmaq_f32(vdupq_n_f32(kP5), p, r);
    const float32x4_t q = vfmaq_f32(r, p, vmulq_f32(r, r));
    // 2^n as fp64 bits: (n + 1023) << 52, n in [-126, 0].
    const int32x4_t ni = vcvtq_s32_f32(n);
    const int64x2_t b0 = vshlq_n_s64(vaddq_s64(vmovl_s32(vget_low_s32(ni)), vdupq_n_s64(1023)), 52);
    const int64x2_t b1 = vshlq_n_s64(vaddq_s64(vmovl_high_s32(ni), vdupq_n_s64(1023)), 52);
    const float64x2_t one = vdupq_n_f64(1.0), zero = vdupq_n_f64(0.0);
    *lo = vbslq_f64(mask_lo(under), zero, vmulq_f64(vaddq_f64(one, lo_pd(q)), vreinterpretq_f64_s64(b0)));
    *hi = vbslq_f64(mask_hi(under), zero, vmulq_f64(vaddq_f64(one, hi_pd(q)), vreinterpretq_f64_s64(b1)));
}

bool tile_max(const float* x, int64_t t0, int64_t t1, float* M) {
    const int64_t e4 = t0 + ((t1 - t0) & ~int64_t(3));
    const float32x4_t inf = vdupq_n_f32(kInfF);
    float32x4_t mx = vdupq_n_f32(-kInfF);
    uint32x4_t ok = vdupq_n_u32(~0u);
    for (int64_t v = t0; v < e4; v += 4) {
        const float32x4_t xv = vld1q_f32(x + v);
        ok = vandq_u32(ok, vcltq_f32(xv, inf));  // false for NaN or +inf
        mx = vmaxq_f32(mx, xv);
    }
    // The maximum of finite values and -inf does not depend on the order.
    const float m = vmaxvq_f32(mx);
    if (m > *M) *M = m;
    return vminvq_u32(ok) != 0 && max_scalar(x, e4, t1, M);
}

void tile_sum(const float* x, int64_t t0, int64_t t1, float M, double* lanes, Head* h) {
    const int64_t e16 = t0 + ((t1 - t0) & ~int64_t(15));
    const float32x4_t Mv = vdupq_n_f32(M);
    float64x2_t acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = vld1q_f64(lanes + 2 * i);
    for (int64_t v = t0; v < e16; v += 16) {
        uint32x4_t eq = vdupq_n_u32(0);
        for (int qd = 0; qd < 4; ++qd) {
            const float32x4_t xv = vld1q_f32(x + v + 4 * qd);
            float64x2_t elo, ehi;
            exp4_wide(vsubq_f32(xv, Mv), &elo, &ehi);
            acc[2 * qd] = vaddq_f64(acc[2 * qd], elo);
            acc[2 * qd + 1] = vaddq_f64(acc[2 * qd + 1], ehi);
            eq = vorrq_u32(eq, vceqq_f32(xv, Mv));
        }
        if (vmaxvq_u32(eq)) {  // a maximum in these 16: the scalar bookkeeping
            for (int64_t k = v; k < v + 16; ++k)
                if (x[k] == M) {
                    if (h->argmax < 0) h->argmax = k;
                    ++h->n_max;
                }
        }
    }
    for (int i = 0; i < 8; ++i) vst1q_f64(lanes + 2 * i, acc[i]);
    sum_scalar(x, e16, t1, M, lanes, h);
}

bool head(const float* x, int64_t V, Head* h) { return head_tiled(x, V, h, tile_max, tile_sum); }

void pass2(const float* x, const float* y, int64_t V, float Mx, float My, double ox, double oy, bool want_js, Pass2* o) {
    const int64_t V16 = V & ~int64_t(15);
    const float32x4_t ninf = vdupq_n_f32(-kInfF), Mxv = vdupq_n_f32(Mx), Myv = vdupq_n_f32(My);
    const float64x2_t oxv = vdupq_n_f64(ox), oyv = vdupq_n_f64(oy), zero = vdupq_n_f64(0.0), ln2 = vdupq_n_f64(kLn2d);
    float64x2_t kl[8], js[8], ae[8], am[8];
    for (int i = 0; i < 8; ++i) kl[i] = js[i] = ae[i] = am[i] = zero;
    uint32x4_t inf_any = vdupq_n_u32(0), tie_any = vdupq_n_u32(0);
    for (int64_t v = 0; v < V16; v += 16)
        for (int qd = 0; qd < 4; ++qd) {
            const int k = 2 * qd;  // accumulators k (low 2 floats) and k+1 (high 2)
            const float32x4_t xv = vld1q_f32(x + v + 4 * qd), yv = vld1q_f32(y + v + 4 * qd);
            tie_any = vorrq_u32(tie_any, vandq_u32(vceqq_f32(xv, Mxv), vceqq_f32(yv, Myv)));
            const uint32x4_t xf = vmvnq_u32(vceqq_f32(xv, ninf)), yf = vmvnq_u32(vceqq_f32(yv, ninf));
            const uint32x4_t both = vandq_u32(xf, yf), xonly = vbicq_u32(xf, yf), yonly = vbicq_u32(yf, xf);
            const uint32x4_t any = vorrq_u32(xf, yf);
            inf_any = vorrq_u32(inf_any, xonly);
            const uint64x2_t b0 = mask_lo(both), b1 = mask_hi(both);
            const float64x2_t xl = lo_pd(xv), xh = hi_pd(xv), yl = lo_pd(yv), yh = hi_pd(yv);
            const float64x2_t al = vsubq_f64(xl, oxv), ah = vsubq_f64(xh, oxv);
            const float64x2_t bl = vsubq_f64(yl, oyv), bh = vsubq_f64(yh, oyv);
            const float64x2_t dl = vsubq_f64(al, bl), dh = vsubq_f64(ah, bh);
            const float32x4_t p = exp4(to_ps(al, ah));
            const float64x2_t pl = lo_pd(p), ph = hi_pd(p);
            const float64x2_t adl = vabsq_f64(vsubq_f64(xl, yl)), adh = vabsq_f64(vsubq_f64(xh, yh));
            ae[k] = add_if(ae[k], b0, adl);
            ae[k + 1] = add_if(ae[k + 1], b1, adh);
            // Masked lanes offer 0 <= max (and never a NaN from inf - inf).
            am[k] = vmaxq_f64(am[k], vbslq_f64(b0, adl, zero));
            am[k + 1] = vmaxq_f64(am[k + 1], vbslq_f64(b1, adh, zero));
            kl[k] = add_if(kl[k], b0, vmulq_f64(pl, dl));
            kl[k + 1] = add_if(kl[k + 1], b1, vmulq_f64(ph, dh));
            if (!want_js) continue;
            const float32x4_t q = exp4(to_ps(bl, bh));
            const float64x2_t ql = lo_pd(q), qh = hi_pd(q);
            const float64x2_t ul = vabsq_f64(dl), uh = vabsq_f64(dh);
            const float32x4_t g = g4(to_ps(ul, uh));
            const float64x2_t gl = lo_pd(g), gh = hi_pd(g);
            const float64x2_t gml = vsubq_f64(gl, ul), gmh = vsubq_f64(gh, uh);
            // a - m = g where a >= b, else g - u; b - m likewise.
            const float64x2_t gal = vbslq_f64(vcgeq_f64(dl, zero), gl, gml);
            const float64x2_t gah = vbslq_f64(vcgeq_f64(dh, zero), gh, gmh);
            const float64x2_t gbl = vbslq_f64(vcleq_f64(dl, zero), gl, gml);
            const float64x2_t gbh = vbslq_f64(vcleq_f64(dh, zero), gh, gmh);
            float64x2_t sl = vaddq_f64(vmulq_f64(pl, gal), vmulq_f64(ql, gbl));
            float64x2_t sh = vaddq_f64(vmulq_f64(ph, gah), vmulq_f64(qh, gbh));
            sl = vbslq_f64(mask_lo(xonly), vmulq_f64(pl, ln2), sl);
            sh = vbslq_f64(mask_hi(xonly), vmulq_f64(ph, ln2), sh);
            sl = vbslq_f64(mask_lo(yonly), vmulq_f64(ql, ln2), sl);
            sh = vbslq_f64(mask_hi(yonly), vmulq_f64(qh, ln2), sh);
            js[k] = add_if(js[k], mask_lo(any), sl);
            js[k + 1] = add_if(js[k + 1], mask_hi(any), sh);
        }
    Acc A;
    for (int i = 0; i < 8; ++i) {
        vst1q_f64(A.kl + 2 * i, kl[i]);
        vst1q_f64(A.js + 2 * i, js[i]);
        vst1q_f64(A.ae + 2 * i, ae[i]);
    }
    float64x2_t m = am[0];
    for (int i = 1; i < 8; ++i) m = vmaxq_f64(m, am[i]);
    A.ae_max = vmaxvq_f64(m);
    A.kl_inf = vmaxvq_u32(inf_any) != 0;
    A.tie = vmaxvq_u32(tie_any) != 0;
    pass2_scalar(x, y, V16, V, Mx, My, ox, oy, want_js, &A);
    finish(A, o);
}

const Kernels kNeon = {"neon", head, pass2};

}  // namespace

const Kernels* kernels_neon() { return &kNeon; }

}  // namespace sluice::kld::fastk
