// A minimal, self-contained WASTE v0 reader used by `verify` and the tests
// (the engine's reader lives in src/format; this one exists so convert can
// check its own output without depending on it). Dequantization follows
// FORMAT.md 4.3-4.6 and 6.9 exactly as warp's engine computes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convert/hfconfig.h"
#include "convert/vq.h"

namespace sluice::convert {

struct WasteLayer {
    int layer = 0;
    std::string file;
    int64_t experts = 0;
    uint64_t bytes = 0, stride = 0;
    int64_t base = 0;
};

class WasteContainer {
public:
    bool open(const std::string& dir, std::string* err);

    const ojson& manifest() const { return m_; }
    const std::string& prefix() const { return prefix_; }
    const std::vector<WasteLayer>& layers() const { return layers_; }
    const RecordGeom& geom() const { return g_; }
    int stages() const { return S_; }
    int entries() const { return E_; }
    int index_bits() const { return bits_; }
    int64_t n_books() const { return n_books_; }
    const std::vector<uint8_t>& codebook_bytes() const { return cb_raw_; }

    // A trunk entry's values, dequantized (4.2-4.6).
    bool read_trunk(const ojson& entry, std::vector<float>* out, std::string* err) const;
    // Raw record e of a layer (stride bytes).
    bool read_record(const WasteLayer& l, int64_t e, std::vector<uint8_t>* rec, std::string* err) const;
    // One matrix of a record per 6.9: stages summed left to right in f32,
    // then one f32 multiply by the row scale; codebooks with subnormals
    // flushed (5.3), row scales with subnormals kept (12.1).
    void dequant_matrix(const std::vector<uint8_t>& rec, int kind, std::vector<float>* w) const;

private:
    std::string dir_, prefix_;
    ojson m_;
    std::vector<WasteLayer> layers_;
    RecordGeom g_;
    int S_ = 3, E_ = 256, bits_ = 8;
    int64_t n_books_ = 0;
    std::vector<uint8_t> cb_raw_;
    std::vector<float> books_;  // n_books * E * 8, flushed
};

}  // namespace sluice::convert
