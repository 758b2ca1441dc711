// The small generated model the placement and memory-pressure tests share:
// 5 layers with the full-scale router shape (top-8 of 64 experts, 64-row
// aligned expert widths), so the expert-parallel MoE and the 64-row VQ
// blocks run as at full scale. Callers change what they need and call
// sluice::run_synth.
#pragma once
#include <string>

#include "synth/synth.h"

namespace sluice_test {

inline sluice::SynthOptions router_shape_synth(const std::string &out) {
    sluice::SynthOptions o;
    o.out = out;
    o.layers = 5;
    o.hidden = 256;
    o.vocab = 1024;
    o.heads = 4;
    o.experts = 64;
    o.top_k = 8;
    o.moe_inter = 128;
    o.inter = 512;
    o.kda_heads = 4;
    o.kda_dim = 32;
    o.kv_lora = 64;
    o.d_nope = 32;
    o.d_rope = 16;
    o.d_v = 32;
    o.mla_every = 2;
    o.jobs = 1;
    return o;
}

}  // namespace sluice_test
