// NEON (AArch64 Advanced SIMD) kernels. NEON is part of every AArch64 CPU,
// so this file needs no extra flags; dispatch.cpp still checks the hwcaps
// before choosing it. Every kernel performs the scalar reference's IEEE
// operations in the scalar reference's order (kernels_scalar.cpp), so the
// results are bit-identical to it, as the AVX2 and AVX-512 sets are.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/kernels.h"
#include "quant/tower_math.h"

namespace sluice {
namespace {

// The tower's double lanes (quant/tower_math.h), two per register.
struct D2 {
    static constexpr int W = 2;
    float64x2_t v;
    using M = uint64x2_t;
    static D2 set(double x) { return {vdupq_n_f64(x)}; }
    static D2 load(const double *p) { return {vld1q_f64(p)}; }
    static D2 loadf(const float *p) { return {vcvt_f64_f32(vld1_f32(p))}; }
    void store(double *p) const { vst1q_f64(p, v); }
    void storef(float *p) const { vst1_f32(p, vcvt_f32_f64(v)); }
    friend D2 operator+(D2 a, D2 b) { return {vaddq_f64(a.v, b.v)}; }
    friend D2 operator-(D2 a, D2 b) { return {vsubq_f64(a.v, b.v)}; }
    friend D2 operator*(D2 a, D2 b) { return {vmulq_f64(a.v, b.v)}; }
    friend D2 operator/(D2 a, D2 b) { return {vdivq_f64(a.v, b.v)}; }
    static M lt(D2 a, D2 b) { return vcltq_f64(a.v, b.v); }
    static M gt(D2 a, D2 b) { return vcgtq_f64(a.v, b.v); }
    static D2 sel(M m, D2 a, D2 b) { return {vbslq_f64(m, a.v, b.v)}; }
    static D2 shl52(D2 a) { return {vreinterpretq_f64_u64(vshlq_n_u64(vreinterpretq_u64_f64(a.v), 52))}; }
};

// The 32 reference lanes in eight 4-lane registers (s[k] holds lanes
// 4k..4k+3), reduced pairwise: j+16, j+8, j+4, then j+2 and j+1 inside the
// last register, exactly the scalar order.
struct Lanes32 {
    float32x4_t s[8];
    Lanes32() {
        for (auto &r : s) r = vdupq_n_f32(0.0f);
    }
    // Lanes 4k..4k+3 += w[k] * x[4k..4k+3], fused, for k < 8.
    inline void fma8(const float32x4_t *w, const float *x) {
        for (int k = 0; k < 8; k++) s[k] = vfmaq_f32(s[k], w[k], vld1q_f32(x + 4 * k));
    }
    inline float reduce() const {
        const float32x4_t a0 = vaddq_f32(s[0], s[4]), a1 = vaddq_f32(s[1], s[5]);
        const float32x4_t a2 = vaddq_f32(s[2], s[6]), a3 = vaddq_f32(s[3], s[7]);
        const float32x4_t b0 = vaddq_f32(a0, a2), b1 = vaddq_f32(a1, a3);
        const float32x4_t c = vaddq_f32(b0, b1);
        const float32x2_t d = vadd_f32(vget_low_f32(c), vget_high_f32(c));
        return vget_lane_f32(d, 0) + vget_lane_f32(d, 1);
    }
};

// 16 int8 codes to four float vectors (exact: |q| <= 128).
inline void cvt16(int8x16_t q, float32x4_t *w) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_s8(vget_high_s8(q));
    w[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
    w[1] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo)));
    w[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
    w[3] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi)));
}

float dot_f32(const float *a, const float *b, int64_t n) {
    Lanes32 L;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        float32x4_t w[8];
        for (int k = 0; k < 8; k++) w[k] = vld1q_f32(a + i + 4 * k);
        L.fma8(w, b + i);
    }
    float part = L.reduce();
    for (; i < n; i++) part += a[i] * b[i];
    return part;
}

float row_f32(const QTensor &W, int64_t r, const float *x) {
    return dot_f32(reinterpret_cast<const float *>(W.row(r)), x, W.cols);
}

// One group's dot: codes(i, w) writes the 32 codes from element i as eight
// float vectors; tail(i) is the code of element i (the scalar tail).
template <typename Codes, typename Tail>
inline float group_dot(const float *x, int64_t lim, Codes codes, Tail tail) {
    Lanes32 L;
    int64_t i = 0;
    for (; i + 32 <= lim; i += 32) {
        float32x4_t w[8];
        codes(i, w);
        L.fma8(w, x + i);
    }
    float part = L.reduce();
    for (; i < lim; i++) part += (float)tail(i) * x[i];
    return part;
}

