// The fast kernel (kernel_fast.h) written once over a SIMD pack and
// instantiated per ISA: kernel_avx2.cpp (8 floats, 4 doubles a vector) and
// kernel_avx512.cpp (16 and 8). A step covers the 16 floats of the scalar
// definition's 16 fp64 lanes: S = 16 / F float vectors, each widened into
// two double vectors, so NA = 16 / D accumulators hold exactly lanes 0-15 in
// order. Every lane runs the scalar operations in the scalar order, and no
// reduction runs across lanes except max (exact), so every instantiation
// gives the scalar kernel's bits.
//
// A pack P provides (F: float vector, D: double vector, FM/DM: float/double
// lane masks; "blend(m, a, b)" is m ? b : a):
//   kF, kD; F setf, loadf, add, sub, mul, div, fmadd(a,b,c)=a*b+c,
//   fnmadd(a,b,c)=c-a*b, maxf, roundn (to nearest), zerof;
//   FM nge (!(a>=b)), lt, eq, neq, nlt (!(a<b)); blendf; and_, or_,
//   andnot(a,b)=~a&b, none, any, bits (lane i -> bit i);
//   F exp_scale(e, n, under): under ? 0 : e * 2^n;
//   void wide_scale(q, n, under, &lo, &hi): under ? 0 : (1 + q) * 2^n in fp64;
//   D lo_pd, hi_pd (the low/high half widened), F to_ps(lo, hi);
//   D setd, loadd, stored, addd, subd, muld, maxd, absd, zerod; DM dm_lo,
//   dm_hi (a float mask's halves), ge, le; blendd; add_if(acc, m, v) =
//   m ? acc + v : acc; max_if(acc, m, v) = m ? max(acc, v) : acc;
//   float hmaxf(F); double hmaxd(D).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kld/kernels/kernel_fast.h"

namespace sluice::kld::fastk {
// Internal linkage: each ISA file compiles this with its own flags, so its
// copies must never be merged with another file's by the linker.
namespace {

template <class P>
struct SimdKernel {
    using F = typename P::F;
    using D = typename P::D;
    using FM = typename P::FM;
    static constexpr int kS = 16 / P::kF;   // float vectors per 16-lane step
    static constexpr int kNA = 16 / P::kD;  // double accumulators: lanes 0-15

    // e^t in fp32 (exp32 of kernel_fast.h), 0 below kExpLo.
    static F exp(F t) {
        const F lo = P::setf(kExpLo);
        const FM under = P::nge(t, lo);
        const F tc = P::blendf(under, t, lo);
        const F n = P::roundn(P::mul(tc, P::setf(kLog2e)));
        F r = P::fnmadd(n, P::setf(kC1), tc);
        r = P::fnmadd(n, P::setf(kC2), r);
        F p = P::setf(kP0);
        p = P::fmadd(p, r, P::setf(kP1));
        p = P::fmadd(p, r, P::setf(kP2));
        p = P::fmadd(p, r, P::setf(kP3));
        p = P::fmadd(p, r, P::setf(kP4));
        p = P::fmadd(p, r, P::setf(kP5));
        const F rr = P::mul(r, r);
        const F e = P::add(P::fmadd(p, rr, r), P::setf(1.0f));
        return P::exp_scale(e, n, under);
    }

    // exp32_wide of kernel_fast.h: fp32 reduction and polynomial, then
    // 1 + q and the exact scaling by 2^n in fp64 (the low and high halves).
    static void exp_wide(F t, D* lo, D* hi) {
        const F lim = P::setf(kExpLo);
        const FM under = P::nge(t, lim);
        const F tc = P::blendf(under, t, lim);
        const F n = P::roundn(P::mul(tc, P::setf(kLog2e)));
        F r = P::fnmadd(n, P::setf(kC1), tc);
        r = P::fnmadd(n, P::setf(kC2), r);
        F p = P::setf(kP0);
        p = P::fmadd(p, r, P::setf(kP1));
        p = P::fmadd(p, r, P::setf(kP2));
        p = P::fmadd(p, r, P::setf(kP3));
        p = P::fmadd(p, r, P::setf(kP4));
        p = P::fmadd(p, r, P::setf(kP5));
        const F q = P::fmadd(p, P::mul(r, r), r);
        P::wide_scale(q, n, under, lo, hi);
    }

