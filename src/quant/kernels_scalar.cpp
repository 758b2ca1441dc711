#include <algorithm>
#include <cmath>

#include "quant/kernels.h"
#include "quant/tower_math.h"

namespace sluice {
namespace {

// The reference arithmetic that every kernel set reproduces bit for bit:
// 32 lanes, lane j accumulating elements i ≡ j (mod 32) with fused
// multiply-adds, a pairwise reduction (j+16, j+8, j+4, j+2, j+1), then the
// tail (< 32 elements) added in order. AVX-512 holds the lanes in two
// registers, AVX2 in four; this file spells the same order out in scalar
// code, so SIMD and scalar results are identical, not merely close.
template <typename W>
inline float lane_dot(W w, const float *x, int64_t n) {
    float lane[32] = {0};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 32; j++) lane[j] = std::fma((float)w(i + j), x[i + j], lane[j]);
    for (int j = 0; j < 16; j++) lane[j] = lane[j] + lane[j + 16];
    for (int j = 0; j < 8; j++) lane[j] = lane[j] + lane[j + 8];
    for (int j = 0; j < 4; j++) lane[j] = lane[j] + lane[j + 4];
    for (int j = 0; j < 2; j++) lane[j] = lane[j] + lane[j + 2];
    float part = lane[0] + lane[1];
    for (; i < n; i++) part += (float)w(i) * x[i];
    return part;
}

float dot_f32(const float *a, const float *b, int64_t n) {
    return lane_dot([a](int64_t i) { return a[i]; }, b, n);
}

float row_f32(const QTensor &W, int64_t r, const float *x) {
    return dot_f32(reinterpret_cast<const float *>(W.row(r)), x, W.cols);
}

// Σ_groups scale_g · dot(group): the group sum is scaled once (MODEL.md §11).
template <typename Decode>
inline float grouped_dot(const QTensor &W, int64_t r, const float *x, Decode code) {
    const float *sc = W.row_scales(r);
    float acc = 0.0f;
    for (int64_t g = 0; g < W.ng; g++) {
        const int64_t i0 = g * W.group, lim = i0 + W.group < W.cols ? W.group : W.cols - i0;
        acc += sc[g] * lane_dot([&](int64_t i) { return code(i0 + i); }, x + i0, lim);
    }
    return acc;
}

float row_q8(const QTensor &W, int64_t r, const float *x) {
    const int8_t *q = reinterpret_cast<const int8_t *>(W.row(r));
    return grouped_dot(W, r, x, [q](int64_t i) { return (int)q[i]; });
}

float row_q4(const QTensor &W, int64_t r, const float *x) {
    const uint8_t *q = W.row(r);
    return grouped_dot(W, r, x, [q](int64_t i) { return (int)((i & 1) ? (q[i >> 1] >> 4) : (q[i >> 1] & 15)) - 8; });
}

float row_q3(const QTensor &W, int64_t r, const float *x) {
    const uint8_t *q = W.row(r);
    return grouped_dot(W, r, x, [q](int64_t i) {
        int64_t p = 3 * i;
        unsigned v = q[p >> 3] | ((unsigned)q[(p >> 3) + 1] << 8);  // guard byte makes +1 safe
        return (int)((v >> (p & 7)) & 7) - 4;
    });
}

void vq_table(const float *x, int64_t nv, int S, int E, const float *const *books, float *T) {
    for (int64_t v = 0; v < nv; v++) {
        const float *xv = x + 8 * v;
        for (int s = 0; s < S; s++) {
            const float *b = books[s];
            float *t = T + (v * S + s) * E;
            for (int c = 0; c < E; c++) {
                float a = 0.0f;  // fused, in component order, as every SIMD set does
                for (int j = 0; j < 8; j++) a = std::fma(xv[j], b[j * E + c], a);
                t[c] = a;
            }
        }
    }
}

// Block-major: for each 64-row block, walk the vector positions once and
// let all of the block's rows look up the same 1-3 KB slice of the table,
// which stays in L1 (row-major walks re-read the whole table per row from
// L2/L3 and ran ~10x slower). Vector positions go in tiles of kVqTile, every
// row block of the range per tile, so the tile's slice of the table (the
// whole table is 0.9 MB for a 2304-wide input) stays in L2 while the
// expert's codes stream past it. Each row still accumulates v-major, then by
// stage, so the result is bit-identical to a row-at-a-time loop.
void vq_gemv_u8(const float *T, const uint8_t *idx, int64_t nv, int S, int E, const float *scale, float *y,
                int64_t r0, int64_t r1) {
    for (int64_t v0 = 0; v0 < nv; v0 += kVqTile) {
        const int64_t v1 = std::min(nv, v0 + kVqTile);
        for (int64_t b0 = r0 & ~(int64_t)63; b0 < r1; b0 += 64) {
            const int64_t lo = std::max(b0, r0) - b0, hi = std::min(b0 + 64, r1) - b0;
            float acc[64];
            // y holds the partial sums between tiles (written once per tile).
            for (int64_t r = lo; r < hi; r++) acc[r] = v0 == 0 ? 0.0f : y[b0 + r];
            const uint8_t *blk = idx + (b0 >> 6) * nv * 64 * S;
            for (int64_t v = v0; v < v1; v++) {
                const float *t = T + v * S * E;
                const uint8_t *u = blk + v * 64 * S;
                if (S == 3 && E == 256 && v + 4 <= v1) {
                    // Four vector positions per pass over the rows: the row's
                    // partial sum stays in a register across 12 lookups (the
                    // 12 KB of table they touch fits L1), instead of a load and
                    // a store of acc[r] per position; E fixed at 256 makes the
                    // stage offsets address displacements. Same order per row.
                    constexpr int kE = 256;
                    for (int64_t r = lo; r < hi; r++) {
                        const uint8_t *c = u + r * 3;
                        float a = acc[r];
                        a += t[c[0]];
                        a += t[kE + c[1]];
                        a += t[2 * kE + c[2]];
                        a += t[3 * kE + c[192]];
                        a += t[4 * kE + c[193]];
                        a += t[5 * kE + c[194]];
                        a += t[6 * kE + c[384]];
                        a += t[7 * kE + c[385]];
                        a += t[8 * kE + c[386]];
                        a += t[9 * kE + c[576]];
                        a += t[10 * kE + c[577]];
                        a += t[11 * kE + c[578]];
                        acc[r] = a;
                    }
                    v += 3;
                } else if (S == 3) {
                    for (int64_t r = lo; r < hi; r++) {
                        const uint8_t *c = u + r * 3;
                        float a = acc[r];
                        a += t[c[0]];
                        a += t[E + c[1]];
                        a += t[2 * E + c[2]];
                        acc[r] = a;
                    }
                } else {
                    for (int64_t r = lo; r < hi; r++)
                        for (int s = 0; s < S; s++) acc[r] += t[s * E + u[r * S + s]];
                }
            }
            if (v1 == nv)
                for (int64_t r = lo; r < hi; r++) y[b0 + r] = scale[b0 + r] * acc[r];
            else
                for (int64_t r = lo; r < hi; r++) y[b0 + r] = acc[r];
        }
    }
}

void vq_gemv_p6(const int8_t *Tq, const float *lam, const uint8_t *idx, int64_t nv, const float *scale, float *y,
                int64_t r0, int64_t r1) {
    for (int64_t b0 = r0 & ~(int64_t)63; b0 < r1; b0 += 64) {
        const int64_t lo = std::max(b0, r0) - b0, hi = std::min(b0 + 64, r1) - b0;
        float acc[64] = {0};
        const uint8_t *blk = idx + (b0 >> 6) * nv * 64 * 3;
        for (int64_t v0 = 0; v0 < nv; v0 += 32) {
            const int64_t v1 = v0 + 32 < nv ? v0 + 32 : nv;
            int32_t isum[64] = {0};
            for (int64_t v = v0; v < v1; v++) {
                const int8_t *t = Tq + v * 4 * 64;
                const uint8_t *u = blk + v * 64 * 3;
                for (int64_t r = lo; r < hi; r++) {
                    const uint8_t *c = u + r * 3;
                    const unsigned w = c[0] | ((unsigned)c[1] << 8) | ((unsigned)c[2] << 16);
                    isum[r] += t[w & 63] + t[64 + ((w >> 6) & 63)] + t[128 + ((w >> 12) & 63)] + t[192 + ((w >> 18) & 63)];
                }
            }
            const float l = lam[v0 / 32];
            for (int64_t r = lo; r < hi; r++) acc[r] += l * (float)isum[r];
        }
        for (int64_t r = lo; r < hi; r++) y[b0 + r] = scale[b0 + r] * acc[r];
    }
}

void axpy(float a, const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = y[i] + a * x[i];
}

// The reference: one product per input, so the bits are vq_gemv_u8's.
void vq_gemm_u8_tokens(const float *const *T, int64_t m, const uint8_t *idx, int64_t nv, int S, int E,
                       const float *scale, float *const *y, int64_t r0, int64_t r1, float *) {
    for (int64_t i = 0; i < m; i++) vq_gemv_u8(T[i], idx, nv, S, E, scale, y[i], r0, r1);
}

const Kernels kScalar = {
    "scalar",
    {row_f32, nullptr, row_q8, row_q4, nullptr, nullptr, nullptr, row_q3},
    dot_f32,
    vq_table,
    vq_gemv_u8,
    vq_gemv_p6,
    tower::attn_row<tower::D1>,
    tower::gelu_tanh<tower::D1>,
    tower::gelu_erf<tower::D1>,
    vq_gemm_u8_tokens,
    {},  // rows_dot_n: the reference is row_dot per input
    axpy,
};

}  // namespace

const Kernels &kernels_scalar() { return kScalar; }

void vq_quantize_table_i8(const float *T, int64_t nv, int8_t *Tq, float *lam) {
    const int64_t per_v = 4 * 64;
    for (int64_t b0 = 0; b0 < nv; b0 += 32) {
        int64_t b1 = b0 + 32 < nv ? b0 + 32 : nv;
        float M = 0.0f;
        for (int64_t i = b0 * per_v; i < b1 * per_v; i++) M = std::fmax(M, std::fabs(T[i]));
        if (M == 0.0f) {
            lam[b0 / 32] = 0.0f;
            for (int64_t i = b0 * per_v; i < b1 * per_v; i++) Tq[i] = 0;
            continue;
        }
        const float f = 127.0f / M;  // formed in f32, as specified
        lam[b0 / 32] = M / 127.0f;
        for (int64_t i = b0 * per_v; i < b1 * per_v; i++) {
            float q = std::nearbyint(T[i] * f);  // round half to even (default mode)
            q = q > 127.0f ? 127.0f : (q < -127.0f ? -127.0f : q);
            Tq[i] = (int8_t)q;
        }
    }
}

}  // namespace sluice
