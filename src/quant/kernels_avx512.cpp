// AVX-512 kernels. Compiled with -mavx512f -mavx512bw -mfma for this file
// only and selected at run time, so the binary still runs on older CPUs.
// GCC 12's AVX-512 headers build some casts from a deliberately undefined
// register (__Y = __Y), and -Wmaybe-uninitialized reports it at every inlined
// use in this file (GCC bug 105593, fixed in GCC 13): no variable of ours is
// involved, so the two warnings are off here for that compiler only.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "quant/kernels.h"
#include "quant/tower_math.h"
#include "quant/unpack_simd.h"

namespace sluice {
namespace {

// The tower's double lanes (quant/tower_math.h), eight per register.
struct D8 {
    static constexpr int W = 8;
    __m512d v;
    using M = __mmask8;
    static D8 set(double x) { return {_mm512_set1_pd(x)}; }
    static D8 load(const double *p) { return {_mm512_loadu_pd(p)}; }
    static D8 loadf(const float *p) { return {_mm512_cvtps_pd(_mm256_loadu_ps(p))}; }
    void store(double *p) const { _mm512_storeu_pd(p, v); }
    void storef(float *p) const { _mm256_storeu_ps(p, _mm512_cvtpd_ps(v)); }
    friend D8 operator+(D8 a, D8 b) { return {_mm512_add_pd(a.v, b.v)}; }
    friend D8 operator-(D8 a, D8 b) { return {_mm512_sub_pd(a.v, b.v)}; }
    friend D8 operator*(D8 a, D8 b) { return {_mm512_mul_pd(a.v, b.v)}; }
    friend D8 operator/(D8 a, D8 b) { return {_mm512_div_pd(a.v, b.v)}; }
    static M lt(D8 a, D8 b) { return _mm512_cmp_pd_mask(a.v, b.v, _CMP_LT_OQ); }
    static M gt(D8 a, D8 b) { return _mm512_cmp_pd_mask(a.v, b.v, _CMP_GT_OQ); }
    static D8 sel(M m, D8 a, D8 b) { return {_mm512_mask_blend_pd(m, b.v, a.v)}; }
    static D8 shl52(D8 a) { return {_mm512_castsi512_pd(_mm512_slli_epi64(_mm512_castpd_si512(a.v), 52))}; }
};

// Pairwise: lanes j+8, then j+4, j+2, j+1 (the scalar reference order).
inline float hsum(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(c) + _mm_cvtss_f32(_mm_shuffle_ps(c, c, 1));
}

float dot_f32(const float *a, const float *b, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    float part = hsum(_mm512_add_ps(s0, s1));
    for (; i < n; i++) part += a[i] * b[i];
    return part;
}

float row_f32(const QTensor &W, int64_t r, const float *x) {
    return dot_f32(reinterpret_cast<const float *>(W.row(r)), x, W.cols);
}

// One group's integer codes against x: two 16-lane accumulators over 32
// elements, reduced once, then a scalar tail. This is the order warp's
// AVX-512 path uses, which keeps our rounding noise aligned with the
// reference logits near VQ4P rounding boundaries (MODEL.md §11).
inline float dot_i8(const int8_t *w, const float *x, int64_t lim) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= lim; i += 32) {
        __m512 w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w + i))));
        __m512 w1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w + i + 16))));
        s0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i), s0);
        s1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i + 16), s1);
    }
    float part = hsum(_mm512_add_ps(s0, s1));
    for (; i < lim; i++) part += (float)w[i] * x[i];
    return part;
}

float row_q8(const QTensor &W, int64_t r, const float *x) {
    const int8_t *q = reinterpret_cast<const int8_t *>(W.row(r));
    const float *sc = W.row_scales(r);
    float acc = 0.0f;
    for (int64_t g = 0; g < W.ng; g++) {
        const int64_t i0 = g * W.group, lim = i0 + W.group < W.cols ? W.group : W.cols - i0;
        acc += sc[g] * dot_i8(q + i0, x + i0, lim);
    }
    return acc;
}

