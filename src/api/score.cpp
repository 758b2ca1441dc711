// sluice_score and sluice_ppl_summary: what `sluice perplexity` and the
// quality numbers (docs/QUALITY.md) are computed with.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "api/ctx.h"

namespace {
constexpr size_t kChunk = 64;  // positions per eval: bounds memory to kChunk x vocab floats

sluice_status arg_error(sluice_ctx *ctx, const char *msg) {
    if (ctx) ctx->error = msg;
    return SLUICE_E_ARG;
}
}  // namespace

sluice_status sluice_score(sluice_ctx *ctx, const int32_t *tokens, size_t n, size_t first, double *nll_out) {
    if (!ctx) return SLUICE_E_ARG;
    if (n < 2 || first + 1 >= n) return arg_error(ctx, "sluice_score: need n >= 2 and first < n - 1");
    if (!tokens || !nll_out) return arg_error(ctx, "sluice_score: tokens and nll_out must not be NULL");
    const int32_t V = sluice_n_vocab(ctx);
    if (V <= 0) return arg_error(ctx, "sluice_score: the context is not open");
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V) return arg_error(ctx, "sluice_score: a token id is outside the vocabulary");
    std::vector<float> logits(kChunk * (size_t)V);
    // The last token is only a target: positions 0 .. n-2 are evaluated.
    for (size_t off = 0; off + 1 < n; off += kChunk) {
        const size_t m = std::min(kChunk, n - 1 - off);
        if (sluice_status st = sluice_eval_all(ctx, tokens + off, m, logits.data())) return st;
        for (size_t r = 0; r < m; r++) {
            const size_t i = off + r;
            if (i < first) continue;
            const float *row = logits.data() + r * (size_t)V;
            // log-softmax in double: max-shifted log-sum-exp.
            double mx = -std::numeric_limits<double>::infinity();
            for (int32_t v = 0; v < V; v++) mx = std::max(mx, (double)row[v]);
            double sum = 0.0;
            for (int32_t v = 0; v < V; v++) sum += std::exp((double)row[v] - mx);
            nll_out[i - first] = mx + std::log(sum) - (double)row[tokens[i + 1]];
        }
    }
    return SLUICE_OK;
}

sluice_status sluice_ppl_summary(const double *window_nll, const uint64_t *window_count, size_t n_windows,
                                 sluice_ppl_stats *out) {
    if (!out || (n_windows && (!window_nll || !window_count))) return SLUICE_E_ARG;
    *out = sluice_ppl_stats{};
    double S = 0.0, N = 0.0;
    for (size_t w = 0; w < n_windows; w++) S += window_nll[w], N += (double)window_count[w];
    if (N <= 0) return SLUICE_E_ARG;
    const double mean = S / N;
    double se = std::numeric_limits<double>::quiet_NaN();
    if (n_windows >= 2) {
        double ss = 0.0;
        for (size_t w = 0; w < n_windows; w++) {
            const double r = window_nll[w] - mean * (double)window_count[w];
            ss += r * r;
        }
        se = std::sqrt((double)n_windows / (double)(n_windows - 1) * ss) / N;
    }
    out->nll_mean = mean;
    out->nll_se = se;
    out->ppl = std::exp(mean);
    out->ppl_lo = std::exp(mean - 1.96 * se);
    out->ppl_hi = std::exp(mean + 1.96 * se);
    out->n_tokens = (uint64_t)N;
    out->n_windows = n_windows;
    return SLUICE_OK;
}
