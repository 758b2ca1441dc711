// AVX2 + FMA kernels, compiled with -mavx2 -mfma for this file only and
// selected at run time.
#include <immintrin.h>

#include "quant/kernels.h"

namespace sluice {
namespace {

inline float hsum(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

float dot_f32(const float *a, const float *b, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    float t = 0.0f;
    for (; i < n; i++) t += a[i] * b[i];
    return hsum(acc) + t;
}

float row_f32(const QTensor &W, int64_t r, const float *x) {
    return dot_f32(reinterpret_cast<const float *>(W.row(r)), x, W.cols);
}

float row_q8(const QTensor &W, int64_t r, const float *x) {
    const int8_t *q = reinterpret_cast<const int8_t *>(W.row(r));
    const float *sc = W.row_scales(r);
    float acc = 0.0f;
    for (int64_t g = 0; g < W.ng; g++) {
        int64_t i0 = g * W.group, i1 = i0 + W.group < W.cols ? i0 + W.group : W.cols;
        __m256 s = _mm256_setzero_ps();
        int64_t i = i0;
        for (; i + 8 <= i1; i += 8) {
            __m256 w = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + i))));
            s = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + i), s);
        }
        float tail = 0.0f;
        for (; i < i1; i++) tail += (float)q[i] * x[i];
        acc += (hsum(s) + tail) * sc[g];
    }
    return acc;
}

float row_q4(const QTensor &W, int64_t r, const float *x) {
    const uint8_t *q = W.row(r);
    const float *sc = W.row_scales(r);
    const __m256i k15 = _mm256_set1_epi32(15), k8 = _mm256_set1_epi32(8);
    float acc = 0.0f;
    for (int64_t g = 0; g < W.ng; g++) {
        int64_t i0 = g * W.group, i1 = i0 + W.group < W.cols ? i0 + W.group : W.cols;
        __m256 s = _mm256_setzero_ps();
        int64_t i = i0;
        for (; i + 16 <= i1; i += 16) {
            __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + (i >> 1))));
            __m256 lo = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(b, k15), k8));
            __m256 hi = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(b, 4), k8));
            __m256 a = _mm256_loadu_ps(x + i), c = _mm256_loadu_ps(x + i + 8);
            // De-interleave x into even and odd elements to meet the nibbles.
            __m256 ev = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, c, 0x88)), 0xD8));
            __m256 od = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, c, 0xDD)), 0xD8));
            s = _mm256_fmadd_ps(lo, ev, s);
            s = _mm256_fmadd_ps(hi, od, s);
        }
        float tail = 0.0f;
        for (; i < i1; i++) tail += (float)((int)((i & 1) ? (q[i >> 1] >> 4) : (q[i >> 1] & 15)) - 8) * x[i];
        acc += (hsum(s) + tail) * sc[g];
    }
    return acc;
}

float row_q3(const QTensor &W, int64_t r, const float *x) {
    const uint8_t *q = W.row(r);
    const float *sc = W.row_scales(r);
    const __m256i sh = _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21);
    const __m256i k7 = _mm256_set1_epi32(7), k4 = _mm256_set1_epi32(4);
    float acc = 0.0f;
    for (int64_t g = 0; g < W.ng; g++) {
        int64_t i0 = g * W.group, i1 = i0 + W.group < W.cols ? i0 + W.group : W.cols;
        __m256 s = _mm256_setzero_ps();
        int64_t i = i0;
        for (; i + 8 <= i1; i += 8) {
            int64_t bit = 3 * i;
            const uint8_t *p = q + (bit >> 3);
            // 24 bits plus up to 7 bits of offset fit in 4 bytes; the row's
            // guard byte keeps the 4th byte in bounds.
            uint32_t w = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
            w >>= (bit & 7);
            __m256i f = _mm256_srlv_epi32(_mm256_set1_epi32((int)w), sh);
            f = _mm256_sub_epi32(_mm256_and_si256(f, k7), k4);
            s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(f), _mm256_loadu_ps(x + i), s);
        }
        float tail = 0.0f;
        for (; i < i1; i++) {
            int64_t p = 3 * i;
            unsigned v = q[p >> 3] | ((unsigned)q[(p >> 3) + 1] << 8);
            tail += (float)((int)((v >> (p & 7)) & 7) - 4) * x[i];
        }
        acc += (hsum(s) + tail) * sc[g];
    }
    return acc;
}

void vq_table(const float *x, int64_t nv, int S, int E, const float *const *books, float *T) {
    const __m256i stride8 = _mm256_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56);
    for (int64_t v = 0; v < nv; v++) {
        const float *xv = x + 8 * v;
        for (int s = 0; s < S; s++) {
            const float *b = books[s];
            float *t = T + (v * S + s) * E;
            int c = 0;
            for (; c + 8 <= E; c += 8) {
                __m256 a = _mm256_setzero_ps();
                for (int j = 0; j < 8; j++)
                    a = _mm256_fmadd_ps(_mm256_set1_ps(xv[j]), _mm256_i32gather_ps(b + 8 * c + j, stride8, 4), a);
                _mm256_storeu_ps(t + c, a);
            }
            for (; c < E; c++) {
                float a = 0.0f;
                for (int j = 0; j < 8; j++) a += xv[j] * b[8 * c + j];
                t[c] = a;
            }
        }
    }
}

void vq_gemv_u8(const float *T, const uint8_t *idx, int64_t nv, int S, int E, const float *scale, float *y,
                int64_t r0, int64_t r1) {
    int64_t r = r0;
    const __m256i off = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(S));
    const __m256i kFF = _mm256_set1_epi32(0xFF);
    for (; r + 8 <= r1 && ((r & 63) <= 56); r += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t v = 0; v < nv; v++) {
            const uint8_t *u = idx + vq_unit_index(r, v, nv) * S;
            const float *t = T + v * S * E;
            for (int s = 0; s < S; s++) {
                __m256i code = _mm256_and_si256(_mm256_i32gather_epi32((const int *)(u + s), off, 1), kFF);
                acc = _mm256_add_ps(acc, _mm256_i32gather_ps(t + s * E, code, 4));
            }
        }
        _mm256_storeu_ps(y + r, _mm256_mul_ps(_mm256_loadu_ps(scale + r), acc));
    }
    if (r < r1) kernels_scalar().vq_gemv_u8(T, idx, nv, S, E, scale, y, r, r1);
}

const Kernels kAvx2 = {
    "avx2",
    {row_f32, nullptr, row_q8, row_q4, nullptr, nullptr, nullptr, row_q3},
    dot_f32,
    vq_table,
    vq_gemv_u8,
    // VQ4P's integer sums are exact, so the scalar kernel is already the
    // reference; AVX2 reuses it.
    nullptr,
};

}  // namespace

const Kernels *kernels_avx2() {
    static Kernels k = [] {
        Kernels t = kAvx2;
        t.vq_gemv_p6 = kernels_scalar().vq_gemv_p6;
        return t;
    }();
    return &k;
}

}  // namespace sluice
