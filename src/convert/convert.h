// sluice convert / verify: the C++ entry points the CLI wires up.
//
//   ConvertOptions o; o.source_dir = "..."; o.output_dir = "....waste";
//   std::string err;
//   int rc = sluice::convert::run_convert(o, &err, nullptr);  // 0 = ok
//
// Output is a WASTE v0 container (FORMAT.md). Trunk bytes equal warp's
// converter for the same settings; expert codebooks come from our own
// seeded k-means, so expert bytes differ from warp's but every byte is a
// function of (source, settings) alone: --jobs never changes the output and
// an interrupted run, rerun, gives the bytes of an uninterrupted one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::convert {

// Receives progress; the default (nullptr) prints plain lines to stderr,
// rewriting one line in place when stderr is a terminal.
class ProgressSink {
public:
    virtual ~ProgressSink() = default;
    // phase: "plan", "layer", "trunk", "side", "manifest", "done", "verify".
    // done/total count units of the phase (experts of a layer, trunk bytes...).
    virtual void progress(const std::string& phase, int64_t done, int64_t total, const std::string& detail) = 0;
    virtual void message(const std::string& line) = 0;
};

struct ConvertOptions {
    std::string source_dir;  // HF checkpoint directory
    std::string output_dir;  // container directory (created if missing)
    int trunk_bits = 4;      // 8, 4 or 3 (rule 3 of FORMAT.md 4.9)
    bool trunk8 = false;     // every quantized trunk tensor Q8G
    int stages = 3;          // 2, 3, 4 or 6
    int entries = 256;       // 16, 32, 64, 128 or 256
    int index_bits = 8;      // 8, or 6 (VQ4P: stages 4, entries 64)
    int cb_sample = 12;      // experts sampled per (layer, kind) for k-means
    int kmeans_iters = 25;   // Lloyd iterations per stage (warp: 10; 25 beats its error)
    int64_t train_vectors = 300000;  // k-means training set size (warp: 300 000)
    uint64_t seed = 0;       // k-means / sampling seed
    int jobs = 0;            // worker threads; 0 = hardware concurrency. Never changes bytes.
    bool force = false;      // start over: remove this converter's files from the output first
    bool quiet = false;      // default sink prints only warnings and the summary
};

// Returns 0 on success; otherwise 1 (bad arguments), 2 (I/O / bad source),
// 3 (interrupted by the sink) with *err set. Never writes manifest.json
// unless every other file of the container is complete.
int run_convert(const ConvertOptions& opt, std::string* err, ProgressSink* sink = nullptr);

struct VerifyOptions {
    std::string container_dir;
    std::string source_dir;  // optional: compare dequantized weights to the source
    bool per_expert = false; // with source: one line per expert matrix
    int jobs = 0;
};

struct TensorError {
    std::string name;     // trunk tensor name, or "L{n}.{gate|up|down}" summary over experts
    double rel_frob = 0;  // ||W - W_src||_F / ||W_src||_F (mean over experts for summaries)
    double rel_frob_max = 0;  // max over experts (== rel_frob for a single tensor)
    double max_abs = 0;
};

struct VerifyReport {
    int64_t records_checked = 0;
    int64_t crc_failures = 0;
    int64_t header_failures = 0;
    std::vector<std::string> problems;  // one line each, names the file/record
    std::vector<TensorError> trunk;     // with source only
    std::vector<TensorError> experts;   // with source only, per layer and kind
};

// 0 when every check passed, 1 on bad arguments, 2 when a check failed or
// a file could not be read. The report is filled either way.
int run_verify(const VerifyOptions& opt, VerifyReport* report, std::string* err, ProgressSink* sink = nullptr);

// Converter identity written to provenance.
const char* converter_version();

// Command-line front ends, so the CLI only dispatches. `args` excludes the
// subcommand name: {"SRC", "DST", "--trunk-bits", "3", ...}.
bool parse_convert_args(const std::vector<std::string>& args, ConvertOptions* o, std::string* err);
bool parse_verify_args(const std::vector<std::string>& args, VerifyOptions* o, std::string* err);
const char* convert_usage();
const char* verify_usage();
std::string format_verify_report(const VerifyReport& r);
// Whole subcommands: parse, run, print (report to stdout, errors to stderr).
// Exit codes as run_convert / run_verify; 1 with usage on bad arguments.
int convert_main(const std::vector<std::string>& args);
int verify_main(const std::vector<std::string>& args);

}  // namespace sluice::convert
