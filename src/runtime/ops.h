// Elementwise math and batched matrix products over the thread pool, shared
// by the text blocks (src/model) and the vision tower (src/vision): it lives
// here, below both, so neither of them includes the other's internals. All
// activations are f32 (MODEL.md §11); matmul uses the same per-row kernel as
// a single-token product, so chunked prefill and decode agree bit for bit.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "quant/kernels.h"
#include "runtime/thread_pool.h"

namespace sluice {

struct Ops {
    const Kernels *k = nullptr;
    ThreadPool *pool = nullptr;

    // Y[t][r] = W[r]·X[t] for t < n; X is n x ldx, Y is n x ldy.
    void matmul(const QTensor &W, const float *X, int64_t ldx, int64_t n, float *Y, int64_t ldy) const {
        auto fn = k->row_dot[(int)W.fmt];
        auto many = k->rows_dot_n[(int)W.fmt];
        const QTensor *w = &W;
        // A slice must carry enough work to pay for waking a thread (~64K
        // multiply-adds); tiny projections stay on the calling thread.
        const int64_t grain = std::max<int64_t>(16, 65536 / std::max<int64_t>(1, W.cols * n));
        if (many && n > 1) {
            const int64_t tb = rows_token_block(W.cols);
            pool->parallel_for(W.rows, grain, [=](int64_t r0, int64_t r1) {
                for (int64_t t0 = 0; t0 < n; t0 += tb) {
                    const int64_t m = std::min(tb, n - t0);
                    many(*w, r0, r1, X + t0 * ldx, ldx, m, Y + t0 * ldy, ldy);
                }
            });
            return;
        }
        // Inputs in L2-sized blocks here too (F32 matrices such as the
        // router have no batched kernel): every row walking all n inputs
        // streamed a 512-token wave's 4.7 MB from memory once per row.
        const int64_t tb = rows_token_block(W.cols);
        pool->parallel_for(W.rows, grain, [=](int64_t r0, int64_t r1) {
            for (int64_t t0 = 0; t0 < n; t0 += tb) {
                const int64_t t1 = std::min(n, t0 + tb);
                for (int64_t r = r0; r < r1; r++)
                    for (int64_t t = t0; t < t1; t++) Y[t * ldy + r] = fn(*w, r, X + t * ldx);
            }
        });
    }
    void matmul(const QTensor &W, const float *X, int64_t n, float *Y) const { matmul(W, X, W.cols, n, Y, W.rows); }
};

// A grow-only float buffer whose growth leaves the new elements unwritten
// (its contents are lost when it grows): for outputs written whole before
// any read. std::vector::resize zero-fills what it adds, a pass of its own
// over memory the caller overwrites next: a 512-token wave's gate/up VQ
// tables are 0.9 GB at the 48B shape (0.7 % of that prompt's samples).
class RawFloats {
public:
    float *grow(int64_t n) {
        if (n > cap_) {
            p_.reset(new float[(size_t)n]);  // default-initialised: not written
            cap_ = n;
        }
        return p_.get();
    }

private:
    std::unique_ptr<float[]> p_;
    int64_t cap_ = 0;
};

// At least n floats of a grow-only buffer, contents left as they were: for
// outputs a product writes whole (a fresh vector per call zeroes and
// faults in every page again).
inline float *scratch(std::vector<float> &v, int64_t n) {
    if (v.size() < (size_t)n) v.resize((size_t)n);
    return v.data();
}

inline float sigmoidf(float z) { return 1.0f / (1.0f + std::exp(-z)); }
inline float siluf(float z) { return z * sigmoidf(z); }
// softplus with warp's threshold of 20 (MODEL.md §0).
inline float softplusf(float z) { return z > 20.0f ? z : std::log1p(std::exp(z)); }

// RMSNorm(x; w)_i = (x_i · r) · w_i, r = 1/sqrt(mean(x²) + eps) (MODEL.md §3.2).
// Inputs and outputs are f32; the sum of squares, r and the product are
// carried in double and rounded once per element (accumulation order and
// width are not part of the warp contract, MODEL.md §11). On K3-shaped
// containers the f32 version's error in r and its two roundings per element
// were a large share of the engine's distance to the float64 oracle
// (docs/LEARNED.md, 2026-12-02). O(n) per token, far off the hot path.
// out may alias x.
inline void rmsnorm(const float *x, const float *w, int64_t n, float eps, float *out) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    const double r = 1.0 / std::sqrt(ss / (double)n + (double)eps);
    for (int64_t i = 0; i < n; i++) out[i] = (float)(((double)x[i] * r) * (double)w[i]);
}

}  // namespace sluice
