#include "synth/config_plan.h"

#include <nlohmann/json.hpp>

namespace sluice {
namespace {

using json = nlohmann::json;

// An integer key in [lo, hi]; absent -> dflt (or an error when required).
Status get_int(const json &c, const char *key, int lo, int hi, bool required, int dflt, const std::string &where,
               int *out) {
    auto it = c.find(key);
    if (it == c.end() || it->is_null()) {
        if (required) return format_error(where + ": config key '" + key + "' is missing");
        *out = dflt;
        return Status::ok();
    }
    if (!it->is_number_integer()) return format_error(where + ": config key '" + key + "' must be an integer");
    const int64_t v = it->get<int64_t>();
    if (v < lo || v > hi)
        return format_error(where + ": config key '" + key + "' = " + std::to_string(v) + " is outside [" +
                            std::to_string(lo) + ", " + std::to_string(hi) + "]");
    *out = (int)v;
    return Status::ok();
}

// The first spelling present wins (converter aliases, MODEL.md §1.1).
Status get_alias(const json &c, std::initializer_list<const char *> keys, int lo, int hi, bool required, int dflt,
                 const std::string &where, int *out) {
    for (const char *k : keys)
        if (c.contains(k) && !c[k].is_null()) return get_int(c, k, lo, hi, true, dflt, where, out);
    return get_int(c, *keys.begin(), lo, hi, required, dflt, where, out);
}

}  // namespace

Status shape_from_hf_config(const std::string &text, const std::string &where, SynthOptions *out, std::string *family) {
    json root;
    try {
        root = json::parse(text);
    } catch (const std::exception &e) {
        return format_error(where + ": not JSON: " + e.what());
    }
    if (!root.is_object()) return format_error(where + ": not a JSON object");
    const bool wrapped = root.contains("text_config") && root["text_config"].is_object();
    const json &c = wrapped ? root["text_config"] : root;
    SynthOptions o;
    constexpr int kBig = 1 << 20;
    SLUICE_TRY(get_int(c, "num_hidden_layers", 1, 128, true, 0, where, &o.layers));
    SLUICE_TRY(get_int(c, "hidden_size", 8, 65536, true, 0, where, &o.hidden));
    SLUICE_TRY(get_int(c, "vocab_size", 1, 1 << 24, true, 0, where, &o.vocab));
    SLUICE_TRY(get_int(c, "num_attention_heads", 1, 1024, true, 0, where, &o.heads));
    SLUICE_TRY(get_alias(c, {"num_experts", "n_routed_experts"}, 0, 65536, true, 0, where, &o.experts));
    SLUICE_TRY(get_alias(c, {"num_experts_per_token", "num_experts_per_tok"}, 1, 64, o.experts > 0, 1, where, &o.top_k));
    SLUICE_TRY(get_alias(c, {"num_shared_experts", "n_shared_experts"}, 0, 64, false, 0, where, &o.shared));
    SLUICE_TRY(get_int(c, "moe_intermediate_size", 8, kBig, o.experts > 0, 8, where, &o.moe_inter));
    SLUICE_TRY(get_int(c, "intermediate_size", 8, kBig, false, o.moe_inter, where, &o.inter));
    SLUICE_TRY(get_int(c, "first_k_dense_replace", 0, o.layers, false, 0, where, &o.first_dense));
    SLUICE_TRY(get_int(c, "kv_lora_rank", 1, 65536, true, 0, where, &o.kv_lora));
    SLUICE_TRY(get_int(c, "q_lora_rank", 0, 65536, false, 0, where, &o.q_lora));
    SLUICE_TRY(get_int(c, "qk_nope_head_dim", 1, 4096, true, 0, where, &o.d_nope));
    SLUICE_TRY(get_int(c, "qk_rope_head_dim", 0, 4096, true, 0, where, &o.d_rope));
    SLUICE_TRY(get_int(c, "v_head_dim", 1, 4096, true, 0, where, &o.d_v));
    SLUICE_TRY(get_int(c, "routed_expert_hidden_size", 0, 65536, false, 0, where, &o.r_lat));
    SLUICE_TRY(get_int(c, "attn_res_block_size", 0, 128, false, 0, where, &o.attn_res_block));
    if (o.experts > 0 && o.top_k > o.experts)
        return format_error(where + ": num_experts_per_token exceeds num_experts");
    o.k3 = o.r_lat > 0 || o.attn_res_block > 0;
    auto la = c.find("linear_attn_config");
    if (la != c.end() && la->is_object()) {
        SLUICE_TRY(get_int(*la, "num_heads", 1, 1024, true, 0, where + " linear_attn_config", &o.kda_heads));
        SLUICE_TRY(get_int(*la, "head_dim", 1, 1024, true, 0, where + " linear_attn_config", &o.kda_dim));
        auto kl = la->find("kda_layers");
        if (kl == la->end() || !kl->is_array())
            return format_error(where + ": linear_attn_config.kda_layers must be a list of 1-based layers");
        for (const auto &v : *kl) {
            if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > o.layers)
                return format_error(where + ": linear_attn_config.kda_layers holds " + v.dump() + ", not a layer in 1.." +
                                    std::to_string(o.layers));
            o.kda_layers.push_back(v.get<int>());
        }
        if (o.kda_layers.empty()) o.mla_every = 1;
        *family = o.k3 ? "kimi-k3" : "kimi-linear";
    } else {
        // No linear attention: every layer is MLA (DeepSeek-V3 / R1 / Kimi K2).
        o.kda_layers.clear();
        o.mla_every = 1;
        *family = "deepseek";
    }
    if (o.hidden % 8 || o.moe_inter % 8 || o.r_lat % 8)
        return format_error(where + ": hidden_size, moe_intermediate_size and routed_expert_hidden_size must be "
                                    "multiples of 8 (the experts' vector width)");
    *out = o;
    return Status::ok();
}

}  // namespace sluice
