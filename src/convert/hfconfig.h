// What the converter learns from a Hugging Face release before writing:
// the flattened config with MoE aliases (FORMAT.md 2.2), the tensor prefix,
// the expert naming scheme and the trunk membership and renames (4.8).
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "convert/checkpoint.h"

namespace sluice::convert {

using ojson = nlohmann::ordered_json;

struct ModelPlan {
    ojson config;               // as it goes into manifest.json
    std::string arch;           // manifest "arch"
    std::string family;         // "kimi-linear", "kimi-k3" or "" (for chat.json)
    std::string tensor_prefix;  // "" or "language_model."
    int64_t num_layers = 0;
    int64_t first_dense = 0;
    int64_t num_experts = 0;
    int64_t moe_inter = 0;      // I
    int64_t lat = 0;            // routed_expert_hidden_size or hidden_size
    bool deepseek_naming = false;  // experts under .mlp.experts. (rename 4.8 applies)
    std::vector<int> moe_layers;
    int64_t fp8_bm = 128, fp8_bn = 128;

    // Source name of expert e's matrix of `kind` (0 gate, 1 up, 2 down) in
    // layer L (logical: an MXFP4 pair is found by Checkpoint).
    std::string expert_name(int layer, int64_t e, int kind) const;
    // [rows, cols] of an expert matrix of `kind`.
    std::array<int64_t, 2> expert_shape(int kind) const;
};

// Reads config.json from `dir` and inspects `ck`'s names.
bool load_model_plan(const std::string& dir, const Checkpoint& ck, ModelPlan* plan, std::string* err);
// Both steps for a source directory, with the checkpoint set to the release's
// fp8 tile size: what convert and verify --source start from.
bool open_source(const std::string& dir, Checkpoint* ck, ModelPlan* plan, std::string* err);

// Trunk membership (4.8): not a routed expert, not half of an MXFP4 pair.
bool is_trunk_tensor(const std::string& name);
// DeepSeek MoE naming -> the block_sparse_moe spelling the engine knows.
std::string trunk_rename(const std::string& name, bool deepseek_naming);

}  // namespace sluice::convert
