// AVX-512 kernels. Compiled with -mavx512f -mavx512bw -mfma for this file
// only and selected at run time, so the binary still runs on older CPUs.
#include <immintrin.h>

#include "quant/kernels.h"

namespace sluice {
namespace {

inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

float dot_f32(const float *a, const float *b, int64_t n) {
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
    }
    return hsum(acc);
}

float row_f32(const QTensor &W, int64_t r, const float *x) {
    return dot_f32(reinterpret_cast<const float *>(W.row(r)), x, W.cols);
}

// Groups whose width is a multiple of 32 take the vector path; a partial
// last group (cols not a multiple of the group) is finished with masks.
float row_q8(const QTensor &W, int64_t r, const float *x) {
    const int8_t *q = reinterpret_cast<const int8_t *>(W.row(r));
    const float *sc = W.row_scales(r);
    float acc = 0.0f;
    for (int64_t g = 0; g < W.ng; g++) {
        int64_t i0 = g * W.group, i1 = i0 + W.group < W.cols ? i0 + W.group : W.cols;
        __m512 s = _mm512_setzero_ps();
        int64_t i = i0;
        for (; i + 16 <= i1; i += 16) {
            __m512 w = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + i))));
            s = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + i), s);
        }
        if (i < i1) {
            __mmask16 m = (__mmask16)((1u << (i1 - i)) - 1);
            __m512 w = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, q + i)));
            s = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m, x + i), s);
        }
        acc += hsum(s) * sc[g];
    }
    return acc;
}

float row_q4(const QTensor &W, int64_t r, const float *x) {
    const uint8_t *q = W.row(r);
    const float *sc = W.row_scales(r);
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i k15 = _mm512_set1_epi32(15), k8 = _mm512_set1_epi32(8);
    float acc = 0.0f;
    for (int64_t g = 0; g < W.ng; g++) {
        int64_t i0 = g * W.group, i1 = i0 + W.group < W.cols ? i0 + W.group : W.cols;
        __m512 s = _mm512_setzero_ps();
        int64_t i = i0;
        for (; i + 32 <= i1; i += 32) {
            __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q + (i >> 1))));
            __m512 lo = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(b, k15), k8));
            __m512 hi = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(b, 4), k8));
            __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
            s = _mm512_fmadd_ps(lo, _mm512_permutex2var_ps(x0, ev, x1), s);
            s = _mm512_fmadd_ps(hi, _mm512_permutex2var_ps(x0, od, x1), s);
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
    // Unpack 16 three-bit fields (48 bits) per step: each lane takes the
    // 32-bit word holding its field and shifts it down.
    const __m512i lane = _mm512_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45);
    const __m512i k7 = _mm512_set1_epi32(7), k4 = _mm512_set1_epi32(4);
    float acc = 0.0f;
    alignas(64) uint8_t buf[8] = {0};
    for (int64_t g = 0; g < W.ng; g++) {
        int64_t i0 = g * W.group, i1 = i0 + W.group < W.cols ? i0 + W.group : W.cols;
        __m512 s = _mm512_setzero_ps();
        int64_t i = i0;
        for (; i + 16 <= i1; i += 16) {
            // Elements i..i+15 start at bit 3i; i is a multiple of 16 here
            // (groups are multiples of 8 and i0 % 16 == 0 for group 128), so
            // the 48 bits start on a byte boundary when 3i % 8 == 0.
            int64_t bit = 3 * i;
            const uint8_t *p = q + (bit >> 3);
            uint64_t w = 0;
            for (int k = 0; k < 7; k++) buf[k] = p[k];
            __builtin_memcpy(&w, buf, 8);
            w >>= (bit & 7);
            __m512i words = _mm512_set1_epi64((long long)w);
            // Lanes need 64-bit shifts by 3k; split into low/high dwords.
            __m512i lo64 = _mm512_srlv_epi64(words, _mm512_setr_epi64(0, 3, 6, 9, 12, 15, 18, 21));
            __m512i hi64 = _mm512_srlv_epi64(words, _mm512_setr_epi64(24, 27, 30, 33, 36, 39, 42, 45));
            __m256i lo32 = _mm512_cvtepi64_epi32(lo64), hi32 = _mm512_cvtepi64_epi32(hi64);
            __m512i f = _mm512_inserti64x4(_mm512_castsi256_si512(lo32), hi32, 1);
            f = _mm512_sub_epi32(_mm512_and_si512(f, k7), k4);
            s = _mm512_fmadd_ps(_mm512_cvtepi32_ps(f), _mm512_loadu_ps(x + i), s);
        }
        (void)lane;
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
    // For 16 entries at a time: T[c] = Σ_j x_j·book[c][j]; entries are
    // entry-major (8 floats each), so gather component j of 16 entries.
    const __m512i stride8 = _mm512_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120);
    for (int64_t v = 0; v < nv; v++) {
        const float *xv = x + 8 * v;
        for (int s = 0; s < S; s++) {
            const float *b = books[s];
            float *t = T + (v * S + s) * E;
            int c = 0;
            for (; c + 16 <= E; c += 16) {
                __m512 a = _mm512_setzero_ps();
                for (int j = 0; j < 8; j++)
                    a = _mm512_fmadd_ps(_mm512_set1_ps(xv[j]), _mm512_i32gather_ps(stride8, b + 8 * c + j, 4), a);
                _mm512_storeu_ps(t + c, a);
            }
            for (; c < E; c++) {
                float a = 0.0f;
                for (int j = 0; j < 8; j++) a += xv[j] * b[8 * c + j];
                t[c] = a;
            }
        }
    }
}

