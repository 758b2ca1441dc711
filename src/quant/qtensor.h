// A trunk matrix resident in RAM, in its container encoding (FORMAT.md §4).
// Kernels consume it without dequantizing it whole.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace sluice {

enum class QFmt : uint8_t { F32 = 0, Q8G = 2, Q4G = 3, Q3G = 7 };

const char *qfmt_name(QFmt f);

// 64-byte aligned byte buffer: SIMD loads never straddle a cache line start.
struct AlignedFree {
    void operator()(void *p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<uint8_t[], AlignedFree>;
AlignedBytes aligned_alloc_bytes(size_t n, size_t align = 64);

struct QTensor {
    std::string name;
    QFmt fmt = QFmt::F32;
    int64_t rows = 0, cols = 0;  // cols = last axis, rows = product of the others
    std::vector<int64_t> shape;
    int group = 128;
    int64_t ng = 0;        // groups per row
    int64_t rowbytes = 0;  // payload bytes per row (F32: 4*cols)
    AlignedBytes data;     // rows*rowbytes payload (or f32 values)
    std::vector<float> scales;  // rows*ng, decoded from f16 (exact)

    const float *f32() const { return reinterpret_cast<const float *>(data.get()); }
    const uint8_t *row(int64_t r) const { return data.get() + r * rowbytes; }
    const float *row_scales(int64_t r) const { return scales.data() + r * ng; }
    int64_t numel() const { return rows * cols; }
};

// Row geometry for a format (FORMAT.md §4.3-4.6). Returns false on overflow.
bool qtensor_geometry(QFmt fmt, int64_t cols, int group, int64_t *ng, int64_t *rowbytes);

}  // namespace sluice
