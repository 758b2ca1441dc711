// AVX-512 kernels. Compiled with -mavx512f -mavx512bw -mfma for this file
// only and selected at run time, so the binary still runs on older CPUs.
#include <immintrin.h>

#include <cmath>

#include "quant/kernels.h"
#include "quant/unpack_simd.h"

namespace sluice {
namespace {

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

void vq_table(const float *x, int64_t nv, int S, int E, const float *const *books, float *T) {
    // For 16 entries at a time: T[c] = Σ_j x_j·book[c][j]; entries are
    // entry-major (8 floats each), so gather component j of 16 entries.
    for (int64_t v = 0; v < nv; v++) {
        const float *xv = x + 8 * v;
        for (int s = 0; s < S; s++) {
            const float *b = books[s];
            float *t = T + (v * S + s) * E;
            int c = 0;
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

}  // namespace

// The VQ products are the scalar kernels: block-major lookups from L1 are
// exact and as fast as gathers, so every backend shares them.
const Kernels *kernels_avx512() {
    static const Kernels k = {
        "avx512",
        {row_f32, nullptr, row_q8, row_q4, nullptr, nullptr, nullptr, row_q3},
        dot_f32,
        vq_table,
        kernels_scalar().vq_gemv_u8,
        kernels_scalar().vq_gemv_p6,
    };
    return &k;
}

}  // namespace sluice