// 16 rows per step; each lane accumulates its row in the same order as the
// scalar kernel (v-major, then stage), so results are bit-identical to it.
void vq_gemv_u8(const float *T, const uint8_t *idx, int64_t nv, int S, int E, const float *scale, float *y,
                int64_t r0, int64_t r1) {
    int64_t r = r0;
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (; r + 16 <= r1 && ((r & 63) <= 48); r += 16) {
        __m512 acc = _mm512_setzero_ps();
        const __m512i off = _mm512_mullo_epi32(lanes, _mm512_set1_epi32(S));
        for (int64_t v = 0; v < nv; v++) {
            const uint8_t *u = idx + vq_unit_index(r, v, nv) * S;
            const float *t = T + v * S * E;
            for (int s = 0; s < S; s++) {
                __m512i code = _mm512_and_si512(_mm512_i32gather_epi32(off, (const int *)(u + s), 1),
                                                _mm512_set1_epi32(0xFF));
                acc = _mm512_add_ps(acc, _mm512_i32gather_ps(code, t + s * E, 4));
            }
        }
        _mm512_storeu_ps(y + r, _mm512_mul_ps(_mm512_loadu_ps(scale + r), acc));
    }
    if (r < r1) kernels_scalar().vq_gemv_u8(T, idx, nv, S, E, scale, y, r, r1);
}

void vq_gemv_p6(const int8_t *Tq, const float *lam, const uint8_t *idx, int64_t nv, const float *scale, float *y,
                int64_t r0, int64_t r1) {
    int64_t r = r0;
    const __m512i off = _mm512_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45);
    const __m512i k63 = _mm512_set1_epi32(63), kFF = _mm512_set1_epi32(0xFFFFFF);
    for (; r + 16 <= r1 && ((r & 63) <= 48); r += 16) {
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b0 = 0; b0 < nv; b0 += 32) {
            int64_t b1 = b0 + 32 < nv ? b0 + 32 : nv;
            __m512i isum = _mm512_setzero_si512();
            for (int64_t v = b0; v < b1; v++) {
                const uint8_t *u = idx + vq_unit_index(r, v, nv) * 3;
                const int8_t *t = Tq + v * 256;
                __m512i w = _mm512_and_si512(_mm512_i32gather_epi32(off, (const int *)u, 1), kFF);
                for (int s = 0; s < 4; s++) {
                    __m512i c = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(w, 6 * s), k63),
                                                 _mm512_set1_epi32(64 * s));
                    // Gather 32-bit words at byte offsets, keep the low byte sign-extended.
                    __m512i g = _mm512_i32gather_epi32(c, (const int *)t, 1);
                    isum = _mm512_add_epi32(isum, _mm512_srai_epi32(_mm512_slli_epi32(g, 24), 24));
                }
            }
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(lam[b0 / 32]), _mm512_cvtepi32_ps(isum)));
        }
        _mm512_storeu_ps(y + r, _mm512_mul_ps(_mm512_loadu_ps(scale + r), acc));
    }
    if (r < r1) kernels_scalar().vq_gemv_p6(Tq, lam, idx, nv, scale, y, r, r1);
}

const Kernels kAvx512 = {
    "avx512",
    {row_f32, nullptr, row_q8, row_q4, nullptr, nullptr, nullptr, row_q3},
    dot_f32,
    vq_table,
    vq_gemv_u8,
    vq_gemv_p6,
};

}  // namespace

const Kernels *kernels_avx512() { return &kAvx512; }

}  // namespace sluice