// Q4G without a staging buffer: each code byte is duplicated (vpshufb), widened
// to a dword, shifted by 0 or 4 so lane k holds nibble k, and the nibble
// mapped straight to the float q-8 by a 16-entry permute (vpermps reads the
// low 4 bits only). The FMA lanes and the reduction are dot_i8's, so results
// are bit-identical to it and to the scalar reference.
inline __m512 q4_16(const uint8_t *p8, __m128i dup, __m512i shift, __m512 tbl) {
    const __m128i b = _mm_shuffle_epi8(_mm_loadl_epi64((const __m128i *)p8), dup);
    return _mm512_permutexvar_ps(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(b), shift), tbl);
}

float row_q4(const QTensor &W, int64_t r, const float *x) {
    const uint8_t *q = W.row(r);
    const float *sc = W.row_scales(r);
    const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i shift = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
    const __m512 tbl = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    alignas(64) int8_t unp[4096];  // tails only (group <= 4096, checked at load)
    float acc = 0.0f;
    for (int64_t g = 0; g < W.ng; g++) {
        const int64_t i0 = g * W.group, lim = i0 + W.group < W.cols ? W.group : W.cols - i0;
        const uint8_t *p = q + i0 / 2;
        const float *xg = x + i0;
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        int64_t i = 0;
        for (; i + 32 <= lim; i += 32) {
            s0 = _mm512_fmadd_ps(q4_16(p + i / 2, dup, shift, tbl), _mm512_loadu_ps(xg + i), s0);
            s1 = _mm512_fmadd_ps(q4_16(p + i / 2 + 8, dup, shift, tbl), _mm512_loadu_ps(xg + i + 16), s1);
        }
        float part = hsum(_mm512_add_ps(s0, s1));
        if (i < lim) {
            unpack_q4_group(p, W.group, unp);
            for (; i < lim; i++) part += (float)unp[i] * xg[i];
        }
        acc += sc[g] * part;
    }
    return acc;
}

float row_q3(const QTensor &W, int64_t r, const float *x) {
    const uint8_t *q = W.row(r);
    const float *sc = W.row_scales(r);
    alignas(64) int8_t unp[4096];
    float acc = 0.0f;
    for (int64_t g = 0; g < W.ng; g++) {
        const int64_t i0 = g * W.group, lim = i0 + W.group < W.cols ? W.group : W.cols - i0;
        unpack_q3_group(q, i0, lim, unp);
        acc += sc[g] * dot_i8(unp, x + i0, lim);
    }
    return acc;
}

// Eight inputs' 16-lane group sums u[k] (input k = 8h + k of a block of
// 16), reduced the way hsum reduces one: lanes j + 8, then j + 4, j + 2,
// and the last pair. Three steps here keep every input's pairs; the last
// is in hsum16_final. Block b of the result holds input b's two remaining
// sums in lanes 0-1 and input 4 + b's in lanes 2-3.
inline __m512 hsum8_steps(const __m512 u[8]) {
    __m512 w[4], x[2];
    for (int k = 0; k < 4; k++)  // [a.lo256 | b.lo256] + [a.hi256 | b.hi256]
        w[k] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int k = 0; k < 2; k++)  // block b: input (4k + b)'s lanes j + (j + 4)
        x[k] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_ps(x[0], x[1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(x[0], x[1], _MM_SHUFFLE(3, 2, 3, 2)));
}

