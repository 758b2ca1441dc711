#include "vision/config.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "format/file.h"

namespace sluice::vision {

bool has_tower(const Manifest &m) {
    for (const TrunkEntry &e : m.trunk)
        if (e.name == kTowerProbe) return true;
    return false;
}

Status load_vision_config(const std::string &dir, const ModelConfig &text, VisionConfig *cfg) {
    *cfg = VisionConfig{};
    const std::string path = dir + "/vision.json";
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return Status::ok();  // no vision.json: no tower geometry
    std::string body;
    SLUICE_TRY(read_whole_file(path, (size_t)1 << 20, &body));
    nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return format_error(path + ": not a JSON object");
    auto get_int = [&](const char *key, int *out) -> Status {
        auto it = j.find(key);
        if (it == j.end()) return Status::ok();
        if (!it->is_number()) return format_error(path + ": \"" + key + "\" must be a number");
        const double v = it->get<double>();
        if (!std::isfinite(v) || std::fabs(v) > 2147483647.0)
            return format_error(path + ": \"" + key + "\" is out of range");
        *out = (int)std::trunc(v);  // truncated toward zero, as the reference reads it
        return Status::ok();
    };
    SLUICE_TRY(get_int("vt_hidden_size", &cfg->D));
    SLUICE_TRY(get_int("vt_num_attention_heads", &cfg->nh));
    SLUICE_TRY(get_int("qkv_hidden_size", &cfg->Q));
    SLUICE_TRY(get_int("vt_intermediate_size", &cfg->F));
    SLUICE_TRY(get_int("vt_num_hidden_layers", &cfg->NL));
    SLUICE_TRY(get_int("init_pos_emb_height", &cfg->PH));
    SLUICE_TRY(get_int("init_pos_emb_width", &cfg->PW));
    cfg->T = text.hidden;
    SLUICE_TRY(get_int("text_hidden_size", &cfg->T));
    SLUICE_TRY(get_int("patch_size", &cfg->patch));
    SLUICE_TRY(get_int("media_placeholder_token_id", &cfg->pad));
    SLUICE_TRY(get_int("max_patches", &cfg->max_patches));
    for (const char *key : {"image_mean", "image_std"}) {
        float *dst = std::string(key) == "image_mean" ? cfg->mean : cfg->stdv;
        auto it = j.find(key);
        if (it == j.end()) continue;
        if (!it->is_array()) return format_error(path + ": \"" + key + "\" must be an array of numbers");
        for (size_t k = 0; k < 3 && k < it->size(); k++) {
            if (!(*it)[k].is_number())
                return format_error(path + ": \"" + key + "\"[" + std::to_string(k) + "] must be a number");
            dst[k] = (*it)[k].get<float>();
        }
    }
    cfg->present = true;
    return Status::ok();
}

Status check_vision_config(const VisionConfig &c, const ModelConfig &text, const std::string &where) {
    auto bad = [&](const std::string &what) {
        return format_error(where + ": vision geometry is unsupported or out of range: " + what);
    };
    if (!c.present) return format_error(where + ": the container has a vision tower but no vision.json");
    if (c.D <= 0 || c.D > (1 << 20)) return bad("vt_hidden_size " + std::to_string(c.D) + " not in (0, 2^20]");
    if (c.nh <= 0 || c.nh > (1 << 16))
        return bad("vt_num_attention_heads " + std::to_string(c.nh) + " not in (0, 2^16]");
    if (c.Q <= 0 || c.Q > (1 << 20) || c.Q % c.nh != 0)
        return bad("qkv_hidden_size " + std::to_string(c.Q) + " not in (0, 2^20] or not a multiple of the heads");
    if (c.hd() % 4 != 0) return bad("head dim " + std::to_string(c.hd()) + " is not a multiple of 4 (2-D rotary)");
    if (c.F <= 0 || c.F > (1 << 22)) return bad("vt_intermediate_size " + std::to_string(c.F) + " not in (0, 2^22]");
    if (c.NL <= 0 || c.NL > 256) return bad("vt_num_hidden_layers " + std::to_string(c.NL) + " not in (0, 256]");
    if (c.PH <= 0 || c.PH > (1 << 16) || c.PW <= 0 || c.PW > (1 << 16))
        return bad("position grid " + std::to_string(c.PH) + "x" + std::to_string(c.PW) + " not in (0, 2^16]");
    if (c.T != text.hidden)
        return bad("text_hidden_size " + std::to_string(c.T) + " != hidden_size " + std::to_string(text.hidden));
    if (c.patch != 14) return bad("patch_size " + std::to_string(c.patch) + " (only 14 is supported)");
    if (c.pad < 0 || c.pad >= text.vocab)
        return bad("media_placeholder_token_id " + std::to_string(c.pad) + " not in [0, vocab " +
                   std::to_string(text.vocab) + ")");
    if (c.max_patches < 4 || c.max_patches > (1 << 20))
        return bad("max_patches " + std::to_string(c.max_patches) + " not in [4, 2^20]");
    for (int k = 0; k < 3; k++) {
        if (!std::isfinite(c.mean[k])) return bad("image_mean[" + std::to_string(k) + "] is not finite");
        if (!std::isfinite(c.stdv[k]) || !(c.stdv[k] > 0))
            return bad("image_std[" + std::to_string(k) + "] is not finite and positive");
    }
    return Status::ok();
}

uint64_t vision_plan_bytes(const Manifest &m, const VisionConfig &c) {
    uint64_t weights = 0;
    bool any = false;
    for (const TrunkEntry &e : m.trunk) {
        if (m.tensor_prefix.empty() || e.name.compare(0, m.tensor_prefix.size(), m.tensor_prefix) == 0) continue;
        any = true;
        if (e.bytes > 0) weights += (uint64_t)e.bytes;
    }
    if (!any) return 0;
    const int T = c.T > 0 ? c.T : m.cfg.hidden;
    const bool in_range = c.present && c.D > 0 && c.D <= (1 << 20) && c.nh > 0 && c.nh <= (1 << 16) && c.Q > 0 &&
                          c.Q <= (1 << 20) && c.F > 0 && c.F <= (1 << 22) && c.PH > 0 && c.PH <= (1 << 16) &&
                          c.PW > 0 && c.PW <= (1 << 16) && T > 0 && T <= (1 << 20) && c.max_patches >= 4 &&
                          c.max_patches <= (1 << 20);
    if (!in_range) return weights;
    // The reference engine's reservation, term for term, so the floors agree.
    const uint64_t Lm = (uint64_t)c.max_patches, D = (uint64_t)c.D, Q = (uint64_t)c.Q, F = (uint64_t)c.F;
    const uint64_t queue = 32ull * ((Lm + 3) / 4) * (uint64_t)T * 4;
    const uint64_t pixels = Lm * 588 * 4;
    const uint64_t tower = 4 * (3 * Lm * D + 3 * Lm * Q + Lm * Q + Lm * F + Lm + (uint64_t)c.PH * c.PW * D + 2 * Lm * D);
    const uint64_t decode = (64ull << 20) * 3;
    return weights + 2 * queue + pixels + tower + decode;
}

}  // namespace sluice::vision