// Row r's groups in one format, each handed to use(g, i0, lim, codes,
// tail): codes(i, w) writes the 32 codes from element i of the group as
// eight float vectors, tail(i) is the code of element i (the scalar tail).
struct Q8Groups {
    template <typename Use>
    void operator()(const QTensor &W, int64_t r, Use use) const {
        const int8_t *q = reinterpret_cast<const int8_t *>(W.row(r));
        for (int64_t g = 0; g < W.ng; g++) {
            const int64_t i0 = g * W.group, lim = i0 + W.group < W.cols ? W.group : W.cols - i0;
            const int8_t *p = q + i0;
            use(g, i0, lim,
                [p](int64_t i, float32x4_t *w) {
                    cvt16(vld1q_s8(p + i), w);
                    cvt16(vld1q_s8(p + i + 16), w + 4);
                },
                [p](int64_t i) { return (int)p[i]; });
        }
    }
};

struct Q4Groups {
    template <typename Use>
    void operator()(const QTensor &W, int64_t r, Use use) const {
        const uint8_t *q = W.row(r);
        const uint8x16_t m15 = vdupq_n_u8(15);
        const int8x16_t bias = vdupq_n_s8(8);
        for (int64_t g = 0; g < W.ng; g++) {
            const int64_t i0 = g * W.group, lim = i0 + W.group < W.cols ? W.group : W.cols - i0;
            const uint8_t *p = q + i0 / 2;  // groups are multiples of 8: i0 is even
            use(g, i0, lim,
                [&](int64_t i, float32x4_t *w) {
                    const uint8x16_t by = vld1q_u8(p + i / 2);
                    const uint8x16_t lo = vandq_u8(by, m15), hi = vshrq_n_u8(by, 4);
                    cvt16(vsubq_s8(vreinterpretq_s8_u8(vzip1q_u8(lo, hi)), bias), w);
                    cvt16(vsubq_s8(vreinterpretq_s8_u8(vzip2q_u8(lo, hi)), bias), w + 4);
                },
                [p](int64_t i) { return (int)((i & 1) ? (p[i >> 1] >> 4) : (p[i >> 1] & 15)) - 8; });
        }
    }
};

struct Q3Groups {
    template <typename Use>
    void operator()(const QTensor &W, int64_t r, Use use) const {
        const uint8_t *q = W.row(r);
        // Lane k (code k of 8): bytes b, b+1 with b = 3k / 8; right shift 3k % 8.
        alignas(16) uint8_t pick[16];
        alignas(16) int16_t sh[8];
        for (int k = 0; k < 8; k++) {
            pick[2 * k] = (uint8_t)(3 * k / 8);
            pick[2 * k + 1] = (uint8_t)(3 * k / 8 + 1);
            sh[k] = (int16_t)(-(3 * k % 8));
        }
        const uint8x16_t pk = vld1q_u8(pick);
        const int16x8_t shv = vld1q_s16(sh);
        const uint16x8_t m7 = vdupq_n_u16(7);
        const int16x8_t bias = vdupq_n_s16(4);
        for (int64_t g = 0; g < W.ng; g++) {
            const int64_t i0 = g * W.group, lim = i0 + W.group < W.cols ? W.group : W.cols - i0;
            use(g, i0, lim,
                [&](int64_t i, float32x4_t *w) {
                    uint8_t buf[16] = {0};
                    std::memcpy(buf, q + 3 * (i0 + i) / 8, 12);
                    const uint8x16_t b = vld1q_u8(buf);
                    for (int k = 0; k < 4; k++) {
                        const uint8x16_t two = vqtbl1q_u8(b, vaddq_u8(pk, vdupq_n_u8((uint8_t)(3 * k))));
                        const uint16x8_t c = vandq_u16(vshlq_u16(vreinterpretq_u16_u8(two), shv), m7);
                        const int16x8_t s = vsubq_s16(vreinterpretq_s16_u16(c), bias);
                        w[2 * k] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(s)));
                        w[2 * k + 1] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(s)));
                    }
                },
                [&](int64_t i) {
                    const int64_t p = 3 * (i0 + i);
                    const unsigned v = q[p >> 3] | ((unsigned)q[(p >> 3) + 1] << 8);  // guard byte makes +1 safe
                    return (int)((v >> (p & 7)) & 7) - 4;
                });
        }
    }
};

