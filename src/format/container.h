// An opened WASTE v0 container directory (FORMAT.md §1): the parsed
// manifest, open handles on trunk.bin and the expert banks, and the decoded
// codebooks. Trunk tensors are loaded by name on request; expert records are
// read through runtime/expert_source.
#pragma once
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "format/file.h"
#include "format/manifest.h"
#include "quant/qtensor.h"

namespace sluice {

// One stored row of a trunk tensor (fmt, cols and group from desc) to f32:
// q times its group's f16 scale (sraw: ng little-endian f16, unused for
// F32), the values the engine's kernels multiply with.
void dequant_row_f32(const QTensor &desc, const uint8_t *row, const uint8_t *sraw, float *out);

class Container {
public:
    Status open(const std::string &dir);

    const Manifest &manifest() const { return man_; }
    const ModelConfig &config() const { return man_.cfg; }
    const std::string &dir() const { return dir_; }
    // Hashes trunk.bin and codebooks.bin against the manifest's integrity
    // checksums, when it carries them (--verify); a no-op otherwise. The
    // checked bytes are the loaded bytes: codebooks.bin is hashed from the
    // buffer decoded at open; in the trunk pass each tensor's payload and
    // scales get a digest of their own, which load_entry then compares with
    // what it reads, so a trunk.bin changed between the check and the load
    // is refused, not loaded.
    Status check_integrity() const;

    // Looks a tensor up by its name without the prefix. nullptr if absent.
    const TrunkEntry *find(const std::string &name) const;
    // Loads a trunk tensor, checking its shape (each dim; -1 = any) and,
    // if need_f32, that it is stored as F32.
    Status load(const std::string &name, const std::vector<int64_t> &shape, bool need_f32, QTensor *out) const;
    // The same for an entry found by its full name (no prefix is applied):
    // the vision tower's tensors live outside tensor_prefix (VISION.md §1.1).
    const TrunkEntry *find_full(const std::string &full_name) const;
    Status load_entry(const TrunkEntry &e, const std::vector<int64_t> *shape, bool need_f32, QTensor *out) const;
    // Loads an F32 tensor of at least min_elems elements (conv kernels, A_log).
    Status load_f32_min(const std::string &name, int64_t min_elems, std::vector<float> *out) const;
    // Validates a matrix entry without loading its payload (the embedding).
    Status describe(const std::string &name, const std::vector<int64_t> &shape, QTensor *out) const;
    // The same checks for any entry of manifest().trunk, including those
    // outside tensor_prefix that find() skips (`sluice verify` checks them
    // all); shape == nullptr accepts any shape.
    Status describe_entry(const TrunkEntry &e, const std::vector<int64_t> *shape, QTensor *out) const;
    // Reads row r of a described matrix from disk, dequantized to f32.
    Status read_row_f32(const QTensor &desc, int64_t r, float *out) const;
    // Rows [r0, r1) of entry e (described by desc) in one read, dequantized
    // to f32 the way read_row_f32 does it: (r1 - r0) * desc.cols floats.
    Status read_rows_f32(const TrunkEntry &e, const QTensor &desc, int64_t r0, int64_t r1, float *out) const;

    // Codebooks: n_books records of 8 x book_entries() floats, component-
    // major (value j of entry c at [j * book_entries() + c]; subnormals
    // flushed). With 8-bit codes every book is zero-padded to 256 entries, so
    // a corrupt code >= entries reads a zero, never past the table.
    int64_t n_books() const { return n_books_; }
    int book_entries() const { return book_entries_; }
    const float *book(int64_t id) const { return books_.data() + id * (int64_t)book_entries_ * 8; }

    const File &bank_file(int layer) const { return banks_.at(layer); }
    const std::string &trunk_path() const { return trunk_.path(); }

private:
    Status check_entry(const TrunkEntry &e, const std::string &name) const;
    Status hash_trunk(std::string *hex) const;

    std::string dir_;
    Manifest man_;
    File trunk_;
    std::unordered_map<std::string, size_t> by_name_;
    std::vector<float> books_;
    int64_t n_books_ = 0;
    std::string codebooks_sha256_;  // of the bytes decoded at open (when the manifest records one)
    // (offset, length) -> SHA-256 of that trunk.bin range as hashed by
    // check_integrity; empty until it ran.
    mutable std::map<std::pair<uint64_t, uint64_t>, std::string> trunk_ranges_;
    Status check_loaded(const std::string &what, uint64_t off, const void *p, uint64_t n) const;
    int book_entries_ = 256;
    std::map<int, File> banks_;
};

}  // namespace sluice
