// The text model's resident weights, bound by name and shape-checked at
// open (FORMAT.md §4.10). A missing or mis-shaped tensor refuses the
// container with the tensor named; nothing is guessed.
#pragma once
#include <vector>

#include "format/container.h"
#include "quant/qtensor.h"

namespace sluice {

struct KdaWeights {
    QTensor q, k, v, fa, fb, b, ga, gb, g, o;
    std::vector<float> qconv, kconv, vconv, a_log, dt_bias, o_norm;
};

struct MlaWeights {
    QTensor q, qa, qb, kva, kvb, g, o;
    std::vector<float> qa_norm, kva_norm;
};

struct DenseWeights {
    QTensor gate, up, down;
};

struct MoeWeights {
    QTensor router, sh_gate, sh_up, sh_down, lat_down, lat_up;
    std::vector<float> bias;  // empty = no correction bias
    std::vector<float> lat_norm;
    int64_t codebook_base = 0;
};

struct LayerWeights {
    bool kda = false, moe = false;
    KdaWeights k;
    MlaWeights m;
    DenseWeights dense;
    MoeWeights moe_w;
    std::vector<float> in_norm, post_norm;
    std::vector<float> sa_res_norm, sa_res_proj, mlp_res_norm, mlp_res_proj;  // AttnRes
};

struct ModelWeights {
    QTensor embed;  // described only: rows are read from disk per token
    QTensor lm_head;
    std::vector<float> final_norm, out_res_norm, out_res_proj;
    std::vector<LayerWeights> layers;
    uint64_t resident_bytes = 0;
    uint64_t trunk_params = 0;   // every trunk parameter the text model uses
};

Status load_weights(const Container &c, ModelWeights *w);

}  // namespace sluice
