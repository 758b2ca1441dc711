// The converter's source: a Hugging Face checkpoint read through the one
// safetensors reader (format/safetensors.h: single file or sharded, every
// header bound checked, data fetched by pread on demand), seen as *logical*
// float tensors: the decoding of fp8 block-scaled and MXFP4 pairs lives
// here because only the converter needs it.
//
// A GGUF file (a regular file starting with "GGUF") is a source too: its
// tensors are presented under the Hugging Face names, rebuilt by
// convert/gguf_source.h, so everything downstream reads it as it reads a
// release.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "convert/gguf_source.h"
#include "format/safetensors.h"

namespace sluice::convert {

using TensorInfo = st::TensorInfo;
using ShardInfo = st::ShardInfo;

// Bytes per element for the dtypes the converter decodes; 0 if unknown.
int dtype_size(const std::string& dtype);

class Checkpoint {
public:
    // Opens `dir`: model.safetensors.index.json and its shards if present,
    // else model.safetensors, else the only *.safetensors file. When `dir`
    // is a GGUF file (is_gguf_file), opens that instead.
    bool open(const std::string& dir, std::string* err);
    // The GGUF source, or null for a safetensors checkpoint.
    const GgufSource* gguf() const { return gguf_.get(); }

    // fp8 tile size from quantization_config.weight_block_size.
    void set_fp8_block(int64_t bm, int64_t bn) { fp8_bm_ = bm; fp8_bn_ = bn; }

    const std::string& dir() const { return gguf_ ? gguf_->path() : st_.dir(); }
    const std::string& index_file() const { return st_.index_file(); }  // "" if single file
    const std::vector<ShardInfo>& shards() const { return st_.shards(); }
    // Every stored tensor name, ascending byte order.
    std::vector<std::string> names() const { return gguf_ ? gguf_->names() : st_.names(); }
    // A stored safetensors tensor (always null for a GGUF source).
    const TensorInfo* find(const std::string& name) const { return gguf_ ? nullptr : st_.find(name); }
    bool has(const std::string& name) const { return gguf_ ? gguf_->has(name) : find(name) != nullptr; }

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
    std::string where(const TensorInfo& t) const { return st_.where(t); }

    st::Checkpoint st_;
    std::shared_ptr<GgufSource> gguf_;
    int64_t fp8_bm_ = 128, fp8_bn_ = 128;
};

}  // namespace sluice::convert