// Both halves' hsum8_steps to 16 sums in input order.
inline __m512 hsum16_final(__m512 y0, __m512 y1) {
    const __m512 z = _mm512_add_ps(_mm512_shuffle_ps(y0, y1, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(y0, y1, _MM_SHUFFLE(3, 1, 3, 1)));
    // Lane 4b + q holds input 4q + b: a 4 x 4 transpose puts them in order.
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(order, z);
}

// Row r of a grouped integer format (Q8G, Q4G, Q3G) against n inputs, each
// input's bits equal to row_q8 / row_q4 / row_q3 (and so to the scalar
// reference): per group, lanes j and j + 16 accumulate with fused adds from
// zero over whole 32-element steps, the 16 lane sums reduce in hsum's
// pairing, the tail adds unfused in order, and acc += scale · part. Each
// group's codes become floats once for a block of 16 inputs, which go
// through the FMAs eight at a time with the weights in registers; the 16
// reductions run side by side (hsum8_steps), not one hsum per input.
template <int Bits>
void grouped_rows(const QTensor &W, int64_t r, const float *X, int64_t ldx, int64_t n, float *y, int64_t ldy) {
    const uint8_t *q = W.row(r);
    const float *sc = W.row_scales(r);
    alignas(64) float wf[4096];  // one group as floats (group <= 4096, checked at load)
    alignas(64) int8_t unp[4096];
    alignas(64) float part[16];
    const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i shift = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
    const __m512 tbl = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t t0 = 0; t0 < n; t0 += 16) {
        const int64_t m = std::min<int64_t>(16, n - t0);
        // Inputs past m repeat the first one: computed, never stored.
        const float *xs[16];
        for (int64_t k = 0; k < 16; k++) xs[k] = X + (t0 + (k < m ? k : 0)) * ldx;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t g = 0; g < W.ng; g++) {
            const int64_t i0 = g * W.group, lim = i0 + W.group < W.cols ? W.group : W.cols - i0;
            const int64_t full = lim & ~(int64_t)31;
            if constexpr (Bits == 4) {
                const uint8_t *p = q + i0 / 2;
                for (int64_t i = 0; i < full; i += 16) _mm512_store_ps(wf + i, q4_16(p + i / 2, dup, shift, tbl));
                if (full < lim) unpack_q4_group(p, W.group, unp);
            } else {
                const int8_t *w8 = unp;
                if constexpr (Bits == 8) w8 = reinterpret_cast<const int8_t *>(q) + i0;
                else unpack_q3_group(q, i0, lim, unp);
                for (int64_t i = 0; i < full; i += 16)
                    _mm512_store_ps(wf + i, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w8 + i)))));
                if (Bits == 8 && full < lim)
                    for (int64_t i = full; i < lim; i++) unp[i] = w8[i];
            }
            // A block of at most eight inputs runs one half: the other's
            // sums are never stored (each input's reduction is its own).
            __m512 half[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
            for (int h = 0; h < (m > 8 ? 2 : 1); h++) {
                __m512 s0[8], s1[8];
                for (int k = 0; k < 8; k++) s0[k] = s1[k] = _mm512_setzero_ps();
                for (int64_t i = 0; i < full; i += 32) {
                    const __m512 w0 = _mm512_load_ps(wf + i), w1 = _mm512_load_ps(wf + i + 16);
                    for (int k = 0; k < 8; k++) {
                        const float *x = xs[8 * h + k] + i0 + i;
                        s0[k] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), s0[k]);
                        s1[k] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), s1[k]);
                    }
                }
                for (int k = 0; k < 8; k++) s0[k] = _mm512_add_ps(s0[k], s1[k]);
                half[h] = hsum8_steps(s0);
            }
            __m512 pv = hsum16_final(half[0], half[1]);
            if (full < lim) {
                _mm512_store_ps(part, pv);
                for (int64_t k = 0; k < m; k++) {
                    const float *x = xs[k] + i0;
                    for (int64_t i = full; i < lim; i++) part[k] += (float)unp[i] * x[i];
                }
                pv = _mm512_load_ps(part);
            }
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(sc[g]), pv));
        }
        _mm512_store_ps(part, acc);
        for (int64_t k = 0; k < m; k++) y[(t0 + k) * ldy] = part[k];
    }
}

// Group g of row r as floats, every one of its W.group codes (a whole group).
template <int Bits>
inline void group_floats(const QTensor &W, int64_t r, int64_t g, float *wf) {
    const uint8_t *q = W.row(r);
    const int64_t i0 = g * W.group, lim = W.group;
    if constexpr (Bits == 4) {
        const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
        const __m512i shift = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
        const __m512 tbl = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
        const uint8_t *p = q + i0 / 2;
        for (int64_t i = 0; i < lim; i += 16) _mm512_store_ps(wf + i, q4_16(p + i / 2, dup, shift, tbl));
    } else {
        alignas(64) int8_t unp[4096];
        const int8_t *w8 = unp;
        if constexpr (Bits == 8) w8 = reinterpret_cast<const int8_t *>(q) + i0;
        else unpack_q3_group(q, i0, lim, unp);
        for (int64_t i = 0; i < lim; i += 16)
            _mm512_store_ps(wf + i, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w8 + i)))));
    }
}