// Σ_groups scale_g · dot(group), the group sum scaled once (MODEL.md §11).
template <typename Groups>
float row_grouped(const QTensor &W, int64_t r, const float *x) {
    const float *sc = W.row_scales(r);
    float acc = 0.0f;
    Groups{}(W, r, [&](int64_t g, int64_t i0, int64_t lim, auto codes, auto tail) {
        acc += sc[g] * group_dot(x + i0, lim, codes, tail);
    });
    return acc;
}

// row_grouped for n inputs: each group's codes become floats once per block
// of inputs (the values codes() and tail() give row_grouped), and every input
// runs group_dot over them: row_grouped's operations in its order, so the
// same bits, with the unpacking paid once per block (a prefill's trunk).
template <typename Groups>
void row_grouped_n(const QTensor &W, int64_t r, const float *X, int64_t ldx, int64_t n, float *Y, int64_t ldy) {
    const float *sc = W.row_scales(r);
    alignas(16) float wf[4096];  // one group (group <= 4096, checked at load)
    constexpr int64_t B = 64;
    float acc[B];
    for (int64_t t0 = 0; t0 < n; t0 += B) {
        const int64_t m = std::min(B, n - t0);
        for (int64_t t = 0; t < m; t++) acc[t] = 0.0f;
        Groups{}(W, r, [&](int64_t g, int64_t i0, int64_t lim, auto codes, auto tail) {
            int64_t i = 0;
            for (; i + 32 <= lim; i += 32) {
                float32x4_t w[8];
                codes(i, w);
                for (int k = 0; k < 8; k++) vst1q_f32(wf + i + 4 * k, w[k]);
            }
            for (; i < lim; i++) wf[i] = (float)tail(i);
            auto stored = [&](int64_t j, float32x4_t *w) {
                for (int k = 0; k < 8; k++) w[k] = vld1q_f32(wf + j + 4 * k);
            };
            auto stored_tail = [&](int64_t j) { return wf[j]; };
            for (int64_t t = 0; t < m; t++) acc[t] += sc[g] * group_dot(X + (t0 + t) * ldx + i0, lim, stored, stored_tail);
        });
        for (int64_t t = 0; t < m; t++) Y[(t0 + t) * ldy + r] = acc[t];
    }
}

template <typename Groups>
void rows_grouped_n(const QTensor &W, int64_t r0, int64_t r1, const float *X, int64_t ldx, int64_t n, float *Y,
                    int64_t ldy) {
    for (int64_t r = r0; r < r1; r++) row_grouped_n<Groups>(W, r, X, ldx, n, Y, ldy);
}

void axpy(float a, const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vmulq_n_f32(vld1q_f32(x + i), a)));
    for (; i < n; i++) y[i] = y[i] + a * x[i];
}

void vq_table(const float *x, int64_t nv, int S, int E, const float *const *books, float *T) {
    for (int64_t v = 0; v < nv; v++) {
        const float *xv = x + 8 * v;
        for (int s = 0; s < S; s++) {
            const float *b = books[s];
            float *t = T + (v * S + s) * E;
            int c = 0;
            for (; c + 4 <= E; c += 4) {
                float32x4_t a = vdupq_n_f32(0.0f);
                for (int j = 0; j < 8; j++) a = vfmaq_n_f32(a, vld1q_f32(b + j * E + c), xv[j]);
                vst1q_f32(t + c, a);
            }
            for (; c < E; c++) {
                float a = 0.0f;
                for (int j = 0; j < 8; j++) a = std::fma(xv[j], b[j * E + c], a);
                t[c] = a;
            }
        }
    }
}

