#include "api/fingerprint.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "format/file_sha256.h"
#include <vector>

namespace sluice {
ModelSummary summarize(const Engine &e) {
    const ModelConfig &c = e.config();
    const Manifest &m = e.container().manifest();
    ModelSummary s;
    s.arch = c.arch_name.empty() ? m.arch : c.arch_name;
    // K3 is told by its own config keys; a prefix alone is not enough (a
    // Kimi-Linear container may carry language_model. too).
    if (c.attn_res_block > 0 || c.r_lat > 0 || c.situ || c.full_rank_gate || c.mla_output_gate) s.family = "kimi-k3";
    else if (std::find(c.is_kda.begin(), c.is_kda.end(), true) != c.is_kda.end()) s.family = "kimi-linear";
    else s.family = "deepseek-v3";
    for (int L = 0; L < c.n_layers; L++) {
        s.n_kda += c.is_kda[(size_t)L] ? 1 : 0;
        s.n_moe += c.is_moe_layer(L) ? 1 : 0;
    }
    // Trunk formats by bytes, largest share first, from the manifest entries
    // the text model uses.
    std::map<std::string, uint64_t> fmt_bytes;
    const char *names[8] = {"F32", "F16", "Q8G", "Q4G", "?", "?", "?", "Q3G"};
    for (const TrunkEntry &t : m.trunk) {
        if (!m.tensor_prefix.empty() && t.name.compare(0, m.tensor_prefix.size(), m.tensor_prefix) != 0) continue;
        uint64_t b = t.bytes > 0 ? (uint64_t)t.bytes : 0;
        fmt_bytes[t.fmt >= 0 && t.fmt < 8 ? names[t.fmt] : "?"] += b;
        s.trunk_bytes += b;
    }
    std::vector<std::pair<uint64_t, std::string>> v;
    for (auto &[k, b] : fmt_bytes) v.push_back({b, k});
    std::sort(v.rbegin(), v.rend());
    for (size_t i = 0; i < v.size(); i++) s.trunk_formats += (i ? "/" : "") + v[i].second;
    const ExpertQuant &eq = m.eq;
    s.expert_format = eq.index_bits == 6 ? "VQ4P" : (eq.stages == 2 ? "VQ2R" : (eq.stages == 3 ? "VQ3R" : "VQ" + std::to_string(eq.stages) + "R"));
    if (c.n_experts == 0) s.expert_format = "none";
    for (const auto &[L, b] : m.banks) s.expert_bytes += (uint64_t)b.bytes;
    const uint64_t per_expert = 3ull * (uint64_t)c.moe_inter * (uint64_t)c.expert_in();
    // From the manifest's shapes when the trunk was not loaded (`sluice info`
    // opens metadata-only): the loaded count was 0 there, and "trunk minus
    // the embedding" below wrapped to 1.8e19 active parameters.
    uint64_t trunk = e.weights().trunk_params;
    if (trunk == 0)
        for (const TrunkEntry &t : m.trunk) {
            if (!m.tensor_prefix.empty() && t.name.compare(0, m.tensor_prefix.size(), m.tensor_prefix) != 0) continue;
            uint64_t n = 1;  // parse_manifest bounds each shape to 2^40 elements
            for (int64_t d : t.shape) n *= (uint64_t)std::max<int64_t>(d, 0);
            trunk += n;
        }
    const uint64_t embed = (uint64_t)c.vocab * (uint64_t)c.hidden;
    s.total_params = trunk + (uint64_t)s.n_moe * (uint64_t)c.n_experts * per_expert;
    // Active per token: the trunk minus all but one embedding row, plus top-k
    // routed experts in every MoE layer.
    s.active_params = (trunk > embed ? trunk - embed + (uint64_t)c.hidden : trunk) +
                      (uint64_t)s.n_moe * (uint64_t)c.top_k * per_expert;
    return s;
}

std::string fingerprint_json(const Engine &e, std::string *err) {
    ModelSummary s = summarize(e);
    const Container &c = e.container();
    const Manifest &m = c.manifest();
    nlohmann::json j;
    j["family"] = s.family;
    j["tensor_prefix"] = m.tensor_prefix;
    j["trunk_formats"] = s.trunk_formats;
    // Format per tensor class: the embedding, the head, 2-D matrices and
    // 1-D vectors, each "A" or "A/B" when mixed (largest share first).
    std::map<std::string, std::map<std::string, uint64_t>> cls;
    const char *names[8] = {"F32", "F16", "Q8G", "Q4G", "?", "?", "?", "Q3G"};
    for (const TrunkEntry &t : m.trunk) {
        if (!m.tensor_prefix.empty() && t.name.compare(0, m.tensor_prefix.size(), m.tensor_prefix) != 0) continue;
        const std::string n = t.name.substr(m.tensor_prefix.size());
        std::string k = n == "model.embed_tokens.weight" ? "embed"
                        : n == "lm_head.weight"          ? "lm_head"
                        : t.shape.size() >= 2 && t.shape[0] > 1 ? "matrices"
                                                         : "vectors";
        cls[k][t.fmt >= 0 && t.fmt < 8 ? names[t.fmt] : "?"] += t.bytes > 0 ? (uint64_t)t.bytes : 1;
    }
    nlohmann::json jc = nlohmann::json::object();
    for (auto &[k, fm] : cls) {
        std::vector<std::pair<uint64_t, std::string>> v;
        for (auto &[f, b] : fm) v.push_back({b, f});
        std::sort(v.rbegin(), v.rend());
        std::string str;
        for (size_t i = 0; i < v.size(); i++) str += (i ? "/" : "") + v[i].second;
        jc[k] = str;
    }
    j["trunk_classes"] = jc;
    j["expert_quant"] = {{"fmt", s.expert_format},
                         {"stages", m.eq.stages},
                         {"entries", m.eq.entries},
                         {"index_bits", m.eq.index_bits}};
    nlohmann::json sha;
    for (const char *f : {"manifest.json", "codebooks.bin", "trunk.bin"}) {
        std::string hex;
        Status st = sha256_file(c.dir() + "/" + f, &hex);
        if (!st) {
            if (err) *err = st.message();
            return {};
        }
        sha[f] = hex;
    }
    j["sha256"] = sha;
    j["provenance"] = m.provenance_json.empty() ? nlohmann::json(nullptr) : nlohmann::json::parse(m.provenance_json);
    return j.dump();
}

}  // namespace sluice
