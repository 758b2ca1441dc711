// Trunk quantization, byte-identical to warp's converter (FORMAT.md 4, 13.3).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convert/checkpoint.h"
#include "convert/hfconfig.h"

namespace sluice::convert {

enum TrunkFmt { kF32 = 0, kQ8G = 2, kQ4G = 3, kQ3G = 7 };

struct TrunkEntry {
    std::string source;  // source (logical) name
    std::string name;    // name in the container (after the DeepSeek rename)
    int fmt = kF32;
    std::vector<int64_t> shape;
    uint64_t off = 0, scale_off = 0, bytes = 0;
    int64_t rows = 1, cols = 1;  // the [R, N] view quantized per row
    int64_t src_rows_per_row = 1;  // source rows (of the source's last dim) in one row of this view
    bool vision_requant = false;   // the vision requantization pass's scale floor (VISION.md §1.3)
};

// Bytes of one packed row of n (padded) elements.
uint64_t trunk_row_bytes(int fmt, int64_t padded_n);

// Quantizes rows x[rows][N] with group 128: payload rows of
// trunk_row_bytes(fmt, ceil(N/128)*128) bytes and rows*ng f16 scales.
// vision_floor: the scale floor of the vision requantization pass,
// max(amax/127, 1e-12), instead of the converter's max(amax, 1e-8)/127.
void quantize_rows(const float* x, int64_t rows, int64_t N, int fmt, uint8_t* payload, uint16_t* scales,
                   bool vision_floor = false);

// Lists trunk tensors in source-name order and lays them out back to back.
bool plan_trunk(const Checkpoint& ck, const ModelPlan& mp, int trunk_bits, bool trunk8, std::vector<TrunkEntry>* out,
                uint64_t* total_bytes, std::string* err);

// Writes trunk.bin.tmp (pwrite at planned offsets, so work is split into row
// chunks freely without changing a byte), fsyncs, renames to trunk.bin.
bool write_trunk(const Checkpoint& ck, const std::vector<TrunkEntry>& plan, uint64_t total_bytes,
                 const std::string& out_dir, int jobs, class ProgressSink* sink, std::string* err);

}  // namespace sluice::convert