// Four rows against n inputs, for matrices whose groups are all whole and
// a multiple of 32 (every trunk matrix of the shipped shapes): each input
// pair's two 32-element loads feed the FMAs of four rows, so a block of
// inputs (L2) is streamed once per four rows, not once per row (one row at
// a time, 16 inputs of 2,304 floats came from L2 per 37K multiply-adds, half
// the FMA rate). Per (row, input) the sums are grouped_rows' (lanes j and
// j + 16 from zero over the group, hsum's pairing, acc += scale · part), so
// the bits are too. Lane 8h + 2·row + j of a reduction holds input
// 4·quad + 2h + j of that row.
template <int Bits>
void grouped_rows4(const QTensor &W, int64_t r, const float *X, int64_t ldx, int64_t n, float *Y, int64_t ldy) {
    const int64_t G = W.group;
    alignas(64) float wf[4][4096];
    const float *sc[4];
    for (int i = 0; i < 4; i++) sc[i] = W.row_scales(r + i);
    alignas(64) float part[16];
    for (int64_t t0 = 0; t0 < n; t0 += 16) {
        const int64_t m = std::min<int64_t>(16, n - t0);
        const int64_t nq = (m + 3) / 4;
        // Inputs past m repeat the first one: computed, never stored.
        const float *xs[16];
        for (int64_t k = 0; k < 16; k++) xs[k] = X + (t0 + (k < m ? k : 0)) * ldx;
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        for (int64_t g = 0; g < W.ng; g++) {
            for (int i = 0; i < 4; i++) group_floats<Bits>(W, r + i, g, wf[i]);
            const int64_t i0 = g * G;
            const __m512 scv = _mm512_setr_ps(sc[0][g], sc[0][g], sc[1][g], sc[1][g], sc[2][g], sc[2][g], sc[3][g],
                                              sc[3][g], sc[0][g], sc[0][g], sc[1][g], sc[1][g], sc[2][g], sc[2][g],
                                              sc[3][g], sc[3][g]);
            for (int64_t qd = 0; qd < nq; qd++) {
                __m512 half[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
                for (int h = 0; h < 2; h++) {
                    if (4 * qd + 2 * h >= m) break;  // no input of this pair is stored
                    const float *x0 = xs[4 * qd + 2 * h] + i0, *x1 = xs[4 * qd + 2 * h + 1] + i0;
                    __m512 s0[8], s1[8];
                    for (int k = 0; k < 8; k++) s0[k] = s1[k] = _mm512_setzero_ps();
                    for (int64_t i = 0; i < G; i += 32) {
                        const __m512 a0 = _mm512_loadu_ps(x0 + i), a1 = _mm512_loadu_ps(x0 + i + 16);
                        const __m512 b0 = _mm512_loadu_ps(x1 + i), b1 = _mm512_loadu_ps(x1 + i + 16);
                        for (int row = 0; row < 4; row++) {
                            const __m512 w0 = _mm512_load_ps(wf[row] + i), w1 = _mm512_load_ps(wf[row] + i + 16);
                            s0[2 * row] = _mm512_fmadd_ps(w0, a0, s0[2 * row]);
                            s1[2 * row] = _mm512_fmadd_ps(w1, a1, s1[2 * row]);
                            s0[2 * row + 1] = _mm512_fmadd_ps(w0, b0, s0[2 * row + 1]);
                            s1[2 * row + 1] = _mm512_fmadd_ps(w1, b1, s1[2 * row + 1]);
                        }
                    }
                    for (int k = 0; k < 8; k++) s0[k] = _mm512_add_ps(s0[k], s1[k]);
                    half[h] = hsum8_steps(s0);
                }
                acc[qd] = _mm512_add_ps(acc[qd], _mm512_mul_ps(scv, hsum16_final(half[0], half[1])));
            }
        }
        for (int64_t qd = 0; qd < nq; qd++) {
            _mm512_store_ps(part, acc[qd]);
            for (int h = 0; h < 2; h++)
                for (int row = 0; row < 4; row++)
                    for (int j = 0; j < 2; j++) {
                        const int64_t k = 4 * qd + 2 * h + j;
                        if (k < m) Y[(t0 + k) * ldy + r + row] = part[8 * h + 2 * row + j];
                    }
        }
    }
}

template <int Bits>
void rows_grouped_n(const QTensor &W, int64_t r0, int64_t r1, const float *X, int64_t ldx, int64_t n, float *Y,
                    int64_t ldy) {
    int64_t r = r0;
    if (W.group % 32 == 0 && W.cols % W.group == 0)
        for (; r + 4 <= r1; r += 4) grouped_rows4<Bits>(W, r, X, ldx, n, Y, ldy);
    for (; r < r1; r++) grouped_rows<Bits>(W, r, X, ldx, n, Y + r, ldy);
}

void axpy(float a, const float *x, float *y, int64_t n) {
    const __m512 av = _mm512_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_mul_ps(av, _mm512_loadu_ps(x + i))));
    for (; i < n; i++) y[i] = y[i] + a * x[i];
}

