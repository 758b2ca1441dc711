// AVX2 + FMA kernels, compiled with -mavx2 -mfma for this file only and
// selected at run time.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "quant/kernels.h"
#include "quant/tower_math.h"
#include "quant/unpack_simd.h"

namespace sluice {
namespace {

// The tower's double lanes (quant/tower_math.h), four per register.
struct D4 {
    static constexpr int W = 4;
    __m256d v;
    using M = __m256d;
    static D4 set(double x) { return {_mm256_set1_pd(x)}; }
    static D4 load(const double *p) { return {_mm256_loadu_pd(p)}; }
    static D4 loadf(const float *p) { return {_mm256_cvtps_pd(_mm_loadu_ps(p))}; }
    void store(double *p) const { _mm256_storeu_pd(p, v); }
    void storef(float *p) const { _mm_storeu_ps(p, _mm256_cvtpd_ps(v)); }
    friend D4 operator+(D4 a, D4 b) { return {_mm256_add_pd(a.v, b.v)}; }
    friend D4 operator-(D4 a, D4 b) { return {_mm256_sub_pd(a.v, b.v)}; }
    friend D4 operator*(D4 a, D4 b) { return {_mm256_mul_pd(a.v, b.v)}; }
    friend D4 operator/(D4 a, D4 b) { return {_mm256_div_pd(a.v, b.v)}; }
    static M lt(D4 a, D4 b) { return _mm256_cmp_pd(a.v, b.v, _CMP_LT_OQ); }
    static M gt(D4 a, D4 b) { return _mm256_cmp_pd(a.v, b.v, _CMP_GT_OQ); }
    static D4 sel(M m, D4 a, D4 b) { return {_mm256_blendv_pd(b.v, a.v, m)}; }
    static D4 shl52(D4 a) { return {_mm256_castsi256_pd(_mm256_slli_epi64(_mm256_castpd_si256(a.v), 52))}; }
};

// 32 lanes in four registers, reduced pairwise (j+16, j+8, j+4, j+2, j+1):
// the scalar reference order, so results are bit-identical to it.
inline float hsum4(__m256 s0, __m256 s1, __m256 s2, __m256 s3) {
    __m256 b = _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3));
    __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
    __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));
    return _mm_cvtss_f32(d) + _mm_cvtss_f32(_mm_shuffle_ps(d, d, 1));
}

inline __m256 cvt8(const int8_t *p) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p))); }

inline float dot_i8(const int8_t *w, const float *x, int64_t lim) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= lim; i += 32) {
        s0 = _mm256_fmadd_ps(cvt8(w + i), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(cvt8(w + i + 8), _mm256_loadu_ps(x + i + 8), s1);
        s2 = _mm256_fmadd_ps(cvt8(w + i + 16), _mm256_loadu_ps(x + i + 16), s2);
        s3 = _mm256_fmadd_ps(cvt8(w + i + 24), _mm256_loadu_ps(x + i + 24), s3);
    }
    float part = hsum4(s0, s1, s2, s3);
    for (; i < lim; i++) part += (float)w[i] * x[i];
    return part;
}

float dot_f32(const float *a, const float *b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    float part = hsum4(s0, s1, s2, s3);
    for (; i < n; i++) part += a[i] * b[i];
    return part;
}

float row_f32(const QTensor &W, int64_t r, const float *x) {
    return dot_f32(reinterpret_cast<const float *>(W.row(r)), x, W.cols);
}

// dot_i8 for two inputs sharing the converted weights: each input's sums
// in dot_i8's order (four accumulators, hsum4, then the tail unfused).
inline void dot_i8_x2(const int8_t *w, const float *xa, const float *xb, int64_t lim, float *pa, float *pb) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t i = 0;
    for (; i + 32 <= lim; i += 32) {
        const __m256 w0 = cvt8(w + i), w1 = cvt8(w + i + 8), w2 = cvt8(w + i + 16), w3 = cvt8(w + i + 24);
        a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xa + i), a0);
        a1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xa + i + 8), a1);
        a2 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xa + i + 16), a2);
        a3 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xa + i + 24), a3);
        b0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xb + i), b0);
        b1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xb + i + 8), b1);
        b2 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xb + i + 16), b2);
        b3 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xb + i + 24), b3);
    }
    float sa = hsum4(a0, a1, a2, a3), sb = hsum4(b0, b1, b2, b3);
    for (; i < lim; i++) {
        sa += (float)w[i] * xa[i];
        sb += (float)w[i] * xb[i];
    }
    *pa = sa;
    *pb = sb;
}

