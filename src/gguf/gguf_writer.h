// Writes a GGUF v3 file: metadata in the order it was set, then the tensors
// in the order they were added, each produced row by row on demand so a
// model far bigger than RAM is exported with one slab of rows in memory.
// Deterministic (the same calls give the same bytes), published through
// PATH.tmp and a rename (a failed export leaves no file under PATH), and
// refusing what a GGUF reader would misread: duplicate keys or tensor names,
// names over 63 bytes, more than 4 dims, rows that do not fit the type.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "format/gguf.h"

namespace sluice::gguf {

// Fills rows [row0, row0 + n) of a tensor, ne0 floats each, into out.
using RowSource = std::function<Status(int64_t row0, int64_t n, float *out)>;

class Writer {
public:
    void set_u32(const std::string &key, uint32_t v);
    void set_i32(const std::string &key, int32_t v);
    void set_f32(const std::string &key, float v);
    void set_bool(const std::string &key, bool v);
    void set_str(const std::string &key, const std::string &v);
    void set_arr_str(const std::string &key, std::vector<std::string> v);
    void set_arr_i32(const std::string &key, const std::vector<int32_t> &v);
    void set_arr_u32(const std::string &key, const std::vector<uint32_t> &v);
    void set_arr_f32(const std::string &key, const std::vector<float> &v);

    // dims ne0-first (ne0: the contiguous dimension, a PyTorch [out, in]
    // matrix is {in, out}).
    Status add_tensor(const std::string &name, std::vector<int64_t> dims, TensorType type, RowSource rows);

    // Bytes the file will have.
    uint64_t file_bytes() const;
    size_t tensor_count() const { return tensors_.size(); }
    // progress(done_bytes, total_bytes) after each slab; may be empty.
    Status write(const std::string &path, const std::function<void(uint64_t, uint64_t)> &progress = {}) const;

private:
    struct Tensor {
        std::string name;
        std::vector<int64_t> dims;
        TensorType type;
        RowSource rows;
        uint64_t offset = 0, bytes = 0;
    };
    void set(const std::string &key, Value v);
    std::string header() const;
    std::vector<std::pair<std::string, Value>> kv_;
    std::vector<Tensor> tensors_;
    uint64_t data_bytes_ = 0;
    Status bad_;  // the first refused call: write() reports it
};

// Rounds n floats into the type's stored bytes (out: row_bytes(t, n)),
// the way llama.cpp's reference quantizer does for Q8_0 (scale = amax/127
// stored as f16, codes rounded half away from zero against its inverse).
void encode_row(TensorType t, const float *x, int64_t n, uint8_t *out);

}  // namespace sluice::gguf