void vq_table(const float *x, int64_t nv, int S, int E, const float *const *books, float *T) {
    // T[c] = Σ_j x_j·book_s[j][c], component-major books: a load of 16
    // entries' component j. Each entry's sum is one chain of eight fused
    // adds; 64 entries go side by side so four chains hide the FMA latency
    // (one chain of 16 at a time waited on it). A 2304-wide table (884 KB):
    // 40 -> 28 us written into cache (the down table, reused at once), 44 ->
    // 40 us into memory (a wave's gate/up tables, store-bound); eight
    // chains were 49-58 us there. Same order per entry, so the same bits.
    for (int64_t v = 0; v < nv; v++) {
        const float *xv = x + 8 * v;
        __m512 xb[8];
        for (int j = 0; j < 8; j++) xb[j] = _mm512_set1_ps(xv[j]);
        for (int s = 0; s < S; s++) {
            const float *b = books[s];
            float *t = T + (v * S + s) * E;
            int c = 0;
            for (; c + 64 <= E; c += 64) {
                __m512 a[4];
                for (int u = 0; u < 4; u++) a[u] = _mm512_setzero_ps();
                for (int j = 0; j < 8; j++)
                    for (int u = 0; u < 4; u++) a[u] = _mm512_fmadd_ps(xb[j], _mm512_loadu_ps(b + j * E + c + 16 * u), a[u]);
                for (int u = 0; u < 4; u++) _mm512_storeu_ps(t + c + 16 * u, a[u]);
            }
            for (; c + 16 <= E; c += 16) {
                __m512 a = _mm512_setzero_ps();
                for (int j = 0; j < 8; j++)
                    a = _mm512_fmadd_ps(_mm512_set1_ps(xv[j]), _mm512_loadu_ps(b + j * E + c), a);
                _mm512_storeu_ps(t + c, a);
            }
            for (; c < E; c++) {
                float a = 0.0f;
                for (int j = 0; j < 8; j++) a = std::fma(xv[j], b[j * E + c], a);
                t[c] = a;
            }
        }
    }
}

