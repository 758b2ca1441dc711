// Reader for Hugging Face safetensors checkpoints (single file or sharded
// with model.safetensors.index.json). Every header offset and size is checked
// against the file before anything is read; tensor data is fetched with
// pread on demand, so memory stays bounded by what the caller asks for.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "format/file.h"

namespace sluice::convert {

struct TensorInfo {
    std::string name;
    std::string dtype;           // as written in the header: "BF16", "F8_E4M3", ...
    std::vector<int64_t> shape;  // outermost first; empty for a scalar
    uint64_t offset = 0;         // absolute file offset of the first byte
    uint64_t nbytes = 0;
    int shard = 0;               // index into Checkpoint::shards()
    int64_t numel() const;
};

struct ShardInfo {
    std::string file;  // name relative to the checkpoint directory
    std::string path;  // full path
    uint64_t size = 0;
    std::map<std::string, uint64_t> dtype_tensors;  // dtype -> tensor count
    std::map<std::string, uint64_t> dtype_bytes;    // dtype -> data bytes
    std::string header_sha256;  // of the JSON header: identifies the layout cheaply
};

// Bytes per element for the dtypes the converter decodes; 0 if unknown.
int dtype_size(const std::string& dtype);

class Checkpoint {
public:
    Checkpoint();
    ~Checkpoint();
    Checkpoint(const Checkpoint&) = delete;
    Checkpoint& operator=(const Checkpoint&) = delete;

    // Opens `dir`: model.safetensors.index.json and its shards if present,
    // else model.safetensors, else the only *.safetensors file.
    bool open(const std::string& dir, std::string* err);

    // fp8 tile size from quantization_config.weight_block_size.
    void set_fp8_block(int64_t bm, int64_t bn) { fp8_bm_ = bm; fp8_bn_ = bn; }

    const std::string& dir() const { return dir_; }
    const std::string& index_file() const { return index_file_; }  // "" if single file
    const std::vector<ShardInfo>& shards() const { return shards_; }
    // Every stored tensor name, ascending byte order.
    std::vector<std::string> names() const;
    const TensorInfo* find(const std::string& name) const;
    bool has(const std::string& name) const { return find(name) != nullptr; }

    // A *logical* tensor is a stored float tensor (F32/F16/BF16), an fp8
    // tensor with its `<name>_scale_inv` companion, or an MXFP4 pair
    // `<name>_packed` + `<name>_scale`. Its shape is the decoded shape.
    bool logical_exists(const std::string& name) const;
    bool logical_shape(const std::string& name, std::vector<int64_t>* shape, std::string* err) const;
    // Decodes rows [r0, r1) of the logical tensor viewed as [R, N], N = the
    // last dimension (a 1-D tensor is one row, a scalar one element), into
    // dst (row-major, (r1-r0)*N floats). Thread-safe. A NaN or infinite
    // value is an error naming the tensor, row and column: it would turn
    // into garbage scales and codes without one.
    bool read_rows_f32(const std::string& name, int64_t r0, int64_t r1, float* dst, std::string* err) const;

    // Raw bytes [off, off+n) of a stored tensor's data.
    bool read_raw(const TensorInfo& t, uint64_t off, uint64_t n, void* dst, std::string* err) const;

private:
    bool decode_rows(const std::string& name, int64_t r0, int64_t r1, float* dst, std::vector<int64_t>* shape,
                     std::string* err) const;
    bool open_shard(const std::string& file, std::string* err);
    std::string where(const TensorInfo& t) const;

    std::string dir_;
    std::string index_file_;
    std::vector<ShardInfo> shards_;
    std::deque<File> files_;  // one per shard; deque: File is move-only and never relocated
    std::map<std::string, TensorInfo> tensors_;
    int64_t fp8_bm_ = 128, fp8_bn_ = 128;
};

}  // namespace sluice::convert
