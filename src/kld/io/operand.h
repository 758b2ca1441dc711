// Operands of a comparison (KLD.md §7.2): a v0 ref/ directory (festr2 or a
// sluice capture) or a live engine, behind one interface that yields a
// window's logits rows in order. Also the engine callback interface and the
// capture writer (§7.3).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kld/kld_common.h"
#include "kld/progress.h"
#include "kld/io/readahead.h"
#include "common/sha256.h"
#include "kld/io/suite.h"

namespace sluice::kld {

// "Give me logits for these tokens." The lead wires sluice_reset /
// sluice_eval_all / sluice_n_vocab into this. One window is fed as
// reset() then eval() calls over consecutive token chunks; each eval
// continues the session and writes n x n_vocab() logits, row i being the
// logits after token i of the chunk.
class LogitsEngine {
public:
    virtual ~LogitsEngine() = default;
    virtual int64_t n_vocab() = 0;
    virtual Status reset() = 0;
    virtual Status eval(const int32_t* tokens, size_t n, float* logits_out) = 0;
    // Opaque JSON for manifests/receipts (container identity, threads, ...).
    virtual json identity() { return json::object(); }
    // Extra safetensors metadata (sluice_version, model_container_sha256, ...).
    virtual std::map<std::string, std::string> extra_metadata() { return {}; }
};

// Sequential rows of one window.
class RowStream {
public:
    virtual ~RowStream() = default;
    virtual Status read(int64_t n, float* out) = 0;  // the next n rows
    virtual Status finish() { return {}; }           // after the last row (hash checks)
    // Zero-copy alternative to read(): 1..max next rows of width V,
    // contiguous, valid until consume(); consume(k <= *n) moves past k of
    // them. The default copies through read() into a stream-owned buffer;
    // F32 files hand out rows straight from the read-ahead buffers. A
    // caller uses either read() or peek()/consume() on one stream.
    virtual Status peek(int64_t max, int64_t V, const float** rows, int64_t* n);
    virtual void consume(int64_t k) { prow_ += k; }
    // Streams that hash what they deliver (§7.8) and let the caller hash
    // peeked rows itself (hash_row_pair) return their hasher here; after
    // hashing the first k rows of the current peek the caller reports
    // rows_hashed(k), and consume() hashes only the rest.
    virtual Sha256* row_hasher() { return nullptr; }
    virtual void rows_hashed(int64_t k) { (void)k; }
    // Bytes one row occupies in the file it is read from (progress); 0 for
    // rows that are computed, not read (an engine).
    virtual uint64_t bytes_per_row() const { return 0; }

private:
    std::vector<float> pbuf_;
    int64_t prow_ = 0, pn_ = 0;
};

class Operand {
public:
    virtual ~Operand() = default;
    virtual std::string kind() const = 0;   // "v0-dir" or "engine"
    virtual std::string label() const = 0;  // path or model name
    virtual int64_t vocab() const = 0;
    virtual bool concurrent() const = 0;    // several windows may be open at once
    // Read-ahead memory one open window holds (for the RAM plan, §7.8).
    virtual uint64_t stream_buffer_bytes() const { return 0; }
    // True for files read with --verify-hashes off (the receipt must not
    // claim integrity it did not check).
    virtual bool hashes_unchecked() const { return false; }
    // Identity checks against the suite and the selected windows (§7.9).
    virtual Status check_suite(const Suite& s, const std::vector<int>& positions) = 0;
    virtual Status open_window(const Suite& s, int pos, std::unique_ptr<RowStream>* out) = 0;
    virtual json identity() const = 0;
    virtual std::vector<std::string> warnings() const { return {}; }
    // Per-window raw tensor SHA-256 (data bytes only), empty if unknown;
    // *bytes_read (if given): the bytes read for it (progress).
    virtual Status raw_tensor_sha256(const Suite& s, int pos, std::string* hex, uint64_t* bytes_read = nullptr) {
        (void)s; (void)pos; hex->clear();
        if (bytes_read) *bytes_read = 0;
        return {};
    }
};

// Hashes the next peeked row of both streams (bytes each, in row order),
// interleaved: two SHA-256 streams at once run ~1.46x one on SHA-NI, and
// the rows are still in cache from scoring. A no-op unless both hash.
void hash_row_pair(RowStream& a, const float* pa, RowStream& b, const float* pb, int64_t bytes);

// Window idx's logits file in a v0 capture directory (KLD.md §7.9): the
// capture writes this name and the reader insists on it.
std::string logits_name(int idx);

Status open_v0_dir(const std::string& dir, bool verify_hashes, std::unique_ptr<Operand>* out);
// With explicit streaming options (chunk size, ring depth, O_DIRECT).
Status open_v0_dir(const std::string& dir, bool verify_hashes, const ReadAheadOptions& io, std::unique_ptr<Operand>* out);
std::unique_ptr<Operand> engine_operand(LogitsEngine* e, const std::string& label);

struct CaptureOptions {
    size_t align = 8;       // 8 or 4096 (§2.5)
    int chunk_rows = 256;   // tokens per eval call
    std::string run_name;   // recorded in the manifest runtime block
    ProgressFn progress;    // see CompareOptions::progress
    double progress_interval_s = 0.25;
};

struct CaptureReport {
    std::vector<int> captured, skipped;  // window indices
    uint64_t bytes_written = 0;
};

// Runs every selected window through the engine and writes the v0 ref/
// layout (§1.8, §1.9) to out_dir. Resumable: a window whose file re-validates
// and hashes to its manifest record is skipped. Every file is re-opened and
// re-hashed after it is written.
Status capture(LogitsEngine* e, const Suite& s, const std::vector<int>& positions, const std::string& out_dir,
               const CaptureOptions& opt, CaptureReport* rep);

// The festr2 v0 suite hash: windows captured for it keep festr2's format tag.
extern const char* const kFestr2SuiteHash;

}  // namespace sluice::kld