// Byte-coded VQ product for 256-entry books and 2-4 stages, 16 rows a step.
// One (v, s) slice of the table (256 floats) is split by vld4q into its four
// byte planes (16 registers of 16 entries each, 4 x 256 bytes); four chained
// 64-byte table lookups (tbl, then tbx with the index less 64, 128, 192:
// an out-of-range index keeps the byte) fetch one plane for 16 rows, and two
// rounds of zips put each entry's four bytes back together. The loop order
// is v, then stage, then rows, so each row adds its entries v-major then by
// stage from 0.0f, as the scalar kernel does: the bits are equal. Ragged
// 16-row heads and tails, other E and other S go to the scalar kernel.
void vq_gemv_u8(const float *T, const uint8_t *idx, int64_t nv, int S, int E, const float *scale, float *y,
                int64_t r0, int64_t r1) {
    const auto scalar = kernels_scalar().vq_gemv_u8;
    const int64_t a0 = (r0 + 15) & ~(int64_t)15, a1 = r1 & ~(int64_t)15;
    if (E != 256 || S < 2 || S > 4 || a0 >= a1) {
        scalar(T, idx, nv, S, E, scale, y, r0, r1);
        return;
    }
    if (r0 < a0) scalar(T, idx, nv, S, E, scale, y, r0, a0);
    if (a1 < r1) scalar(T, idx, nv, S, E, scale, y, a1, r1);
    for (int64_t r = a0; r < a1; r++) y[r] = 0.0f;
    const uint8x16_t k64 = vdupq_n_u8(64), k128 = vdupq_n_u8(128), k192 = vdupq_n_u8(192);
    for (int64_t v = 0; v < nv; v++) {
        for (int s = 0; s < S; s++) {
            const float *t = T + (v * S + s) * 256;
            uint8x16x4_t P[4][4];  // plane p, entries 64q..64q+63
            for (int q = 0; q < 4; q++)
                for (int k = 0; k < 4; k++) {
                    const uint8x16x4_t d = vld4q_u8(reinterpret_cast<const uint8_t *>(t + 64 * q + 16 * k));
                    for (int p = 0; p < 4; p++) P[p][q].val[k] = d.val[p];
                }
            for (int64_t g = a0; g < a1; g += 16) {
                const uint8_t *u = idx + (((g >> 6) * nv + v) * 64 + (g & 63)) * S;
                uint8x16_t c;
                if (S == 3) c = vld3q_u8(u).val[s];
                else if (S == 2) c = vld2q_u8(u).val[s];
                else c = vld4q_u8(u).val[s];
                const uint8x16_t c1 = vsubq_u8(c, k64), c2 = vsubq_u8(c, k128), c3 = vsubq_u8(c, k192);
                uint8x16_t B[4];
                for (int p = 0; p < 4; p++) {
                    uint8x16_t b = vqtbl4q_u8(P[p][0], c);
                    b = vqtbx4q_u8(b, P[p][1], c1);
                    b = vqtbx4q_u8(b, P[p][2], c2);
                    B[p] = vqtbx4q_u8(b, P[p][3], c3);
                }
                const uint16x8_t l01 = vreinterpretq_u16_u8(vzip1q_u8(B[0], B[1]));
                const uint16x8_t h01 = vreinterpretq_u16_u8(vzip2q_u8(B[0], B[1]));
                const uint16x8_t l23 = vreinterpretq_u16_u8(vzip1q_u8(B[2], B[3]));
                const uint16x8_t h23 = vreinterpretq_u16_u8(vzip2q_u8(B[2], B[3]));
                float *yg = y + g;
                const float32x4_t e0 = vreinterpretq_f32_u16(vzip1q_u16(l01, l23));
                const float32x4_t e1 = vreinterpretq_f32_u16(vzip2q_u16(l01, l23));
                const float32x4_t e2 = vreinterpretq_f32_u16(vzip1q_u16(h01, h23));
                const float32x4_t e3 = vreinterpretq_f32_u16(vzip2q_u16(h01, h23));
                vst1q_f32(yg, vaddq_f32(vld1q_f32(yg), e0));
                vst1q_f32(yg + 4, vaddq_f32(vld1q_f32(yg + 4), e1));
                vst1q_f32(yg + 8, vaddq_f32(vld1q_f32(yg + 8), e2));
                vst1q_f32(yg + 12, vaddq_f32(vld1q_f32(yg + 12), e3));
            }
        }
    }
    for (int64_t g = a0; g < a1; g += 4) vst1q_f32(y + g, vmulq_f32(vld1q_f32(scale + g), vld1q_f32(y + g)));
}

