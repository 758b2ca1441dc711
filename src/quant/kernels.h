// Kernel function slots. The scalar set is always built and is the
// reference; AVX2 / AVX-512 sets are compiled in their own translation units
// with per-file ISA flags and chosen once, at start-up, from CPUID; on
// AArch64 the NEON set is chosen from the hwcaps.
#pragma once
#include <cstdint>

#include "quant/qtensor.h"
#include "sluice/sluice.h"

namespace sluice {

struct Kernels {
    const char *name;
    // Dot of row r of W with x[cols]: Σ_groups scale_g · Σ_{i∈g} q_i·x_i, the
    // group sum scaled once (MODEL.md §11). Indexed by QFmt code.
    float (*row_dot[8])(const QTensor &W, int64_t r, const float *x);
    float (*dot)(const float *a, const float *b, int64_t n);
    // VQ lookup table T[(v*S + s)*E + c] = Σ_{j<8} x[8v+j]·book_s[j][c]
    // (books transposed: component-major, E entries per component, so a
    // vector of entries loads contiguously).
    void (*vq_table)(const float *x, int64_t nv, int S, int E, const float *const *books, float *T);
    // Byte-coded VQ matrix-vector product over rows [r0, r1):
    // y[r] = scale[r] · Σ_v Σ_s T[v][s][code(r,v,s)], summed v-major in f32.
    void (*vq_gemv_u8)(const float *T, const uint8_t *idx, int64_t nv, int S, int E, const float *scale, float *y,
                       int64_t r0, int64_t r1);
    // VQ4P: int8 table Tq[(v*4+s)*64 + c] with one scale lam[β] per 32 vector
    // positions; y[r] = scale[r] · Σ_β lam[β]·(Σ_{v∈β} Σ_s Tq[..]) with exact
    // integer inner sums (MODEL.md §2.3).
    void (*vq_gemv_p6)(const int8_t *Tq, const float *lam, const uint8_t *idx, int64_t nv, const float *scale, float *y,
                       int64_t r0, int64_t r1);
    // Vision tower (quant/tower_math.h): one query row of one head's full
    // attention over L keys (kT: the head's keys as [hd][L]; value j at
    // V + j·ldv; scratch: L + hd doubles), and the two GELUs in place.
    // Bit-identical across backends by construction.
    void (*attn_row)(const float *q, const float *kT, int64_t L, int64_t hd, const float *V, int64_t ldv,
                     double scale, double *scratch, float *out);
    void (*gelu_tanh)(float *x, int64_t n);
    void (*gelu_erf)(float *x, int64_t n);
    // vq_gemv_u8 for m inputs that share one matrix (the tokens of a prefill
    // chunk routed to one expert): y[i] = the product with table T[i], rows
    // [r0, r1), every y[i][r] bit-identical to vq_gemv_u8's. scratch holds
    // vq_tokens_scratch(m, r1 - r0, S, E) floats. nullptr where a set has
    // nothing better than vq_gemv_u8 per input.
    void (*vq_gemm_u8_tokens)(const float *const *T, int64_t m, const uint8_t *idx, int64_t nv, int S, int E,
                              const float *scale, float *const *y, int64_t r0, int64_t r1, float *scratch);
    // row_dot of rows [r0, r1) for n inputs at once: Y[t·ldy + r] =
    // row_dot(W, r, X + t·ldx), bit for bit (each input's sums in row_dot's
    // order), with the codes unpacked and converted once for several inputs
    // (a prefill's trunk product), and where a set can, several rows sharing
    // each input load. Indexed by QFmt; nullptr: row_dot per input.
    void (*rows_dot_n[8])(const QTensor &W, int64_t r0, int64_t r1, const float *X, int64_t ldx, int64_t n, float *Y,
                          int64_t ldy);
    // y[i] = y[i] + a·x[i], the product rounded before the add (never fused),
    // element by element: every set gives the same bits as the loop in
    // generic code (MLA's weighted sums over its cache, the MoE's sum).
    void (*axpy)(float a, const float *x, float *y, int64_t n);
};

// Inputs per block of a batched trunk product (rows_dot_n over many
// tokens): a block's inputs stay in L2 (256 KB) while every row of a slice
// walks them; row-major over all tokens streamed the whole input from
// memory once per row. A token's bits do not depend on the block.
inline int64_t rows_token_block(int64_t cols) {
    const int64_t b = 65536 / (cols < 1 ? 1 : cols) / 16 * 16;
    return b < 16 ? 16 : b;
}

// Inputs per vq_gemm_u8_tokens call at most; vector positions per tile of
// its transposed table for m inputs (padded to 8), which keeps a tile near
// 192 KB (L2) while every row walks it; its scratch in floats (the tile and
// one partial sum per row and padded input).
constexpr int64_t kVqTokensMax = 16;
inline int64_t vq_tokens_padded(int64_t m) { return (m + 7) / 8 * 8; }
inline int64_t vq_tokens_tile(int64_t m, int S, int E) {
    const int64_t t = 49152 / ((int64_t)S * E * vq_tokens_padded(m));
    return t < 1 ? 1 : t > 8 ? 8 : t;
}
inline int64_t vq_tokens_scratch(int64_t m, int64_t rows, int S, int E) {
    const int64_t mp = vq_tokens_padded(m);
    return vq_tokens_tile(m, S, E) * S * E * mp + rows * mp;
}

const Kernels &kernels_scalar();
const Kernels *kernels_avx2();    // nullptr if not compiled in
const Kernels *kernels_avx512();  // nullptr if not compiled in
const Kernels *kernels_neon();    // nullptr if not compiled in (AArch64 only)

// Picks the kernel set: an explicit backend, else SLUICE_BACKEND from the
// environment ("scalar", "avx2", "avx512", "neon"), else the best the CPU
// runs.
// Fails for a backend the CPU or build cannot provide.
bool select_kernels(sluice_backend want, const Kernels **out, const char **why);

// Quantizes a VQ4P lookup table to int8 per block of 32 vector positions,
// exactly as MODEL.md §2.3 says (a step function: must not be reordered).
void vq_quantize_table_i8(const float *T, int64_t nv, int8_t *Tq, float *lam);

// Vector positions per tile of the VQ products (see vq_gemv_u8): 32 x 3 KB
// of VQ3R table stays in L2 while codes stream.
constexpr int64_t kVqTile = 32;

// Index of the byte unit of (row r, vector v) in a blocked index matrix.
inline int64_t vq_unit_index(int64_t r, int64_t v, int64_t nv) { return ((r >> 6) * nv + v) * 64 + (r & 63); }

}  // namespace sluice
