// vision.json (VISION.md §2): the tower's geometry and the image
// normalisation, and the memory the tower needs (§2.4).
#pragma once
#include <cstdint>
#include <string>

#include "common/status.h"
#include "format/manifest.h"

namespace sluice::vision {

struct VisionConfig {
    bool present = false;  // vision.json was found and parsed
    int D = 1024, nh = 12, Q = 1536, F = 4096, NL = 27, PH = 64, PW = 64;
    int T = 0;  // text hidden size; 0 = the text config's
    int patch = 14;
    int pad = -1;  // media_placeholder_token_id
    int max_patches = 1024;
    float mean[3] = {0.5f, 0.5f, 0.5f}, stdv[3] = {0.5f, 0.5f, 0.5f};
    int hd() const { return Q / nh; }
};

// Epsilons fixed in code, as the reference engine does (VISION.md §2.2).
constexpr float kTowerEps = 1.1920928955078125e-07f;
constexpr float kProjectorEps = 1e-5f;
constexpr int kMaxImages = 32;

// The tower tensor whose presence means "this container has a tower".
constexpr const char *kTowerProbe = "vision_tower.patch_embed.proj.weight";
bool has_tower(const Manifest &m);

// Parses dir/vision.json. A missing file leaves cfg->present false and is
// not an error. A present file must be a JSON object whose known keys have
// the right types (errors name the key); unknown keys are ignored.
Status load_vision_config(const std::string &dir, const ModelConfig &text, VisionConfig *cfg);
// The load-time sanity check (§2.3, plus head_dim % 4 == 0 for the 2-D
// rotary): refuses geometry the tower cannot run, naming the field.
Status check_vision_config(const VisionConfig &cfg, const ModelConfig &text, const std::string &where);

// Bytes the tower adds to the memory floor when images are enabled (§2.4):
// its weights (manifest bytes of trunk entries outside tensor_prefix) plus
// activations for max_patches patches, the embedding queue and decoding.
uint64_t vision_plan_bytes(const Manifest &m, const VisionConfig &cfg);

}  // namespace sluice::vision
