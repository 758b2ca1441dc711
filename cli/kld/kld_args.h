// What `sluice kld`'s options parse into (cli/kld/kld_main.cpp declares them
// with CLI11) and the subcommands that run on them (cli/kld/kld_commands.cpp).
// Plain values with their defaults here, so `--help` shows the same numbers
// the commands use.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "cli/kld/kld_main.h"

namespace sluice::kld {

// SEL: --windows LIST | --start-window A --stop-window B | --quick.
struct SelArgs {
    std::string windows;
    bool quick = false;
    int start = 0;
    int stop = -1;  // -1: to the end
};

// Streaming reads (KLD.md §7.8).
struct IoArgs {
    std::string mode = "direct";
    int64_t read_chunk = int64_t(16) << 20;
};

// --progress / --no-progress; neither: a bar when stderr is a terminal.
struct ProgressArgs {
    bool on = false, off = false;
};

// The comparison options compare, paired and noise share.
struct CompareArgs {
    SelArgs sel;
    IoArgs io;
    ProgressArgs progress;
    int64_t bootstrap_samples = 10000;
    int64_t seed = 1;
    int threads = 1;
    int64_t max_ram = int64_t(1) << 30;
    int row_block = 8;
    std::string precision = "fast";
    std::string compat = "none";
    int torch_lanes = 8;
    bool torch_lanes_given = false;
    bool llamacpp_block = false;
    std::string llamacpp_positions = "all";
    std::string noise;
    bool finite_only = false, no_js = false;
    std::string verify_hashes = "on";
    std::string json_out, output_out;  // --json, --output: the receipt
    std::string suite, reference;
};

struct SuiteMakeArgs {
    std::string out;
    int context = 2048;
    // --source / --tokens-source in command-line order (it fixes the window
    // numbering): (spec, is_tokens).
    std::vector<std::pair<std::string, bool>> sources;
    std::vector<std::string> text_specs, token_specs;  // the same, per option
    std::string tokenizer;
    bool force = false;
};

struct SuiteVerifyArgs {
    std::string suite, expect_suite_hash;
    int64_t vocab = 0;
};

struct CaptureArgs {
    std::string model, suite, out, run_name;
    SelArgs sel;
    ProgressArgs progress;
    int align = 8;
    int chunk = 256;
    int threads = 0;
};

struct CompareOnlyArgs {
    std::string candidate, model, expect_suite_hash, tokens;
    int bos = -1;  // .kld reference: BOS substituted for each chunk's token 0
};

struct PairedArgs {
    std::string a, b;
    std::vector<std::string> receipts;
    double noise_diff = -1, tie_tolerance = 0;
    bool noise_diff_given = false, tie_tolerance_given = false;
};

struct NoiseArgs {
    std::vector<std::string> runs;
};

struct ExportArgs {
    std::string suite, reference, out, verify_hashes = "on";
    SelArgs sel;
    IoArgs io;
};

struct ReportArgs {
    std::vector<std::string> receipts, tokens, labels;
    std::string out, json_out, title;
    double hist_min = 1e-8, hist_max = 10;
    bool hist_given = false;
    int bins_per_decade = 4;
};

struct Io {
    std::ostream& out;
    std::ostream& err;
    const KldHooks& hooks;
};

Status cmd_suite_make(const SuiteMakeArgs& a, const Io& io);
Status cmd_suite_verify(const SuiteVerifyArgs& a, const Io& io);
Status cmd_inspect(const std::vector<std::string>& files, const Io& io);
Status cmd_capture(const CaptureArgs& a, const Io& io);
Status cmd_compare(const CompareArgs& c, const CompareOnlyArgs& a, const Io& io);
Status cmd_paired(const CompareArgs& c, const PairedArgs& a, const Io& io);
Status cmd_noise(const CompareArgs& c, const NoiseArgs& a, const Io& io);
Status cmd_export(const ExportArgs& a, const Io& io);
Status cmd_report(const ReportArgs& a, const Io& io);

}  // namespace sluice::kld
