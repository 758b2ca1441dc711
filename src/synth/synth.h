// `sluice synth`: writes a warp-format container directly, at any shape,
// byte-identical for a seed. Its default is Kimi-Linear-48B's real shape
// (about 19 GB), so the streaming runtime can be measured with the real
// model's I/O pattern without its weights. Weights are random but scaled so
// activations stay finite through every layer.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"

namespace sluice {

struct SynthOptions {
    std::string out;
    uint64_t seed = 1;
    int layers = 27, hidden = 2304, vocab = 163840, heads = 32;
    int experts = 256, top_k = 8, moe_inter = 1024, inter = 9216, shared = 1, first_dense = 1;
    int kda_heads = 32, kda_dim = 128, kv_lora = 512, d_nope = 128, d_rope = 64, d_v = 128;
    int mla_every = 4;     // 1-based layers divisible by this, and the last, are MLA (Kimi-Linear: 4, 8, ... 24, 27)
    int trunk_bits = 4;    // 4 = Q4G, 3 = Q3G, 8 = Q8G (embedding and head are always Q8G)
    int stages = 3;        // VQ3R; 4 with index_bits 6 = VQ4P
    int index_bits = 8;
    int jobs = 2;
};

using SynthProgress = std::function<void(const std::string &what, double fraction)>;

// Writes every file to OUT, manifest.json last (the commit point).
Status run_synth(const SynthOptions &o, const SynthProgress &progress);

}  // namespace sluice
