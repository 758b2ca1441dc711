// K3's vision tower and projector (VISION.md §1, §5): weights bound by name
// and shape-checked at load, and the forward pass from the [L][588] patch
// tensor to [N][T] image embeddings.
#pragma once
#include <vector>

#include "format/container.h"
#include "runtime/ops.h"
#include "vision/config.h"
#include "vision/image.h"

namespace sluice::vision {

struct TowerBlock {
    std::vector<float> norm0, norm1;
    QTensor wqkv, wo, fc0, fc1;
};

struct VisionTower {
    VisionConfig cfg;
    QTensor patch;             // [D][588]
    std::vector<float> pos;    // [PH·PW][D], dequantized once at load
    std::vector<TowerBlock> blocks;
    std::vector<float> final_norm, post_norm;
    QTensor proj0, proj2;      // [4D][4D], [T][4D]
    uint64_t resident_bytes = 0;
};

// Loads every tower and projector tensor, checking format and shape against
// cfg (which must already have passed check_vision_config). Errors name the
// tensor and what is wrong with it.
Status load_tower(const Container &c, const VisionConfig &cfg, VisionTower *out);

// The tower on one image's patches: pixels [gh·gw][588] -> emb [N][T],
// N = (gh/2)·(gw/2). gh and gw must be even and at least 2. Results do not
// depend on the thread count or the kernel backend beyond what the text
// model's matmul guarantees (bit-identical across both).
Status encode(const VisionTower &t, const Ops &ops, const float *pixels, Grid g, std::vector<float> *emb);

}  // namespace sluice::vision
