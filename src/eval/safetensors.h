// safetensors reader/writer for the KLD path (KLD.md §2). The reader applies
// every §2.4 rule and streams rows with pread so a 1.3 GB window is never
// loaded whole; the writer is deterministic (§2.5) and atomic.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "eval/kld_common.h"

namespace sluice::kld {

enum class DType { F32, BF16, F16, U8, I32, OTHER };

struct TensorInfo {
    std::string name;
    std::string dtype;  // safetensors name, e.g. "F32"
    DType dt = DType::OTHER;
    std::vector<uint64_t> shape;
    uint64_t begin = 0, end = 0;  // relative to the data buffer
};

size_t dtype_size(DType d);
float bf16_to_f32(uint16_t v);
float f16_to_f32(uint16_t v);
uint16_t f32_to_bf16_rne(float f);

// An open safetensors file with a validated header.
class StFile {
public:
    StFile() = default;
    ~StFile();
    StFile(const StFile&) = delete;
    StFile& operator=(const StFile&) = delete;
    StFile(StFile&& o) noexcept;

    Status open(const std::string& path);
    const std::string& path() const { return path_; }
    uint64_t file_size() const { return size_; }
    uint64_t data_start() const { return 8 + header_len_; }
    const std::map<std::string, std::string>& metadata() const { return meta_; }
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find(const std::string& name) const;

    // Reads rows [row0, row0+n) of a rank-2 tensor and widens them to F32.
    Status read_rows_f32(const TensorInfo& t, uint64_t row0, uint64_t n, float* out);
    // Raw bytes [off, off+n) of the data buffer.
    Status pread_data(uint64_t off, void* dst, uint64_t n);
    // Raw bytes [off, off+n) of the file (header included).
    Status pread_file(uint64_t off, void* dst, uint64_t n);

private:
    std::string path_;
    int fd_ = -1;
    uint64_t size_ = 0, header_len_ = 0;
    std::map<std::string, std::string> meta_;
    std::vector<TensorInfo> tensors_;
    std::vector<uint8_t> scratch_;
};

struct TensorOut {
    std::string name;
    std::string dtype;  // "F32", "U8", "I32", ...
    std::vector<uint64_t> shape;
    const void* data;  // product(shape) * size(dtype) bytes, little-endian
};

// The padded header text (without the 8-byte length) the writer emits.
std::string safetensors_header(const std::map<std::string, std::string>& meta,
                               const std::vector<TensorOut>& tensors, size_t align = 8,
                               std::vector<const TensorOut*>* order = nullptr,
                               std::vector<uint64_t>* sizes = nullptr);

// Writes a safetensors file atomically (path.tmp, fsync, rename). Metadata
// keys are emitted sorted (deterministic); align is 8 or 4096. If sha256_hex
// is not null it receives the hash of the whole file as written.
Status write_safetensors(const std::string& path, const std::map<std::string, std::string>& meta,
                         const std::vector<TensorOut>& tensors, size_t align = 8,
                         std::string* sha256_hex = nullptr, uint64_t* size = nullptr);

}  // namespace sluice::kld
