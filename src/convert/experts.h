// One MoE layer -> experts-L{n}.bin + codebooks-L{n}.bin (FORMAT.md 13.4).
#pragma once

#include <cstdint>
#include <string>

#include "convert/checkpoint.h"
#include "convert/convert.h"
#include "convert/hfconfig.h"
#include "convert/vq.h"

namespace sluice::convert {

struct ExpertParams {
    int S = 3, E = 256, index_bits = 8;
    int cb_sample = 12, iters = 10;
    int64_t train = 300000;
    uint64_t seed = 0;
};

std::string bank_file(int layer);      // "experts-L{n}.bin"
std::string codebook_part(int layer);  // "codebooks-L{n}.bin"

// True when both of the layer's files are complete (they are renamed into
// place only when whole, so the expected size is proof enough given the
// run's fingerprint matched).
bool layer_done(const std::string& dir, const ModelPlan& mp, const ExpertParams& p, int layer);

// Wall time of the two halves of a layer, summed over layers for the summary
// line (they scale differently: k-means is a fixed cost per layer, encoding
// grows with the number of experts).
struct PhaseTimes {
    double kmeans_s = 0, encode_s = 0;
};

// Trains the layer's 3*S codebooks and encodes every expert. Memory: the
// k-means sample (<= train vectors) plus one expert per worker thread.
bool convert_layer(const Checkpoint& ck, const ModelPlan& mp, const ExpertParams& p, int layer, int codebook_base,
                   const std::string& dir, int jobs, ProgressSink* sink, std::string* err,
                   PhaseTimes* times = nullptr);

// Row scales and normalization (13.4): s_r = max(max|W_r|, 1e-8); W_r / s_r.
void normalize_rows(const float* w, int64_t M, int64_t N, float* out, uint16_t* scales_f16);

}  // namespace sluice::convert
