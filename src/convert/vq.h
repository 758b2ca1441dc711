// Residual vector quantization of expert matrices (FORMAT.md 6, 13.4):
// seeded k-means codebooks, the native greedy encoder, and byte layout of
// expert records and codebook records.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::convert {

constexpr int kVecDim = 8;
constexpr int kIndexBlock = 64;

// Deterministic PRNG (splitmix64): the converter's only randomness.
class Rng {
public:
    explicit Rng(uint64_t seed) : s_(seed) {}
    uint64_t next();
    uint64_t below(uint64_t n);  // uniform in [0, n), unbiased
    double unit();               // uniform in [0, 1)

private:
    uint64_t s_;
};
uint64_t mix_seed(uint64_t a, uint64_t b);

// The first `k` positions of a uniformly random permutation of [0, n).
std::vector<uint32_t> partial_perm(uint64_t n, uint64_t k, Rng& rng);

// Trains S stage codebooks of E entries on vectors x (n x 8, modified in
// place into the final residual). books[s] holds E*8 f32 values. Work is
// split into fixed chunks and reduced in a fixed order: the result does not
// depend on `jobs`. Fails if n < E.
bool train_rvq(std::vector<float>& x, int S, int E, int iters, uint64_t seed, int jobs,
               std::vector<std::vector<float>>* books, std::string* err);

// Native greedy encoder (warp's libwastevq rule): per stage the entry with
// the least f32 squared distance accumulated in dimension order, first
// minimum wins; the residual is updated in f32 with the unrounded centroid.
// idx receives n*S indices, vector-major.
void encode_rvq(const float* x, int64_t n, const std::vector<std::vector<float>>& books, int E, uint8_t* idx);

struct RecordGeom {
    int64_t rows[3] = {0, 0, 0}, cols[3] = {0, 0, 0};  // gate, up, down
    int S = 3, index_bits = 8;
    uint64_t idx_bytes[3] = {0, 0, 0};
    uint32_t off[4] = {0, 0, 0, 0};  // gate, up, down, scales
    uint64_t scale_end = 0;          // end of the CRC-covered region
    uint64_t stride = 0;
};
RecordGeom record_geometry(int64_t I, int64_t lat, int S, int index_bits);

// Fills rec (g.stride bytes): header, blocked indices (zero tail rows), row
// scales, zero padding, CRC over [48, scale_end).
// idx[k]: rows*nv*S indices (row-major [r][v][s]); scales[k]: rows f16 values.
void build_record(const RecordGeom& g, int layer, int expert, int codebook_id, const uint8_t* const idx[3],
                  const uint16_t* const scales[3], uint8_t* rec);

// Reads back one matrix's indices from a record ([r][v][s]).
void unpack_indices(const RecordGeom& g, int kind, const uint8_t* rec, uint8_t* idx);

// One codebook record (16-byte header + E*8 f16).
std::vector<uint8_t> codebook_record(uint32_t id, const std::vector<float>& entries, int E);
inline uint64_t codebook_record_size(int E) { return 16 + 2ull * E * kVecDim; }

}  // namespace sluice::convert