    // The JS helper g(u) of kernel_fast.h.
    static F g(F u) {
        const F w = P::mul(u, u);
        F Pw = P::setf(kG4);
        Pw = P::fmadd(Pw, w, P::setf(kG3));
        Pw = P::fmadd(Pw, w, P::setf(kG2));
        Pw = P::fmadd(Pw, w, P::setf(kG1));
        Pw = P::fmadd(Pw, w, P::setf(kG0));
        const F gs = P::fnmadd(w, Pw, P::mul(P::setf(0.5f), u));
        const F s = exp(P::sub(P::zerof(), u));
        const F r = P::div(s, P::add(P::setf(2.0f), s));
        const F r2 = P::mul(r, r);
        F Q = P::setf(kA5);
        Q = P::fmadd(Q, r2, P::setf(kA4));
        Q = P::fmadd(Q, r2, P::setf(kA3));
        Q = P::fmadd(Q, r2, P::setf(kA2));
        Q = P::fmadd(Q, r2, P::setf(kA1));
        Q = P::fmadd(Q, r2, P::setf(kA0));
        const F gl = P::sub(P::setf(kLn2f), P::mul(r, Q));
        return P::blendf(P::lt(u, P::setf(kGSplit)), gl, gs);
    }

    static bool tile_max(const float* x, int64_t t0, int64_t t1, float* M) {
        const int64_t e = t0 + ((t1 - t0) & ~int64_t(P::kF - 1));
        const F inf = P::setf(kInfF);
        F mx = P::setf(-kInfF);
        FM bad = P::none();
        for (int64_t v = t0; v < e; v += P::kF) {
            const F xv = P::loadf(x + v);
            bad = P::or_(bad, P::nlt(xv, inf));  // NaN or +inf
            mx = P::maxf(mx, xv);
        }
        *M = P::hmaxf(mx);
        return !P::any(bad) && max_scalar(x, e, t1, M);
    }

    static void tile_sum(const float* x, int64_t t0, int64_t t1, float M, double* lanes, Head* h) {
        const int64_t e16 = t0 + ((t1 - t0) & ~int64_t(15));
        const F Mv = P::setf(M);
        D acc[kNA];
        for (int i = 0; i < kNA; ++i) acc[i] = P::loadd(lanes + P::kD * i);
        for (int64_t v = t0; v < e16; v += 16) {
            // Rows arrive from disk buffers, not cache: fetch the next tile's
            // line while this one's exps run, so the next tile's max sweep
            // does not wait on memory. (A prefetch never faults; past the row
            // it is only wasted.)
            _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(x + v) + kTile * 4), _MM_HINT_T0);
            for (int s = 0; s < kS; ++s) {
                const int64_t at = v + P::kF * s;
                const F xv = P::loadf(x + at);
                D elo = P::zerod(), ehi = P::zerod();
                exp_wide(P::sub(xv, Mv), &elo, &ehi);
                acc[2 * s] = P::addd(acc[2 * s], elo);
                acc[2 * s + 1] = P::addd(acc[2 * s + 1], ehi);
                const unsigned eq = P::bits(P::eq(xv, Mv));
                if (eq) {
                    if (h->argmax < 0) h->argmax = at + __builtin_ctz(eq);
                    h->n_max += __builtin_popcount(eq);
                }
            }
        }
        for (int i = 0; i < kNA; ++i) P::stored(lanes + P::kD * i, acc[i]);
        sum_scalar(x, e16, t1, M, lanes, h);
    }

    static bool head(const float* x, int64_t V, Head* h) { return head_tiled(x, V, h, tile_max, tile_sum); }