// Row r of a grouped integer format (Q8G, Q4G, Q3G) against n inputs,
// y[t·ldy] = Σ_g scale_g · dot_i8(group g, x_t): per block of inputs, each
// group is unpacked once (group <= 4096, checked at load) and dotted with
// the inputs two at a time. One input is row_dot; every input's sums are
// the same whatever n, so batched and single rows agree bit for bit.
template <int Bits>
void grouped_rows(const QTensor &W, int64_t r, const float *X, int64_t ldx, int64_t n, float *y, int64_t ldy) {
    const uint8_t *q = W.row(r);
    const float *sc = W.row_scales(r);
    alignas(64) int8_t unp[4096];
    constexpr int64_t B = 64;
    float acc[B];
    for (int64_t t0 = 0; t0 < n; t0 += B) {
        const int64_t m = std::min(B, n - t0);
        for (int64_t t = 0; t < m; t++) acc[t] = 0.0f;
        for (int64_t g = 0; g < W.ng; g++) {
            const int64_t i0 = g * W.group, lim = i0 + W.group < W.cols ? W.group : W.cols - i0;
            const int8_t *w = unp;
            if constexpr (Bits == 8) w = reinterpret_cast<const int8_t *>(q) + i0;
            else if constexpr (Bits == 4) unpack_q4_group(q + i0 / 2, W.group, unp);
            else unpack_q3_group(q, i0, lim, unp);
            const float *x = X + t0 * ldx + i0;
            int64_t t = 0;
            for (; t + 2 <= m; t += 2) {
                float pa, pb;
                dot_i8_x2(w, x + t * ldx, x + (t + 1) * ldx, lim, &pa, &pb);
                acc[t] += sc[g] * pa;
                acc[t + 1] += sc[g] * pb;
            }
            for (; t < m; t++) acc[t] += sc[g] * dot_i8(w, x + t * ldx, lim);
        }
        for (int64_t t = 0; t < m; t++) y[(t0 + t) * ldy] = acc[t];
    }
}

template <int Bits>
float row_grouped(const QTensor &W, int64_t r, const float *x) {
    float y;
    grouped_rows<Bits>(W, r, x, 0, 1, &y, 0);
    return y;
}

