// festr2 v0 KLD suites (KLD.md §1.3-§1.7): load and verify a suite, and make
// a new one from local text (through a tokenizer callback) or token files.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kld/kld_common.h"

namespace sluice::kld {

struct SuiteWindow {
    int index = 0;
    std::string domain;
    int domain_index = 0;
    std::string dataset, dataset_revision;
    int64_t source_token_start = 0, source_token_end = 0;
    int num_tokens = 0;
    std::string token_file;  // relative to the suite directory
    std::string token_hash;  // token_ids_json_sha256
    std::vector<int32_t> tokens;
};

struct Suite {
    std::string dir;            // directory holding suite-manifest.json
    std::string manifest_path;
    std::string manifest_sha256;  // of the manifest file bytes
    json manifest;
    int context_length = 0;
    std::string suite_hash;     // suite_token_hash_sha256, recomputed and checked
    std::vector<SuiteWindow> windows;
    int position_of(int window_index) const;  // list position, or -1
};

// §1.6 hashes.
std::string token_ids_hash(const std::vector<int32_t>& ids);
std::string suite_token_hash(const std::vector<std::string>& window_hashes);

struct SuiteCheck {
    std::string expect_suite_hash;  // empty: not checked
    int64_t vocab = 0;              // > 0: every id must be < vocab
};

// Loads SUITE (a directory or its suite-manifest.json) and checks every §7.9
// "Suite" rule: key set and types, token files (JSON int arrays of length T
// whose re-serialised hash matches), and the recomputed suite hash.
Status load_suite(const std::string& path, const SuiteCheck& chk, Suite* out);
// Token ids against a vocabulary width (the v0 suite records none).
Status check_suite_vocab(const Suite& s, int64_t vocab);

// Window selection (§4.6, §7.2): a Python slice [start, stop) over the list,
// or an explicit list "0-7,16" of window indices, or the stratified quick set.
struct WindowSel {
    std::string list;
    int start = 0;
    int stop = -1;  // -1: to the end
    bool quick = false;
};
Status select_windows(const Suite& s, const WindowSel& sel, std::vector<int>* positions);

// ---- suite make ----------------------------------------------------------
// Tokenizes a whole text with special tokens off and no BOS (§1.4 step 2).
using TokenizeFn = std::function<Status(const std::string& text, std::vector<int32_t>* ids)>;

struct SourceSpec {
    std::string domain;
    std::string path;   // UTF-8 text file, or a token file when is_tokens
    int windows = 1;
    bool is_tokens = false;  // token file: JSON int array or whitespace/comma separated ids
};

struct MakeOptions {
    std::string out_dir;
    int context_length = 2048;
    std::vector<SourceSpec> sources;  // domains in window order
    TokenizeFn tokenize;              // needed for text sources
    std::string model_tokenizer;      // recorded verbatim (opaque)
    std::string tokenizer_class;      // recorded verbatim (opaque)
    // A non-empty out_dir is refused unless force; with force the finished
    // suite replaces it in one atomic exchange (no stale window files left).
    bool force = false;
};

// §1.4 step 3: evenly spaced, non-overlapping window starts.
Status window_starts(int64_t n_tokens, int64_t len, int count, std::vector<int64_t>* out);
// Parses "NAME=FILE:WINDOWS" (text) as used by --source / --tokens-source.
Status parse_source_spec(const std::string& arg, bool is_tokens, SourceSpec* out);
Status make_suite(const MakeOptions& opt, Suite* out);

}  // namespace sluice::kld
