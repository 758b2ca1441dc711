#include "common/checked_file.h"
#include "convert/hfconfig.h"

#include <fstream>

namespace sluice::convert {

bool is_trunk_tensor(const std::string& name) {
    return name.find(".experts.") == std::string::npos && !name.ends_with("_packed") && !name.ends_with("_scale");
}

std::string trunk_rename(const std::string& name, bool deepseek) {
    if (!deepseek) return name;
    static const std::pair<const char*, const char*> subs[] = {
        {".mlp.gate.weight", ".block_sparse_moe.gate.weight"},
        {".mlp.gate.e_score_correction_bias", ".block_sparse_moe.gate.e_score_correction_bias"},
    };
    for (const auto& [from, to] : subs)
        if (name.ends_with(from)) return name.substr(0, name.size() - std::string(from).size()) + to;
    const std::string sh = ".mlp.shared_experts.";
    const size_t p = name.find(sh);
    if (p != std::string::npos) return name.substr(0, p) + ".block_sparse_moe.shared_experts." + name.substr(p + sh.size());
    return name;
}

static int64_t get_int(const ojson& c, const char* key, int64_t dflt) {
    auto it = c.find(key);
    if (it == c.end() || !it->is_number()) return dflt;
    return it->is_number_integer() ? it->get<int64_t>() : static_cast<int64_t>(it->get<double>());
}

std::string ModelPlan::expert_name(int layer, int64_t e, int kind) const {
    static const char* kimi[3] = {"w1", "w3", "w2"};
    static const char* ds[3] = {"gate_proj", "up_proj", "down_proj"};
    return tensor_prefix + "model.layers." + std::to_string(layer) + (deepseek_naming ? ".mlp" : ".block_sparse_moe") +
           ".experts." + std::to_string(e) + "." + (deepseek_naming ? ds[kind] : kimi[kind]) + ".weight";
}

std::array<int64_t, 2> ModelPlan::expert_shape(int kind) const {
    if (kind == 2) return {lat, moe_inter};
    return {moe_inter, lat};
}

bool load_model_plan(const std::string& dir, const Checkpoint& ck, ModelPlan* p, std::string* err) {
    const GgufSource* gg = ck.gguf();
    const std::string path = gg ? gg->path() + " (config synthesized from its metadata)" : dir + "/config.json";
    ojson raw;
    if (gg) {
        raw = gg->config();
    } else {
        try {
            std::string text;
            if (sluice::Status rs = sluice::read_input_file(path, 64u << 20, &text); !rs) {
                *err = rs.message();
                return false;
            }
            raw = ojson::parse(text);
        } catch (const std::exception& e) {
            *err = path + ": not valid JSON: " + e.what();
            return false;
        }
    }
    if (!raw.is_object()) {
        *err = path + ": not a JSON object";
        return false;
    }
    // Multimodal nesting (K3): the text config becomes the config, every other
    // key of the release goes under "_outer".
    if (raw.contains("text_config") && raw["text_config"].is_object()) {
        p->config = raw["text_config"];
        ojson outer = ojson::object();
        for (auto it = raw.begin(); it != raw.end(); ++it)
            if (it.key() != "text_config") outer[it.key()] = it.value();
        p->config["_outer"] = outer;
        p->tensor_prefix = "language_model.";
    } else {
        p->config = raw;
        p->tensor_prefix = "";
    }
    ojson& c = p->config;
    auto alias = [&](const char* canon, const char* src) {
        if (!c.contains(canon) && c.contains(src)) c[canon] = c[src];
    };
    alias("num_experts", "n_routed_experts");
    alias("num_experts_per_token", "num_experts_per_tok");
    alias("num_shared_experts", "n_shared_experts");
    // moe_renormalize is a presence flag for the engine: alias only a true value.
    if (!c.contains("moe_renormalize") && c.contains("norm_topk_prob") && c["norm_topk_prob"].is_boolean() &&
        c["norm_topk_prob"].get<bool>())
        c["moe_renormalize"] = true;

    std::string archname;
    const ojson* arch_src = raw.contains("architectures") ? &raw : &c;
    if (arch_src->contains("architectures") && (*arch_src)["architectures"].is_array() &&
        !(*arch_src)["architectures"].empty() && (*arch_src)["architectures"][0].is_string())
        archname = (*arch_src)["architectures"][0].get<std::string>();
    if (archname.find("KimiK3") != std::string::npos) p->arch = p->family = "kimi-k3";
    else if (archname.find("KimiLinear") != std::string::npos) p->arch = p->family = "kimi-linear";
    else if (!archname.empty()) p->arch = archname;
    else if (raw.contains("model_type") && raw["model_type"].is_string()) p->arch = raw["model_type"].get<std::string>();

    // fp8 tile size, wherever the release put quantization_config.
    for (const ojson* q : {&c, &raw}) {
        if (q->contains("quantization_config") && (*q)["quantization_config"].is_object()) {
            const ojson& qc = (*q)["quantization_config"];
            if (qc.contains("weight_block_size") && qc["weight_block_size"].is_array() &&
                qc["weight_block_size"].size() == 2) {
                p->fp8_bm = qc["weight_block_size"][0].get<int64_t>();
                p->fp8_bn = qc["weight_block_size"][1].get<int64_t>();
            }
            break;
        }
    }
    if (p->fp8_bm < 1 || p->fp8_bn < 1) {
        *err = path + ": quantization_config.weight_block_size must be positive";
        return false;
    }

    p->num_layers = get_int(c, "num_hidden_layers", 0);
    p->first_dense = get_int(c, "first_k_dense_replace", 0);
    p->num_experts = get_int(c, "num_experts", 0);
    p->moe_inter = get_int(c, "moe_intermediate_size", 0);
    const int64_t reh = get_int(c, "routed_expert_hidden_size", 0);
    p->lat = reh > 0 ? reh : get_int(c, "hidden_size", 0);
    if (p->num_layers < 1 || p->num_layers > 128) {
        *err = path + ": num_hidden_layers must be in [1, 128]";
        return false;
    }
    if (p->num_experts < 0 || p->num_experts > 65535) {
        *err = path + ": num_experts out of range (expert ids are u16)";
        return false;
    }
    p->deepseek_naming = false;
    for (const std::string& n : ck.names())
        if (n.find(".mlp.experts.") != std::string::npos) p->deepseek_naming = true;
    p->moe_layers.clear();
    if (p->num_experts > 0) {
        if (p->moe_inter < 1 || p->lat < 1 || p->lat % 8 != 0 || p->moe_inter % 8 != 0) {
            *err = path + ": moe_intermediate_size and the expert hidden width must be positive multiples of 8";
            return false;
        }
        for (int64_t L = std::max<int64_t>(0, p->first_dense); L < p->num_layers; ++L)
            p->moe_layers.push_back(static_cast<int>(L));
        if (!p->moe_layers.empty() && !ck.logical_exists(p->expert_name(p->moe_layers[0], 0, 0))) {
            *err = "checkpoint has no expert 0 of layer " + std::to_string(p->moe_layers[0]) + " (looked for '" +
                   p->expert_name(p->moe_layers[0], 0, 0) + "' or its MXFP4 pair)";
            return false;
        }
    }
    return true;
}

bool open_source(const std::string& dir, Checkpoint* ck, ModelPlan* plan, std::string* err) {
    if (!ck->open(dir, err) || !load_model_plan(dir, *ck, plan, err)) return false;
    ck->set_fp8_block(plan->fp8_bm, plan->fp8_bn);
    return true;
}

}  // namespace sluice::convert
