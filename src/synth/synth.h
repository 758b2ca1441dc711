// `sluice synth`: writes a warp-format container directly, at any shape,
// byte-identical for a seed. Its default is Kimi-Linear-48B's real shape
// (about 19 GB), so the streaming runtime can be measured with the real
// model's I/O pattern without its weights. `--family k3` writes Kimi K3's
// text model instead (latent MoE, AttnRes, SiTU, gated MLA, full-rank KDA
// gate) with K3's real expert records. Weights are random but scaled so
// activations stay finite through every layer.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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
    // Kimi K3 features (k3 = true): tensors under "language_model.", factorised
    // MLA query (q_lora), gated MLA output, full-rank KDA gate with bounded
    // decay, SiTU, Attention Residuals every attn_res_block layers, and a
    // latent MoE whose routed experts see r_lat values instead of the hidden.
    bool k3 = false;
    int q_lora = 0, r_lat = 0, attn_res_block = 0;
    // 1-based KDA layers; empty: every layer but each mla_every-th and the
    // last. A model with no KDA layers at all (DeepSeek) sets mla_every 1.
    std::vector<int> kda_layers;
};

// Kimi K3's text model at its real expert scale, sized for one machine:
// real expert records (r_lat 3584, I 3072, VQ3R: 11.83 MiB), 93 layers (69
// KDA, 24 MLA, 92 MoE), top-16 of 32 experts, 2 shared, and a 2048-wide
// trunk (K3's 7168 gives a 27 GB trunk, more than a 24 GB machine holds).
SynthOptions k3_shape();

// The sizes a shape writes, before writing it.
struct SynthSizes {
    uint64_t trunk_bytes = 0, record_bytes = 0, expert_bytes = 0, codebook_bytes = 0, total = 0;
    int moe_layers = 0, kda_layers = 0, mla_layers = 0;
};
SynthSizes synth_sizes(const SynthOptions &o);

// The manifest.json the shape would get, without writing anything.
std::string synth_manifest(const SynthOptions &o);

// A few lines: the shape, its sizes, and (for K3) why it differs from the
// real model.
std::string describe_synth(const SynthOptions &o);

using SynthProgress = std::function<void(const std::string &what, double fraction)>;

// Writes every file to OUT, manifest.json last (the commit point).
Status run_synth(const SynthOptions &o, const SynthProgress &progress);

}  // namespace sluice
