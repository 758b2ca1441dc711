// Per-row divergence kernel (KLD.md §7.4). Two passes over a row pair that
// stays in cache, every sum in fp64 in a fixed blocked order, so a row's
// result never depends on threads or SIMD width. Three numerics:
//  - fast (the default): fp32 SIMD exp/log1p, fp64 sums in 16 fixed lanes;
//    AVX2, AVX-512, NEON and the scalar form give bit-identical rows (§7.4 limits
//    against fp64: per-token KL 2e-7 + 1e-5 relative, mean KL 1e-8);
//  - fp64: the scalar fp64 reference (`--precision fp64`, arbitration);
//  - festr2_v0: torch's float32 CPU arithmetic as the festr2 comparator runs
//    it (log_softmax, exp, logaddexp, sum(-1) in torch's own order, with
//    8-lane AVX2 or 16-lane AVX-512 vectors; kernels/torch_f32.h).
#pragma once

#include <cstdint>

#include "kld/kld_common.h"

namespace sluice::kld {

enum class Numerics { fast, fp64, festr2_v0 };

// The fast kernel's instruction set. `automatic` is the best the CPU has,
// narrowed by SLUICE_BACKEND=scalar|avx2|neon (the engine's variable).
enum class FastIsa { automatic, scalar, avx2, avx512, neon };
bool fast_isa_available(FastIsa isa);
const char* fast_isa_name(FastIsa isa);
FastIsa fast_isa();  // the ISA `automatic` resolves to now
// Process-wide choice for `automatic` (tests, benchmarks); not to be changed
// while a comparison runs. Refuses an ISA the CPU or build lacks.
Status set_fast_isa(FastIsa isa);

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
// *bad_col set and *bad_side 0 (reference) or 1 (candidate). A reference
// entry that is finite where the candidate's is -inf makes KL +inf (p > 0
// in exact arithmetic, whether or not exp underflows). `isa` applies to
// Numerics::fast only; `torch_lanes` (8 or 16: the Vectorized<float> width of
// the torch whose arithmetic is reproduced) to Numerics::festr2_v0 only.
Status score_row(const float* x, const float* y, int64_t V, int32_t tok, Numerics mode, bool want_js,
                 RowMetrics* out, int64_t* bad_col, int* bad_side, FastIsa isa = FastIsa::automatic,
                 int torch_lanes = 8);

}  // namespace sluice::kld
