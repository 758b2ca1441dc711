// sluice kld compare / paired / noise (KLD.md §4, §7.4-§7.7).
#pragma once

#include <string>
#include <vector>

#include "kld/kernels/kernel.h"
#include "kld/kld_common.h"
#include "kld/stats/npstats.h"
#include "kld/io/operand.h"
#include "kld/progress.h"
#include "kld/io/suite.h"

namespace sluice::kld {

enum class Compat { none, festr2_v0 };
// §7.4: fast (fp32 SIMD exp/log1p, fp64 sums; the default) or the scalar
// fp64 reference for arbitration. Ignored in festr2-v0 compat mode.
enum class Precision { fast, fp64 };

struct CompareOptions {
    WindowSel sel;
    int bootstrap_samples = 10000;
    uint64_t seed = 1;
    Compat compat = Compat::none;
    Precision precision = Precision::fast;
    // festr2-v0 only: the Vectorized<float> width of the torch whose float32
    // arithmetic is reproduced (8: AVX2, torch's x86-64 default; 16: AVX-512,
    // e.g. ATEN_CPU_CAPABILITY=avx512). `--torch-lanes`.
    int torch_lanes = 8;
    int threads = 1;
    bool want_js = true;
    bool finite_only = false;      // drop +inf KL tokens from the statistics
    int rows_per_block = 8;
    bool llamacpp_block = false;
    bool llamacpp_second_half = false;  // llama.cpp's rows only (j >= T/2)
    std::string noise_receipt;     // path of a `kld noise` receipt, optional
    int64_t max_ram = int64_t(1) << 30;
    bool keep_tokens = true;       // keep per-token vectors in the result
    // Called from a ticker thread every progress_interval_s while the pass
    // runs, and once at the end; never changes a result (KLD.md §7 Scale).
    ProgressFn progress;
    double progress_interval_s = 0.25;
    // A ticker owned by the caller that spans several passes (paired, noise):
    // run_compare counts into it instead of starting its own, and leaves it
    // running; `progress` is then not called from here.
    ProgressTicker* shared_progress = nullptr;
};

// Per-token vectors of one window, in row order.
struct WindowResult {
    int window_index = 0, position = 0;
    std::string domain;
    std::vector<double> kl, js, nll_ref, nll_cand, dp, ae_mean;
    std::vector<uint8_t> top1, top1_tie, ref_tied;
    double ae_max = 0;
    int64_t clamped = 0;
    std::vector<std::string> warnings;  // negative KL beyond tolerance, named by row
};

struct CompareResult {
    std::vector<WindowResult> windows;  // selection order
    json receipt;
    std::string text;                   // human summary (and the llama.cpp block)
    std::vector<std::string> warnings;
    bool integrity_failed = false;
};

// Runs the full comparison. Results are bit-identical for any thread count:
// every window is reduced by one worker into its own slot, and every global
// statistic is then reduced sequentially in window order.
Status run_compare(const Suite& s, Operand& ref, Operand& cand, const CompareOptions& opt, CompareResult* out);

// Writes the §7.5 per-token sidecar safetensors.
Status write_token_sidecar(const CompareResult& r, const std::string& path);

// Receipt JSON without timing fields (for determinism checks).
json strip_timing(json receipt);

// ---- paired (§7.6) -----------------------------------------------------
struct PairedOptions {
    CompareOptions cmp;
    double noise_diff = -1;  // < 0: from the noise receipt, else the default below
    double tie_tolerance = 0;
};
// Default noise floor for a vLLM-captured reference (the publisher's rule).
constexpr double kVllmNoiseDiff = 0.004;

Status run_paired(const Suite& s, Operand& ref, Operand& a, Operand& b, const PairedOptions& opt, json* receipt,
                  std::string* text);
// §5.6-style paired comparison from two compare receipts, with the reference
// identity check festr2 lacks.
Status run_paired_receipts(const json& ra, const json& rb, const PairedOptions& opt, json* receipt, std::string* text);

// ---- repeat noise (§7.7) -------------------------------------------------
Status run_noise(const Suite& s, const std::vector<Operand*>& runs, Operand* reference, const CompareOptions& opt,
                 json* receipt, std::string* text);

// ---- the llama.cpp statistics block (§6.5) -------------------------------
struct LlamaToken {
    double nll, nll_base, kld, dp;
    bool same_top;
};
std::string llamacpp_block(const std::vector<LlamaToken>& toks);

}  // namespace sluice::kld