// Eight 32-lane sums, each as four registers already added to one (b[u] =
// (s0 + s2) + (s1 + s3), hsum4's first step), reduced side by side with
// hsum4's pairing (lanes j + 4, then j + 2, then the last pair): the eight
// results in order, bit for bit what hsum4 gives each.
inline __m256 hsum4_x8(const __m256 b[8]) {
    __m256 p[4];
    for (int k = 0; k < 4; k++)  // [c(2k) | c(2k+1)], c = lo128 + hi128
        p[k] = _mm256_add_ps(_mm256_permute2f128_ps(b[2 * k], b[2 * k + 1], 0x20),
                             _mm256_permute2f128_ps(b[2 * k], b[2 * k + 1], 0x31));
    __m256 q[2];
    for (int k = 0; k < 2; k++)  // lanes j + j+2 of inputs 4k, 4k+2 | 4k+1, 4k+3
        q[k] = _mm256_add_ps(_mm256_shuffle_ps(p[2 * k], p[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(p[2 * k], p[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    // [0, 2, 4, 6 | 1, 3, 5, 7], then in order.
    const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(q[0], q[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(q[0], q[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Three rows against n inputs, each (row, input) summed as grouped_rows
// sums it (dot_i8's four accumulators, hsum4's pairing, the tail unfused,
// then acc += scale · part), so the same bits. Each group's codes become
// floats once per block of inputs; every input load feeds the three rows'
// FMAs; the sums of eight inputs reduce side by side (hsum4_x8) and add to
// the accumulators as vectors. One row at a time the per-input reduction
// and the scalar update were as many instructions as the FMAs of a
// 128-wide group (perf), which held the batched rows at 1.7x the
// one-input rate. Three rows' 12 accumulators fit the 16 ymm.
template <int Bits>
void grouped_rows3(const QTensor &W, int64_t r, const float *X, int64_t ldx, int64_t n, float *Y, int64_t ldy) {
    alignas(64) int8_t unp[4096];
    alignas(64) float wf[3][4096];
    const float *sc[3];
    for (int k = 0; k < 3; k++) sc[k] = W.row_scales(r + k);
    constexpr int64_t B = 64;
    alignas(32) float acc[3][B];
    alignas(32) float part[8];
    for (int64_t t0 = 0; t0 < n; t0 += B) {
        const int64_t m = std::min(B, n - t0);
        for (int k = 0; k < 3; k++)
            for (int64_t t = 0; t < B; t++) acc[k][t] = 0.0f;
        for (int64_t g = 0; g < W.ng; g++) {
            const int64_t i0 = g * W.group, lim = i0 + W.group < W.cols ? W.group : W.cols - i0;
            for (int k = 0; k < 3; k++) {
                const uint8_t *q = W.row(r + k);
                const int8_t *w = unp;
                if constexpr (Bits == 8) w = reinterpret_cast<const int8_t *>(q) + i0;
                else if constexpr (Bits == 4) unpack_q4_group(q + i0 / 2, W.group, unp);
                else unpack_q3_group(q, i0, lim, unp);
                int64_t i = 0;
                for (; i + 8 <= lim; i += 8) _mm256_store_ps(wf[k] + i, cvt8(w + i));
                for (; i < lim; i++) wf[k][i] = (float)w[i];
            }
            const int64_t full = lim & ~(int64_t)31;
            for (int64_t tb = 0; tb < m; tb += 8) {
                // Inputs past m repeat input tb: computed, never stored.
                __m256 bv[3][8];
                for (int64_t u = 0; u < 8; u++) {
                    const float *x = X + (t0 + (tb + u < m ? tb + u : tb)) * ldx + i0;
                    __m256 sv[3][4];
                    for (int k = 0; k < 3; k++)
                        for (int j = 0; j < 4; j++) sv[k][j] = _mm256_setzero_ps();
                    for (int64_t i = 0; i < full; i += 32)
                        for (int j = 0; j < 4; j++) {
                            const __m256 xv = _mm256_loadu_ps(x + i + 8 * j);
                            for (int k = 0; k < 3; k++)
                                sv[k][j] = _mm256_fmadd_ps(_mm256_load_ps(wf[k] + i + 8 * j), xv, sv[k][j]);
                        }
                    for (int k = 0; k < 3; k++)
                        bv[k][u] = _mm256_add_ps(_mm256_add_ps(sv[k][0], sv[k][2]), _mm256_add_ps(sv[k][1], sv[k][3]));
                }
                for (int k = 0; k < 3; k++) {
                    __m256 pv = hsum4_x8(bv[k]);
                    if (full < lim) {
                        _mm256_store_ps(part, pv);
                        for (int64_t u = 0; u < 8 && tb + u < m; u++) {
                            const float *x = X + (t0 + tb + u) * ldx + i0;
                            for (int64_t i = full; i < lim; i++) part[u] += wf[k][i] * x[i];
                        }
                        pv = _mm256_load_ps(part);
                    }
                    float *ap = acc[k] + tb;
                    _mm256_store_ps(ap, _mm256_add_ps(_mm256_load_ps(ap), _mm256_mul_ps(_mm256_set1_ps(sc[k][g]), pv)));
                }
            }
        }
        for (int k = 0; k < 3; k++)
            for (int64_t t = 0; t < m; t++) Y[(t0 + t) * ldy + r + k] = acc[k][t];
    }
}

template <int Bits>
void rows_grouped_n(const QTensor &W, int64_t r0, int64_t r1, const float *X, int64_t ldx, int64_t n, float *Y,
                    int64_t ldy) {
    int64_t r = r0;
    if (n > 1)
        for (; r + 3 <= r1; r += 3) grouped_rows3<Bits>(W, r, X, ldx, n, Y, ldy);
    for (; r < r1; r++) grouped_rows<Bits>(W, r, X, ldx, n, Y + r, ldy);
}

void axpy(float a, const float *x, float *y, int64_t n) {
    const __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(av, _mm256_loadu_ps(x + i))));
    for (; i < n; i++) y[i] = y[i] + a * x[i];
}

void vq_table(const float *x, int64_t nv, int S, int E, const float *const *books, float *T) {
    for (int64_t v = 0; v < nv; v++) {
        const float *xv = x + 8 * v;
        for (int s = 0; s < S; s++) {
            const float *b = books[s];
            float *t = T + (v * S + s) * E;
            int c = 0;
            // 64 entries side by side: eight independent chains of fused
            // adds hide the FMA latency (one chain at a time waited on it);
            // each entry's order is unchanged, so are its bits.
            for (; c + 64 <= E; c += 64) {
                __m256 a[8];
                for (int u = 0; u < 8; u++) a[u] = _mm256_setzero_ps();
                for (int j = 0; j < 8; j++) {
                    const __m256 xj = _mm256_broadcast_ss(xv + j);
                    for (int u = 0; u < 8; u++) a[u] = _mm256_fmadd_ps(xj, _mm256_loadu_ps(b + j * E + c + 8 * u), a[u]);
                }
                for (int u = 0; u < 8; u++) _mm256_storeu_ps(t + c + 8 * u, a[u]);
            }
            for (; c + 8 <= E; c += 8) {
                __m256 a = _mm256_setzero_ps();
                for (int j = 0; j < 8; j++)
                    a = _mm256_fmadd_ps(_mm256_set1_ps(xv[j]), _mm256_loadu_ps(b + j * E + c), a);
                _mm256_storeu_ps(t + c, a);
            }
            for (; c < E; c++) {
                float a = 0.0f;
                for (int j = 0; j < 8; j++) a = std::fma(xv[j], b[j * E + c], a);
                t[c] = a;
            }
        }
    }
}


// Vector positions per tile in the AVX2 VQ products: 8 x 3 KB of VQ3R table
// stays in L1 (32 KB here) while codes stream; the shared kVqTile (32) keeps
// it in L2. On Zen 3 the gather ran 1.16-1.26x faster with 8 (LEARNED,
// 2026-12-05). Tiling never changes a row's order of adds.
constexpr int64_t kL1Tile = 8;

// The VQ product with AVX2 gathers, eight rows per register. Loop order is
// the scalar kernel's (kL1Tile vector positions, every 64-row
// block of the range per tile, partial sums in y between tiles), and each
// lane adds its row's entries v-major then by stage with plain adds, so the
// bits equal the scalar kernel's (tests/unit/kernels_test.cpp checks every
// backend). The scalar kernel is latency-bound on its dependent
// load-load-add chain per lookup; a gather does eight independent lookups.
// Row ranges not aligned to 8 and S > 3 go to the scalar kernel.
void vq_gemv_u8(const float *T, const uint8_t *idx, int64_t nv, int S, int E, const float *scale, float *y,
                int64_t r0, int64_t r1) {
    const auto scalar = kernels_scalar().vq_gemv_u8;
    const int64_t a0 = (r0 + 7) & ~(int64_t)7, a1 = r1 & ~(int64_t)7;
    if (S < 1 || S > 3 || a0 >= a1) {
        scalar(T, idx, nv, S, E, scale, y, r0, r1);
        return;
    }
    if (r0 < a0) scalar(T, idx, nv, S, E, scale, y, r0, a0);
    if (a1 < r1) scalar(T, idx, nv, S, E, scale, y, a1, r1);
    // Stage s of row i of an 8-row group is code byte S*i + s (at most byte
    // 23): one shuffle of the low 16 bytes and one of the next 8 pick them.
    __m128i pick_lo[3], pick_hi[3];
    for (int s = 0; s < S; s++) {
        alignas(16) int8_t lo[16], hi[16];
        for (int i = 0; i < 16; i++) lo[i] = hi[i] = -128;  // zero the byte
        for (int i = 0; i < 8; i++) {
            const int p = S * i + s;
            if (p < 16) lo[i] = (int8_t)p;
            else hi[i] = (int8_t)(p - 16);
        }
        pick_lo[s] = _mm_load_si128((const __m128i *)lo);
        pick_hi[s] = _mm_load_si128((const __m128i *)hi);
    }
    const int cb = 8 * S;  // code bytes per group
    for (int64_t v0 = 0; v0 < nv; v0 += kL1Tile) {
        const int64_t v1 = std::min(nv, v0 + kL1Tile);
        for (int64_t b0 = a0 & ~(int64_t)63; b0 < a1; b0 += 64) {
            const int64_t g0 = std::max(b0, a0), g1 = std::min(b0 + 64, a1);
            const uint8_t *blk = idx + (b0 >> 6) * nv * 64 * S;
            for (int64_t g = g0; g < g1; g += 8) {
                __m256 acc = v0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(y + g);
                for (int64_t v = v0; v < v1; v++) {
                    const uint8_t *u = blk + (v * 64 + (g - b0)) * S;
                    // 8 or 16 + 8 code bytes; never past the group's own.
                    const __m128i c0 = cb >= 16 ? _mm_loadu_si128((const __m128i *)u) : _mm_loadl_epi64((const __m128i *)u);
                    const __m128i c1 = cb > 16 ? _mm_loadl_epi64((const __m128i *)(u + 16)) : _mm_setzero_si128();
                    const float *t = T + v * S * E;
                    for (int s = 0; s < S; s++) {
                        const __m128i b = _mm_or_si128(_mm_shuffle_epi8(c0, pick_lo[s]), _mm_shuffle_epi8(c1, pick_hi[s]));
                        const __m256i ix = _mm256_cvtepu8_epi32(b);
                        acc = _mm256_add_ps(acc, _mm256_i32gather_ps(t + s * E, ix, 4));
                    }
                }
                if (v1 == nv) acc = _mm256_mul_ps(_mm256_loadu_ps(scale + g), acc);
                _mm256_storeu_ps(y + g, acc);
            }
        }
    }
}


// Several inputs through one VQ matrix (a prefill chunk's tokens routed to
// one expert). A gather looks up eight rows for one input; here the
// tables are transposed per tile to [v][s][code][input], so one code
// byte picks a contiguous run of every input's entry and eight inputs
// cost one load and one add instead of a gather each. Each (input, row)
// still adds v-major, then by stage, from 0, with partial sums kept
// between tiles as floats: vq_gemv_u8's bits (tests/unit/kernels_test.cpp).
template <int NQ>
void vq_tokens_rows(const float *TX, int S, int E, const uint8_t *idx, int64_t nv, int64_t v0,
                    int64_t v1, float *acc, int64_t r0, int64_t r1, const float *scale, float *const *y, int64_t m) {
    constexpr int64_t mp = 8 * NQ;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *blk = idx + (r >> 6) * nv * 64 * S + (r & 63) * S;
        float *ar = acc + (r - r0) * mp;
        __m256 a[NQ];
        for (int q = 0; q < NQ; q++) a[q] = v0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(ar + 8 * q);
        for (int64_t v = v0; v < v1; v++) {
            const uint8_t *u = blk + v * 64 * S;
            const float *tv_ = TX + (v - v0) * S * E * mp;
            for (int s = 0; s < S; s++) {
                const float *e = tv_ + ((int64_t)s * E + u[s]) * mp;
                for (int q = 0; q < NQ; q++) a[q] = _mm256_add_ps(a[q], _mm256_loadu_ps(e + 8 * q));
            }
        }
        for (int q = 0; q < NQ; q++) _mm256_storeu_ps(ar + 8 * q, a[q]);
        if (v1 == nv)
            for (int64_t i = 0; i < m; i++) y[i][r] = scale[r] * ar[i];
    }
}

// r[k][j] -> r[j][k]: the eight rows become the eight columns (moves only).
inline void transpose8(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

void vq_gemm_u8_tokens(const float *const *T, int64_t m, const uint8_t *idx, int64_t nv, int S, int E,
                       const float *scale, float *const *y, int64_t r0, int64_t r1, float *scratch) {
    // Under four inputs transposing the tables costs more than the gathers
    // it saves (2 inputs: 0.77x; 4: 1.6x, 8: 2.5x, 16: 2.8x the per-input
    // gathers on Zen 3, a 1024 x 2304 VQ3R matrix: LEARNED, 2026-12-05).
    if (m < 4 || m > kVqTokensMax || r0 >= r1) {
        for (int64_t i = 0; i < m; i++) vq_gemv_u8(T[i], idx, nv, S, E, scale, y[i], r0, r1);
        return;
    }
    const int64_t mp = vq_tokens_padded(m), tile = vq_tokens_tile(m, S, E);
    float *TX = scratch;
    float *acc = scratch + tile * S * E * mp;
    for (int64_t v0 = 0; v0 < nv; v0 += tile) {
        const int64_t v1 = std::min(nv, v0 + tile);
        for (int64_t v = v0; v < v1; v++)
            for (int s = 0; s < S; s++) {
                float *dst = TX + ((v - v0) * S + s) * (int64_t)E * mp;
                if (E % 8 == 0) {
                    // Eight codes of eight inputs per 8 x 8 transpose in
                    // registers: the scalar copy below was about half of this
                    // kernel's time at 16 inputs (perf, 512-token prefill).
                    // Padding lanes get zeros (added up, never stored).
                    for (int64_t q = 0; q < mp; q += 8)
                        for (int c0 = 0; c0 < E; c0 += 8) {
                            __m256 r[8];
                            for (int k = 0; k < 8; k++)
                                r[k] = q + k < m ? _mm256_loadu_ps(T[q + k] + (v * S + s) * (int64_t)E + c0)
                                                 : _mm256_setzero_ps();
                            transpose8(r);
                            for (int j = 0; j < 8; j++) _mm256_storeu_ps(dst + (int64_t)(c0 + j) * mp + q, r[j]);
                        }
                    continue;
                }
                for (int64_t i = 0; i < m; i++) {
                    const float *src = T[i] + (v * S + s) * (int64_t)E;
                    for (int c = 0; c < E; c++) dst[(int64_t)c * mp + i] = src[c];
                }
                // Padding lanes: added up and never stored; zeros keep them
                // finite (written on the first tile only, never overwritten).
                if (v0 == 0)
                    for (int c = 0; c < E; c++)
                        for (int64_t i = m; i < mp; i++) dst[(int64_t)c * mp + i] = 0.0f;
            }
        if (mp == 8) vq_tokens_rows<1>(TX, S, E, idx, nv, v0, v1, acc, r0, r1, scale, y, m);
        else vq_tokens_rows<2>(TX, S, E, idx, nv, v0, v1, acc, r0, r1, scale, y, m);
    }
}

}  // namespace

// VQ4P's product stays the shared scalar kernel (exact, L1-resident).
const Kernels *kernels_avx2() {
    static const Kernels k = {
        "avx2",
        {row_f32, nullptr, row_grouped<8>, row_grouped<4>, nullptr, nullptr, nullptr, row_grouped<3>},
        dot_f32,
        vq_table,
        vq_gemv_u8,
        kernels_scalar().vq_gemv_p6,
        tower::attn_row<D4>,
        tower::gelu_tanh<D4>,
        tower::gelu_erf<D4>,
        vq_gemm_u8_tokens,
        {nullptr, nullptr, rows_grouped_n<8>, rows_grouped_n<4>, nullptr, nullptr, nullptr, rows_grouped_n<3>},
        axpy,
    };
    return &k;
}

}  // namespace sluice
