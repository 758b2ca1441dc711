// Per-row divergence kernel (KLD.md §7.4). Two passes over a row pair that
// stays in cache. The sluice path accumulates in fp64 with a fixed 8-lane
// blocked order, so a row's result never depends on threads or SIMD width;
// the festr2-v0 compat path recomputes everything in fp32 as festr2 does.
#pragma once

#include <cstdint>

#include "eval/kld_common.h"

namespace sluice::kld {

enum class Numerics { fp64, festr2_v0 };

struct RowMetrics {
    double kl = 0, js = 0;
    double nll_ref = 0, nll_cand = 0;  // -log p(next token)
    double dp = 0;                     // p_cand(tok) - p_ref(tok)
    double abs_err_mean = 0, abs_err_max = 0;  // |x - y| over raw logits
    int32_t top1_ref = 0, top1_cand = 0;       // first index of the maximum
    uint8_t top1 = 0, top1_tie_aware = 0, ref_tied = 0;
};

// x: reference logits, y: candidate logits, both V floats; tok: the actual
// next token (or -1 when unknown). On NaN/+inf returns Code::nonfinite with
// *bad_col set and *bad_side 0 (reference) or 1 (candidate).
Status score_row(const float* x, const float* y, int64_t V, int32_t tok, Numerics mode, bool want_js,
                 RowMetrics* out, int64_t* bad_col, int* bad_side);

}  // namespace sluice::kld
