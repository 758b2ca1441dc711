// Elementwise math and batched matrix products shared by the blocks. All
// activations are f32 (MODEL.md §11); matmul uses the same per-row kernel as
// a single-token product, so chunked prefill and decode agree bit for bit.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "quant/kernels.h"
#include "runtime/thread_pool.h"

namespace sluice {

struct Ops {
    const Kernels *k = nullptr;
    ThreadPool *pool = nullptr;

    // Y[t][r] = W[r]·X[t] for t < n; X is n x ldx, Y is n x ldy.
    void matmul(const QTensor &W, const float *X, int64_t ldx, int64_t n, float *Y, int64_t ldy) const {
        auto fn = k->row_dot[(int)W.fmt];
        const QTensor *w = &W;
        // A slice must carry enough work to pay for waking a thread (~64K
        // multiply-adds); tiny projections stay on the calling thread.
        const int64_t grain = std::max<int64_t>(16, 65536 / std::max<int64_t>(1, W.cols * n));
        pool->parallel_for(W.rows, grain, [=](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; r++)
                for (int64_t t = 0; t < n; t++) Y[t * ldy + r] = fn(*w, r, X + t * ldx);
        });
    }
    void matmul(const QTensor &W, const float *X, int64_t n, float *Y) const { matmul(W, X, W.cols, n, Y, W.rows); }
};

inline float sigmoidf(float z) { return 1.0f / (1.0f + std::exp(-z)); }
inline float siluf(float z) { return z * sigmoidf(z); }
// softplus with warp's threshold of 20 (MODEL.md §0).
inline float softplusf(float z) { return z > 20.0f ? z : std::log1p(std::exp(z)); }

// RMSNorm(x; w)_i = (x_i · r) · w_i, r = 1/sqrt(mean(x²) + eps) (MODEL.md §3.2).
inline void rmsnorm(const float *x, const float *w, int64_t n, float eps, float *out) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    const float r = 1.0f / std::sqrt(ss / (float)n + eps);
    for (int64_t i = 0; i < n; i++) out[i] = (x[i] * r) * w[i];
}

}  // namespace sluice
