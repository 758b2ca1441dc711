// Reads a GGUF file (v2 or v3): its metadata and tensor index are parsed in
// full at open, every count and length bounded by the bytes that remain, so
// a truncated or hostile header is refused with the key or tensor at fault
// before anything is allocated from it. Tensors are read by name, converted
// to f32 rows; a tensor type sluice does not read is refused naming both.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "format/file.h"
#include "format/gguf.h"

namespace sluice::gguf {

struct TensorInfo {
    std::string name;
    std::vector<int64_t> dims;  // ne0 first
    uint32_t type = 0;          // ggml type number, as stored
    uint64_t offset = 0;        // from the start of the file
    uint64_t bytes = 0;         // 0 for a type sluice does not read
    int64_t rows() const;       // product of dims[1..]
};

class Reader {
public:
    Status open(const std::string &path);
    const std::string &path() const { return file_.path(); }
    uint32_t version() const { return version_; }
    // File size, and where the tensor data begins (the header is [0, data_start)).
    uint64_t file_size() const { return size_; }
    uint64_t data_start() const { return data_start_; }
    const std::vector<std::pair<std::string, Value>> &metadata() const { return kv_; }
    const Value *find(const std::string &key) const;
    // Typed getters: an error naming the file and key when it is missing or
    // of another kind (any integer type is read as an integer).
    Status get_int(const std::string &key, int64_t *out) const;
    Status get_float(const std::string &key, double *out) const;
    Status get_str(const std::string &key, std::string *out) const;
    Status get_bool(const std::string &key, bool *out) const;
    Status get_int_array(const std::string &key, std::vector<int64_t> *out) const;
    const std::vector<TensorInfo> &tensors() const { return tensors_; }
    const TensorInfo *tensor(const std::string &name) const;
    // Rows [row0, row0 + n) of a tensor as f32 (n * dims[0] floats).
    Status read_rows_f32(const TensorInfo &t, int64_t row0, int64_t n, float *out) const;

private:
    File file_;
    uint32_t version_ = 0;
    uint64_t size_ = 0, data_start_ = 0;
    std::vector<std::pair<std::string, Value>> kv_;
    std::map<std::string, size_t> kv_index_;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, size_t> tensor_index_;
};

}  // namespace sluice::gguf