// VQ4P: each (v, stage) table is 64 int8 entries, exactly one 4-register
// table lookup, so 16 rows take their 4 entries with 4 lookups. The codes
// of 16 rows (3 bytes each) deinterleave with vld3q; the four 6-bit fields
// come out with shifts. The inner sums are integers (exact in any order,
// and at most 32 x 4 x 127 = 16256, so int16 holds a block's sum); the
// float steps per row (acc += lam·isum, then scale·acc) are the scalar ones.
void vq_gemv_p6(const int8_t *Tq, const float *lam, const uint8_t *idx, int64_t nv, const float *scale, float *y,
                int64_t r0, int64_t r1) {
    const auto scalar = kernels_scalar().vq_gemv_p6;
    const int64_t a0 = (r0 + 15) & ~(int64_t)15, a1 = r1 & ~(int64_t)15;
    if (a0 >= a1) {
        scalar(Tq, lam, idx, nv, scale, y, r0, r1);
        return;
    }
    if (r0 < a0) scalar(Tq, lam, idx, nv, scale, y, r0, a0);
    if (a1 < r1) scalar(Tq, lam, idx, nv, scale, y, a1, r1);
    const uint8x16_t m63 = vdupq_n_u8(63);
    for (int64_t g = a0; g < a1; g += 16) {
        const uint8_t *blk = idx + (g >> 6) * nv * 64 * 3 + (g & 63) * 3;
        float32x4_t acc[4];
        for (auto &a : acc) a = vdupq_n_f32(0.0f);
        for (int64_t v0 = 0; v0 < nv; v0 += 32) {
            const int64_t v1 = v0 + 32 < nv ? v0 + 32 : nv;
            int16x8_t lo = vdupq_n_s16(0), hi = vdupq_n_s16(0);
            for (int64_t v = v0; v < v1; v++) {
                const int8_t *t = Tq + v * 4 * 64;
                const uint8x16x3_t c = vld3q_u8(blk + v * 64 * 3);
                const uint8x16_t f0 = vandq_u8(c.val[0], m63);
                const uint8x16_t f1 = vorrq_u8(vshrq_n_u8(c.val[0], 6), vandq_u8(vshlq_n_u8(c.val[1], 2), m63));
                const uint8x16_t f2 = vorrq_u8(vshrq_n_u8(c.val[1], 4), vandq_u8(vshlq_n_u8(c.val[2], 4), m63));
                const uint8x16_t f3 = vshrq_n_u8(c.val[2], 2);
                const int8x16_t e0 = vqtbl4q_s8(vld1q_s8_x4(t), f0), e1 = vqtbl4q_s8(vld1q_s8_x4(t + 64), f1);
                const int8x16_t e2 = vqtbl4q_s8(vld1q_s8_x4(t + 128), f2), e3 = vqtbl4q_s8(vld1q_s8_x4(t + 192), f3);
                const int16x8_t s01l = vaddl_s8(vget_low_s8(e0), vget_low_s8(e1));
                const int16x8_t s23l = vaddl_s8(vget_low_s8(e2), vget_low_s8(e3));
                const int16x8_t s01h = vaddl_high_s8(e0, e1), s23h = vaddl_high_s8(e2, e3);
                lo = vaddq_s16(lo, vaddq_s16(s01l, s23l));
                hi = vaddq_s16(hi, vaddq_s16(s01h, s23h));
            }
            const float32x4_t l = vdupq_n_f32(lam[v0 / 32]);
            const int32x4_t i[4] = {vmovl_s16(vget_low_s16(lo)), vmovl_high_s16(lo), vmovl_s16(vget_low_s16(hi)),
                                    vmovl_high_s16(hi)};
            for (int k = 0; k < 4; k++) acc[k] = vaddq_f32(acc[k], vmulq_f32(l, vcvtq_f32_s32(i[k])));
        }
        for (int k = 0; k < 4; k++) vst1q_f32(y + g + 4 * k, vmulq_f32(vld1q_f32(scale + g + 4 * k), acc[k]));
    }
}

}  // namespace

const Kernels *kernels_neon() {
    static const Kernels k = {
        "neon",
        {row_f32, nullptr, row_grouped<Q8Groups>, row_grouped<Q4Groups>, nullptr, nullptr, nullptr,
         row_grouped<Q3Groups>},
        dot_f32,
        vq_table,
        vq_gemv_u8,
        vq_gemv_p6,
        tower::attn_row<D2>,
        tower::gelu_tanh<D2>,
        tower::gelu_erf<D2>,
        nullptr,  // vq_gemm_u8_tokens: per token
        {nullptr, nullptr, rows_grouped_n<Q8Groups>, rows_grouped_n<Q4Groups>, nullptr, nullptr, nullptr,
         rows_grouped_n<Q3Groups>},
        axpy,
    };
    return &k;
}

}  // namespace sluice