    static void pass2(const float* x, const float* y, int64_t V, float Mx, float My, double ox, double oy,
                      bool want_js, Pass2* o) {
        const int64_t V16 = V & ~int64_t(15);
        const F ninf = P::setf(-kInfF), Mxv = P::setf(Mx), Myv = P::setf(My);
        const D oxv = P::setd(ox), oyv = P::setd(oy), zero = P::zerod(), ln2 = P::setd(kLn2d);
        D kl[kNA], js[kNA], ae[kNA], am[kNA];
        for (int i = 0; i < kNA; ++i) kl[i] = js[i] = ae[i] = am[i] = zero;
        FM inf_any = P::none(), tie_any = P::none();
        for (int64_t v = 0; v < V16; v += 16)
            for (int s = 0; s < kS; ++s) {
                const int k = 2 * s;  // accumulators k (low half) and k+1 (high half)
                const F xv = P::loadf(x + v + P::kF * s), yv = P::loadf(y + v + P::kF * s);
                tie_any = P::or_(tie_any, P::and_(P::eq(xv, Mxv), P::eq(yv, Myv)));
                const FM xf = P::neq(xv, ninf), yf = P::neq(yv, ninf);
                const FM both = P::and_(xf, yf), xonly = P::andnot(yf, xf), yonly = P::andnot(xf, yf);
                const FM any = P::or_(xf, yf);
                inf_any = P::or_(inf_any, xonly);
                const auto b0 = P::dm_lo(both), b1 = P::dm_hi(both);
                const D xl = P::lo_pd(xv), xh = P::hi_pd(xv), yl = P::lo_pd(yv), yh = P::hi_pd(yv);
                const D al = P::subd(xl, oxv), ah = P::subd(xh, oxv);
                const D bl = P::subd(yl, oyv), bh = P::subd(yh, oyv);
                const D dl = P::subd(al, bl), dh = P::subd(ah, bh);
                const F p = exp(P::to_ps(al, ah));
                const D pl = P::lo_pd(p), ph = P::hi_pd(p);
                const D adl = P::absd(P::subd(xl, yl)), adh = P::absd(P::subd(xh, yh));
                ae[k] = P::add_if(ae[k], b0, adl);
                ae[k + 1] = P::add_if(ae[k + 1], b1, adh);
                am[k] = P::max_if(am[k], b0, adl);
                am[k + 1] = P::max_if(am[k + 1], b1, adh);
                kl[k] = P::add_if(kl[k], b0, P::muld(pl, dl));
                kl[k + 1] = P::add_if(kl[k + 1], b1, P::muld(ph, dh));
                if (!want_js) continue;
                const F q = exp(P::to_ps(bl, bh));
                const D ql = P::lo_pd(q), qh = P::hi_pd(q);
                const D ul = P::absd(dl), uh = P::absd(dh);
                const F gv = g(P::to_ps(ul, uh));
                const D gl = P::lo_pd(gv), gh = P::hi_pd(gv);
                const D gml = P::subd(gl, ul), gmh = P::subd(gh, uh);
                // a - m = g where a >= b, else g - u; b - m likewise.
                const D gal = P::blendd(P::ge(dl, zero), gml, gl);
                const D gah = P::blendd(P::ge(dh, zero), gmh, gh);
                const D gbl = P::blendd(P::le(dl, zero), gml, gl);
                const D gbh = P::blendd(P::le(dh, zero), gmh, gh);
                D sl = P::addd(P::muld(pl, gal), P::muld(ql, gbl));
                D sh = P::addd(P::muld(ph, gah), P::muld(qh, gbh));
                sl = P::blendd(P::dm_lo(xonly), sl, P::muld(pl, ln2));
                sh = P::blendd(P::dm_hi(xonly), sh, P::muld(ph, ln2));
                sl = P::blendd(P::dm_lo(yonly), sl, P::muld(ql, ln2));
                sh = P::blendd(P::dm_hi(yonly), sh, P::muld(qh, ln2));
                js[k] = P::add_if(js[k], P::dm_lo(any), sl);
                js[k + 1] = P::add_if(js[k + 1], P::dm_hi(any), sh);
            }
        Acc A;
        for (int i = 0; i < kNA; ++i) {
            P::stored(A.kl + P::kD * i, kl[i]);
            P::stored(A.js + P::kD * i, js[i]);
            P::stored(A.ae + P::kD * i, ae[i]);
        }
        D amx = am[0];  // every lane >= +0 and finite: max is exact in any order
        for (int i = 1; i < kNA; ++i) amx = P::maxd(amx, am[i]);
        A.ae_max = P::hmaxd(amx);
        A.kl_inf = P::any(inf_any);
        A.tie = P::any(tie_any);
        pass2_scalar(x, y, V16, V, Mx, My, ox, oy, want_js, &A);
        finish(A, o);
    }
};

}  // namespace
}  // namespace sluice::kld::fastk