// VQ products with 256-entry books from registers. One (v, s) slice of the
// table (256 floats) is held in 16 zmm registers and every 16-row group of
// the range takes its entries with 8 two-register permutes (index bits 0-4)
// and a 3-level blend on bits 5-7. Scalar lookups from L1 run at about one
// per cycle (two loads and a dependent add each); this does 16 per ~20
// vector ops. Loop order is v, then stage, then rows, so each row still adds
// its entries v-major then by stage from 0.0f, as the scalar kernel does:
// the bits are equal (tests/unit/kernels_test.cpp checks every backend).
// Ragged 16-row heads and tails, other E, and S > 4 go to the scalar kernel.
void vq_gemv_u8(const float *T, const uint8_t *idx, int64_t nv, int S, int E, const float *scale, float *y,
                int64_t r0, int64_t r1) {
    const auto scalar = kernels_scalar().vq_gemv_u8;
    const int64_t a0 = (r0 + 15) & ~(int64_t)15, a1 = r1 & ~(int64_t)15;
    if (E != 256 || S < 1 || S > 4 || a0 >= a1) {
        scalar(T, idx, nv, S, E, scale, y, r0, r1);
        return;
    }
    if (r0 < a0) scalar(T, idx, nv, S, E, scale, y, r0, a0);
    if (a1 < r1) scalar(T, idx, nv, S, E, scale, y, a1, r1);
    // Stage s of row i of a group is byte S*i + s of the group's 16*S code
    // bytes: vpermw brings the word holding it into dword i and a shift by
    // 0 or 8 moves it to the low byte. Bits above 7 are left as they are:
    // the permutes read bits 0-4 and the blend masks test bits 5-7 only.
    __m512i widx[4], wsh[4];
    for (int s = 0; s < S; s++) {
        alignas(64) uint16_t w[32];
        alignas(64) uint32_t sh[16];
        for (int i = 0; i < 16; i++) {
            const int p = S * i + s;
            w[2 * i] = (uint16_t)(p >> 1);
            w[2 * i + 1] = 0;
            sh[i] = (uint32_t)(8 * (p & 1));
        }
        widx[s] = _mm512_load_si512(w);
        wsh[s] = _mm512_load_si512(sh);
    }
    const __mmask64 cmask = S == 4 ? ~(__mmask64)0 : (((__mmask64)1 << (16 * S)) - 1);
    const __m512i b5 = _mm512_set1_epi32(32), b6 = _mm512_set1_epi32(64), b7 = _mm512_set1_epi32(128);
    for (int64_t r = a0; r < a1; r++) y[r] = 0.0f;
    for (int64_t v = 0; v < nv; v++) {
        for (int s = 0; s < S; s++) {
            const float *t = T + (v * S + s) * 256;
            const __m512 t0 = _mm512_loadu_ps(t), t1 = _mm512_loadu_ps(t + 16), t2 = _mm512_loadu_ps(t + 32),
                         t3 = _mm512_loadu_ps(t + 48), t4 = _mm512_loadu_ps(t + 64), t5 = _mm512_loadu_ps(t + 80),
                         t6 = _mm512_loadu_ps(t + 96), t7 = _mm512_loadu_ps(t + 112), t8 = _mm512_loadu_ps(t + 128),
                         t9 = _mm512_loadu_ps(t + 144), t10 = _mm512_loadu_ps(t + 160),
                         t11 = _mm512_loadu_ps(t + 176), t12 = _mm512_loadu_ps(t + 192),
                         t13 = _mm512_loadu_ps(t + 208), t14 = _mm512_loadu_ps(t + 224),
                         t15 = _mm512_loadu_ps(t + 240);
            for (int64_t g = a0; g < a1; g += 16) {
                const uint8_t *u = idx + (((g >> 6) * nv + v) * 64 + (g & 63)) * S;
                if (s == 0) _mm_prefetch((const char *)(u + 2 * 64 * S), _MM_HINT_T0);
                const __m512i c = _mm512_maskz_loadu_epi8(cmask, u);
                const __m512i ix = _mm512_srlv_epi32(_mm512_permutexvar_epi16(widx[s], c), wsh[s]);
                const __mmask16 m5 = _mm512_test_epi32_mask(ix, b5), m6 = _mm512_test_epi32_mask(ix, b6),
                                m7 = _mm512_test_epi32_mask(ix, b7);
                const __m512 x0 = _mm512_mask_blend_ps(m5, _mm512_permutex2var_ps(t0, ix, t1),
                                                       _mm512_permutex2var_ps(t2, ix, t3));
                const __m512 x1 = _mm512_mask_blend_ps(m5, _mm512_permutex2var_ps(t4, ix, t5),
                                                       _mm512_permutex2var_ps(t6, ix, t7));
                const __m512 x2 = _mm512_mask_blend_ps(m5, _mm512_permutex2var_ps(t8, ix, t9),
                                                       _mm512_permutex2var_ps(t10, ix, t11));
                const __m512 x3 = _mm512_mask_blend_ps(m5, _mm512_permutex2var_ps(t12, ix, t13),
                                                       _mm512_permutex2var_ps(t14, ix, t15));
                const __m512 e = _mm512_mask_blend_ps(m7, _mm512_mask_blend_ps(m6, x0, x1),
                                                      _mm512_mask_blend_ps(m6, x2, x3));
                _mm512_storeu_ps(y + g, _mm512_add_ps(_mm512_loadu_ps(y + g), e));
            }
        }
    }
    for (int64_t g = a0; g < a1; g += 16)
        _mm512_storeu_ps(y + g, _mm512_mul_ps(_mm512_loadu_ps(scale + g), _mm512_loadu_ps(y + g)));
}

#define SLUICE_VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi")))

