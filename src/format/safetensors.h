// safetensors (../shared/spec/KLD.md §2): the one reader and writer, used by
// the converter (Hugging Face checkpoints, single file or sharded) and the
// KLD suite (reference logits, per-token sidecars).
//
// The reader refuses a file unless every §2.4 rule holds (header length
// bound, JSON validity, known dtype, shape x dtype == span, tiling without
// gaps or overlaps, file size, string metadata), with the file and tensor
// named. It then reads by pread on demand: a 1.3 GB logits window or a
// 600 GB checkpoint is never mapped or loaded whole.
//
// The writer is deterministic (§2.5: tensor order, compact header, sorted
// metadata, space padding) and atomic (name.tmp, fsync, rename), so equal
// input gives equal bytes and an interrupted write never leaves a file that
// looks complete.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "format/file.h"

namespace sluice::st {

// §2.4 rule 2: a header above this is refused before anything is allocated.
constexpr uint64_t kMaxHeaderBytes = 100000000;
// Each shape dimension is bounded too (a zero-sized tensor satisfies the
// span rule with any other dimension), so products of two dims cannot
// overflow int64 downstream.
constexpr uint64_t kMaxDim = uint64_t(1) << 40;

// The dtypes the readers decode; every other §2.3 name is OTHER (a valid
// file, refused by whoever needs the values).
enum class DType { F32, BF16, F16, U8, I32, OTHER };

// Bits per element of a §2.3 dtype name; 0 if unknown.
size_t dtype_bits(const std::string& dtype);
// Bytes per element of a decoded dtype; 0 for OTHER.
size_t dtype_size(DType d);

// IEEE binary16 / bfloat16 <-> f32 (F16 exponent 31 is Inf/NaN here,
// unlike the container's scales in format/f16.h).
float bf16_to_f32(uint16_t v);
float f16_to_f32(uint16_t v);
uint16_t f32_to_bf16_rne(float f);

struct TensorInfo {
    std::string name;
    std::string dtype;  // as written: "F32", "BF16", "F8_E4M3", ...
    DType dt = DType::OTHER;
    std::vector<uint64_t> shape;  // outermost first; empty for a scalar
    uint64_t begin = 0, end = 0;  // data_offsets, relative to the data buffer
    uint64_t offset = 0;          // absolute file offset of the first byte
    uint64_t nbytes = 0;          // end - begin
    int shard = 0;                // index into Checkpoint::shards(); 0 for a lone file
    uint64_t numel() const;
};

// One safetensors file with a validated header.
class StFile {
public:
    // `label` names the file in errors (default: the path).
    Status open(const std::string& path, const std::string& label = "");
    const std::string& path() const { return f_.path(); }
    const std::string& label() const { return label_; }
    uint64_t file_size() const { return f_.size(); }
    uint64_t data_start() const { return 8 + header_len_; }
    const std::string& header_sha256() const { return header_sha256_; }  // of the JSON text
    const std::map<std::string, std::string>& metadata() const { return meta_; }
    // In file order (ascending begin).
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find(const std::string& name) const;

    // Raw bytes [off, off+n) of the data buffer / of the whole file.
    Status pread_data(uint64_t off, void* dst, uint64_t n) const;
    Status pread_file(uint64_t off, void* dst, uint64_t n) const;
    // Rows [row0, row0+n) of a rank-2 F32, BF16 or F16 tensor, widened to f32.
    Status read_rows_f32(const TensorInfo& t, uint64_t row0, uint64_t n, float* out) const;

private:
    File f_;
    std::string label_, header_sha256_;
    uint64_t header_len_ = 0;
    std::map<std::string, std::string> meta_;
    std::vector<TensorInfo> tensors_;
};

struct ShardInfo {
    std::string file;  // name relative to the checkpoint directory
    std::string path;  // full path
    uint64_t size = 0;
    std::map<std::string, uint64_t> dtype_tensors;  // dtype -> tensor count
    std::map<std::string, uint64_t> dtype_bytes;    // dtype -> data bytes
    std::string header_sha256;  // of the JSON header: identifies the layout cheaply
};

// A checkpoint directory: model.safetensors.index.json and its shards if
// present, else model.safetensors, else the only *.safetensors file.
class Checkpoint {
public:
    Status open(const std::string& dir);
    const std::string& dir() const { return dir_; }
    const std::string& index_file() const { return index_file_; }  // "" if single file
    const std::vector<ShardInfo>& shards() const { return shards_; }
    // Every tensor name (those the index lists, when there is one), ascending byte order.
    std::vector<std::string> names() const;
    const TensorInfo* find(const std::string& name) const;
    // "<shard file>: tensor '<name>'", the prefix of every error about t.
    std::string where(const TensorInfo& t) const;
    // Raw bytes [off, off+n) of a tensor's data. Thread-safe.
    Status read_raw(const TensorInfo& t, uint64_t off, uint64_t n, void* dst) const;

private:
    Status open_shard(const std::string& file);

    std::string dir_, index_file_;
    std::vector<ShardInfo> shards_;
    std::deque<StFile> files_;  // one per shard; deque: never relocated
    std::map<std::string, TensorInfo> tensors_;
};

// ---- writer ------------------------------------------------------------

struct TensorOut {
    std::string name;
    std::string dtype;  // "F32", "U8", "I32", ...
    std::vector<uint64_t> shape;
    const void* data;  // product(shape) * size(dtype) bytes, little-endian
};

// The padded header text (without the 8-byte length) the writer emits;
// order/sizes receive the tensors in data order and their byte sizes.
std::string safetensors_header(const std::map<std::string, std::string>& meta,
                               const std::vector<TensorOut>& tensors, size_t align = 8,
                               std::vector<const TensorOut*>* order = nullptr,
                               std::vector<uint64_t>* sizes = nullptr);

// Writes a safetensors file atomically (path.tmp, fsync, rename); align is
// 8 or 4096 (O_DIRECT readers). If sha256_hex is not null it receives the
// hash of the whole file as written, and size its length.
Status write_safetensors(const std::string& path, const std::map<std::string, std::string>& meta,
                         const std::vector<TensorOut>& tensors, size_t align = 8,
                         std::string* sha256_hex = nullptr, uint64_t* size = nullptr);

}  // namespace sluice::st