// 4 x 4 transpose of 128-bit lanes: lane j of out[i] = lane i of in[j].
SLUICE_VBMI inline void transpose_lanes(__m512i a0, __m512i a1, __m512i a2, __m512i a3, __m512i *o) {
    const __m512i t0 = _mm512_shuffle_i64x2(a0, a1, 0x44), t1 = _mm512_shuffle_i64x2(a0, a1, 0xEE);
    const __m512i t2 = _mm512_shuffle_i64x2(a2, a3, 0x44), t3 = _mm512_shuffle_i64x2(a2, a3, 0xEE);
    o[0] = _mm512_shuffle_i64x2(t0, t2, 0x88);
    o[1] = _mm512_shuffle_i64x2(t0, t2, 0xDD);
    o[2] = _mm512_shuffle_i64x2(t1, t3, 0x88);
    o[3] = _mm512_shuffle_i64x2(t1, t3, 0xDD);
}

// The VQ product on CPUs with AVX512-VBMI, 64 rows per step, for 2 or 3
// stages of 256 entries. One (v, s) slice of the table is split into its
// four byte planes (4 x 256 bytes, 16 zmm); a 64-byte permute across two
// registers (vpermt2b) looks up 64 rows' bytes of one plane at once, so a
// block of 64 lookups costs 8 permutes + 4 blends on index bit 7, and 8
// unpacks put the four bytes of each entry back together. The unpacks leave
// the rows in a fixed lane order (lane k of the four results holds rows
// 16k+0..3, +4..7, +8..11, +12..15), which the accumulators keep until the
// end; every row still adds its entries v-major then by stage from 0.0f, so
// the bits equal the scalar kernel's. Micro-benchmark (hot data, -O3): 14.6
// G lookups/s per core against 6.4 for the two-table-permute kernel above.
// Ragged 64-row heads and tails go to that kernel.
SLUICE_VBMI void vq_gemv_u8_vbmi(const float *T, const uint8_t *idx, int64_t nv, int S, int E, const float *scale,
                                 float *y, int64_t r0, int64_t r1) {
    const int64_t a0 = (r0 + 63) & ~(int64_t)63, a1 = r1 & ~(int64_t)63;
    if (E != 256 || (S != 2 && S != 3) || a0 >= a1) {
        vq_gemv_u8(T, idx, nv, S, E, scale, y, r0, r1);
        return;
    }
    if (r0 < a0) vq_gemv_u8(T, idx, nv, S, E, scale, y, r0, a0);
    if (a1 < r1) vq_gemv_u8(T, idx, nv, S, E, scale, y, a1, r1);
    if (a1 - a0 > 4096) {  // the accumulators live on the stack: 4096 rows a pass
        for (int64_t c = a0; c < a1; c += 4096) vq_gemv_u8_vbmi(T, idx, nv, S, E, scale, y, c, std::min(c + 4096, a1));
        return;
    }
    const int64_t nb = (a1 - a0) / 64;
    alignas(64) float acc[4096];  // rows a0..a1 in the unpacks' lane order
    for (int64_t i = 0; i < nb * 64; i++) acc[i] = 0.0f;
    // Byte p of float j of a 16-float register goes to byte 16p + j.
    alignas(64) uint8_t tb[64];
    for (int p = 0; p < 4; p++)
        for (int j = 0; j < 16; j++) tb[16 * p + j] = (uint8_t)(4 * j + p);
    const __m512i planes = _mm512_load_si512(tb);
    // Stage s of row j in a block is code byte S*j + s: for S = 3 the 192
    // bytes span three registers, so two two-register permutes and a blend
    // (bytes >= 128 from the second); for S = 2 one permute.
    __m512i selA[3], selB[3];
    __mmask64 fromB[3];
    for (int st = 0; st < S; st++) {
        alignas(64) uint8_t a[64], b[64];
        uint64_t m = 0;
        for (int j = 0; j < 64; j++) {
            const int p = S * j + st;
            a[j] = (uint8_t)(p & 127);
            b[j] = (uint8_t)((p - 64) & 127);
            if (p >= 128) m |= 1ull << j;
        }
        selA[st] = _mm512_load_si512(a);
        selB[st] = _mm512_load_si512(b);
        fromB[st] = m;
    }
    for (int64_t v = 0; v < nv; v++) {
        for (int st = 0; st < S; st++) {
            const float *t = T + (v * S + st) * 256;
            __m512i P[4][4];  // plane p, entries 64q..64q+63
            for (int q = 0; q < 4; q++) {
                __m512i o[4];
                transpose_lanes(_mm512_permutexvar_epi8(planes, _mm512_loadu_si512(t + 64 * q)),
                                _mm512_permutexvar_epi8(planes, _mm512_loadu_si512(t + 64 * q + 16)),
                                _mm512_permutexvar_epi8(planes, _mm512_loadu_si512(t + 64 * q + 32)),
                                _mm512_permutexvar_epi8(planes, _mm512_loadu_si512(t + 64 * q + 48)), o);
                for (int p = 0; p < 4; p++) P[p][q] = o[p];
            }
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *u = idx + (((a0 >> 6) + b) * nv + v) * 64 * S;
                const __m512i c0 = _mm512_loadu_si512(u), c1 = _mm512_loadu_si512(u + 64);
                __m512i I = _mm512_permutex2var_epi8(c0, selA[st], c1);
                if (S == 3)
                    I = _mm512_mask_blend_epi8(fromB[st], I,
                                               _mm512_permutex2var_epi8(c1, selB[st], _mm512_loadu_si512(u + 128)));
                const __mmask64 hi = _mm512_movepi8_mask(I);
                __m512i B[4];
                for (int p = 0; p < 4; p++)
                    B[p] = _mm512_mask_blend_epi8(hi, _mm512_permutex2var_epi8(P[p][0], I, P[p][1]),
                                                  _mm512_permutex2var_epi8(P[p][2], I, P[p][3]));
                const __m512i L01 = _mm512_unpacklo_epi8(B[0], B[1]), H01 = _mm512_unpackhi_epi8(B[0], B[1]);
                const __m512i L23 = _mm512_unpacklo_epi8(B[2], B[3]), H23 = _mm512_unpackhi_epi8(B[2], B[3]);
                float *ap = acc + b * 64;
                _mm512_store_ps(ap, _mm512_add_ps(_mm512_load_ps(ap), _mm512_castsi512_ps(_mm512_unpacklo_epi16(L01, L23))));
                _mm512_store_ps(ap + 16, _mm512_add_ps(_mm512_load_ps(ap + 16),
                                                       _mm512_castsi512_ps(_mm512_unpackhi_epi16(L01, L23))));
                _mm512_store_ps(ap + 32, _mm512_add_ps(_mm512_load_ps(ap + 32),
                                                       _mm512_castsi512_ps(_mm512_unpacklo_epi16(H01, H23))));
                _mm512_store_ps(ap + 48, _mm512_add_ps(_mm512_load_ps(ap + 48),
                                                       _mm512_castsi512_ps(_mm512_unpackhi_epi16(H01, H23))));
            }
        }
    }
    for (int64_t b = 0; b < nb; b++) {
        const float *ap = acc + b * 64;
        __m512i o[4];
        transpose_lanes(_mm512_load_si512(ap), _mm512_load_si512(ap + 16), _mm512_load_si512(ap + 32),
                        _mm512_load_si512(ap + 48), o);
        for (int k = 0; k < 4; k++) {
            const int64_t r = a0 + b * 64 + 16 * k;
            _mm512_storeu_ps(y + r, _mm512_mul_ps(_mm512_loadu_ps(scale + r), _mm512_castsi512_ps(o[k])));
        }
    }
}

}  // namespace

// The VQ4P product is the scalar kernel (gathers were no faster).
const Kernels *kernels_avx512() {
    static const Kernels k = {
        "avx512",
        {row_f32, nullptr, row_q8, row_q4, nullptr, nullptr, nullptr, row_q3},
        dot_f32,
        vq_table,
        __builtin_cpu_supports("avx512vbmi") ? vq_gemv_u8_vbmi : vq_gemv_u8,
        kernels_scalar().vq_gemv_p6,
        tower::attn_row<D8>,
        tower::gelu_tanh<D8>,
        tower::gelu_erf<D8>,
        // vq_gemm_u8_tokens: none. A zmm port of the AVX2 shared-code
        // product (tables transposed per tile, 8 or 16 inputs a load) lost
        // to the VBMI register-table product per input, in the kernel (6.8
        // against 13.3 G code bytes/s at 8 inputs) and end to end (512
        // tokens on a 4-layer 48B cut: 9.0-9.6 s against 8.5 s); LEARNED,
        // 2026-12-07 (fourth session).
        nullptr,
        {nullptr, nullptr, rows_grouped_n<8>, rows_grouped_n<4>, nullptr, nullptr, nullptr, rows_grouped_n<3>},
        axpy,
    };
    return &k;
}

}  // namespace sluice
