#include "common/checked_math.h"
#include "format/manifest.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace sluice {
namespace {

using json = nlohmann::json;

// Typed readers. A key that is absent or null takes its default; a key of
// the wrong JSON type is refused with its path, never defaulted silently
// (a config typo must not turn into a plausible but wrong model).
struct Reader {
    const std::string &where;
    std::string err;

    bool fail(const std::string &key, const std::string &what) {
        if (err.empty()) err = where + ": key '" + key + "' " + what;
        return false;
    }
    bool num(const json &o, const char *key, const std::string &path, double *v) {
        auto it = o.find(key);
        if (it == o.end() || it->is_null()) return true;
        if (!it->is_number()) return fail(path + key, "must be a number, got " + std::string(it->type_name()));
        double d = it->get<double>();
        if (!std::isfinite(d)) return fail(path + key, "is not finite");
        *v = d;
        return true;
    }
    // Integers: JSON numbers truncated toward zero (warp parses as double),
    // bounded to [lo, hi] so nothing downstream can be sized from garbage.
    bool integer(const json &o, const char *key, const std::string &path, int64_t lo, int64_t hi, int64_t *v) {
        double d = (double)*v;
        if (!num(o, key, path, &d)) return false;
        // A fractional count (experts: 0.5) would truncate to a value the
        // bounds below never saw as written; refuse it by name.
        if (d != std::trunc(d)) return fail(path + key, "must be an integer, got " + std::to_string(d));
        if (d < (double)lo || d > (double)hi)
            return fail(path + key, "is " + std::to_string(d) + ", outside [" + std::to_string(lo) + ", " +
                                        std::to_string(hi) + "]");
        *v = (int64_t)d;
        return true;
    }
    bool i32(const json &o, const char *key, const std::string &path, int64_t lo, int64_t hi, int *v) {
        int64_t t = *v;
        if (!integer(o, key, path, lo, hi, &t)) return false;
        *v = (int)t;
        return true;
    }
    bool f32(const json &o, const char *key, const std::string &path, float *v) {
        double d = *v;
        if (!num(o, key, path, &d)) return false;
        *v = (float)d;
        return true;
    }
    // A key that must be written out: absent or null is refused by name.
    bool required(const json &o, const char *key, const std::string &path) {
        auto it = o.find(key);
        if (it == o.end()) return fail(path + key, "is missing");
        if (it->is_null()) return fail(path + key, "is null");
        return true;
    }
    bool str(const json &o, const char *key, const std::string &path, std::string *v) {
        auto it = o.find(key);
        if (it == o.end() || it->is_null()) return true;
        if (!it->is_string()) return fail(path + key, "must be a string");
        *v = it->get<std::string>();
        return true;
    }
    static bool present(const json &o, const char *key) { return o.contains(key); }
};

constexpr int64_t kMaxDim = 1 << 20;

Status parse_rope(const json &c, Reader &r, RopeConfig *rope) {
    double theta = rope->theta;
    if (!r.num(c, "rope_theta", "config.", &theta)) return format_error(r.err);
    if (!(theta > 1.0)) return format_error(r.where + ": config.rope_theta must be > 1");
    rope->theta = theta;
    auto it = c.find("rope_scaling");
    if (it == c.end() || it->is_null()) return Status::ok();
    if (!it->is_object()) return format_error(r.where + ": config.rope_scaling must be an object or null");
    const json &rs = *it;
    if (rs.empty()) return Status::ok();
    std::string type;
    if (!r.str(rs, "type", "config.rope_scaling.", &type)) return format_error(r.err);
    if (type.empty() && !r.str(rs, "rope_type", "config.rope_scaling.", &type)) return format_error(r.err);
    if (type != "yarn")
        return unsupported(r.where + ": config.rope_scaling type '" + type +
                           "' is not implemented (only yarn is)");
    const std::string p = "config.rope_scaling.";
    if (!r.num(rs, "factor", p, &rope->factor) || !r.num(rs, "mscale", p, &rope->mscale) ||
        !r.num(rs, "mscale_all_dim", p, &rope->mscale_all_dim) ||
        !r.num(rs, "original_max_position_embeddings", p, &rope->original_max_pos) ||
        !r.num(rs, "beta_fast", p, &rope->beta_fast) || !r.num(rs, "beta_slow", p, &rope->beta_slow))
        return format_error(r.err);
    if (rope->factor > 1.0) {
        if (rope->mscale != rope->mscale_all_dim)
            return unsupported(r.where + ": config.rope_scaling has mscale != mscale_all_dim, which warp refuses "
                                         "and sluice does not implement");
        if (!(rope->original_max_pos >= 1) || !(rope->beta_fast > 0) || !(rope->beta_slow > 0))
            return format_error(r.where + ": config.rope_scaling has a non-positive length or beta");
        rope->yarn = true;
    }
    return Status::ok();
}

Status parse_config(const json &cfg_in, Reader &r, Manifest *m) {
    const json *cp = &cfg_in;
    // Accept a raw HF config too (FORMAT.md §2.2): text_config is the model.
    if (cfg_in.contains("text_config") && cfg_in["text_config"].is_object()) {
        cp = &cfg_in["text_config"];
        if (m->tensor_prefix.empty()) m->tensor_prefix = "language_model.";
    }
    const json &c = *cp;
    ModelConfig &mc = m->cfg;
    const std::string p = "config.";
    auto arch_of = [](const json &o) -> std::string {
        auto a = o.find("architectures");
        if (a != o.end() && a->is_array() && !a->empty() && (*a)[0].is_string()) return (*a)[0].get<std::string>();
        return {};
    };
    if (c.contains("_outer") && c["_outer"].is_object()) mc.arch_name = arch_of(c["_outer"]);
    if (mc.arch_name.empty()) mc.arch_name = arch_of(c);
    if (mc.arch_name.empty()) mc.arch_name = arch_of(cfg_in);
    if (!r.str(c, "model_type", p, &mc.model_type)) return format_error(r.err);

    bool ok = r.i32(c, "num_hidden_layers", p, 0, 128, &mc.n_layers) &&
              r.i32(c, "hidden_size", p, 0, kMaxDim, &mc.hidden) &&
              r.i32(c, "vocab_size", p, 0, 1 << 24, &mc.vocab) &&
              r.i32(c, "num_attention_heads", p, 0, 1 << 16, &mc.n_heads) &&
              r.f32(c, "rms_norm_eps", p, &mc.eps) && r.i32(c, "num_experts", p, 0, 1 << 20, &mc.n_experts) &&
              r.i32(c, "num_experts_per_token", p, 0, 64, &mc.top_k) &&
              r.i32(c, "moe_intermediate_size", p, 0, kMaxDim, &mc.moe_inter) &&
              r.i32(c, "intermediate_size", p, 0, kMaxDim, &mc.inter) &&
              r.i32(c, "num_shared_experts", p, 0, 64, &mc.n_shared) &&
              r.i32(c, "first_k_dense_replace", p, 0, 128, &mc.first_dense) &&
              r.f32(c, "routed_scaling_factor", p, &mc.routed_scaling) &&
              r.i32(c, "kv_lora_rank", p, 0, kMaxDim, &mc.kv_lora) &&
              r.i32(c, "q_lora_rank", p, 0, kMaxDim, &mc.q_lora) &&
              r.i32(c, "qk_nope_head_dim", p, 0, 1 << 16, &mc.d_nope) &&
              r.i32(c, "qk_rope_head_dim", p, 0, 1 << 16, &mc.d_rope) &&
              r.i32(c, "v_head_dim", p, 0, 1 << 16, &mc.d_v) &&
              r.i32(c, "routed_expert_hidden_size", p, 0, kMaxDim, &mc.r_lat) &&
              r.i32(c, "attn_res_block_size", p, 0, 1 << 16, &mc.attn_res_block) &&
              r.f32(c, "activation_situ_beta", p, &mc.situ_beta) &&
              r.f32(c, "activation_situ_linear_beta", p, &mc.situ_linear_beta);
    if (!ok) return format_error(r.err);
    // eos_token_id may be a list in some releases; the first id is the stop token.
    if (auto it = c.find("eos_token_id"); it != c.end() && it->is_array() && !it->empty() && (*it)[0].is_number()) {
        mc.eos_token_id = (*it)[0].get<int>();
    } else if (!r.i32(c, "eos_token_id", p, -1, 1 << 24, &mc.eos_token_id)) {
        return format_error(r.err);
    }
    if (auto it = c.find("bos_token_id"); it != c.end() && it->is_number_integer())
        mc.bos_token_id = it->get<int>();
    std::string act;
    if (!r.str(c, "hidden_act", p, &act)) return format_error(r.err);
    mc.situ = act == "situ";
    mc.renormalize = Reader::present(c, "moe_renormalize");
    mc.latent_norm = Reader::present(c, "latent_moe_use_norm");
    mc.mla_output_gate = Reader::present(c, "mla_use_output_gate");

    bool nope = false;
    if (auto it = c.find("mla_use_nope"); it != c.end()) {
        if (!it->is_boolean()) return format_error(r.where + ": key 'config.mla_use_nope' must be a boolean");
        nope = it->get<bool>();
    }
    mc.rope.enabled = !nope;
    SLUICE_TRY(parse_rope(c, r, &mc.rope));

    // Bounds (warp's "config sanity", FORMAT.md §2.2).
    auto bad = [&](const std::string &m) { return format_error(r.where + ": " + m); };
    if (mc.n_layers < 1) return bad("config.num_hidden_layers must be in [1, 128]");
    if (mc.hidden < 1) return bad("config.hidden_size must be in [1, 2^20]");
    if (mc.vocab < 1) return bad("config.vocab_size must be in [1, 2^24]");
    if (mc.n_heads < 1) return bad("config.num_attention_heads must be in [1, 65536]");
    if (!(mc.eps > 0.0f && mc.eps < 1.0f)) return bad("config.rms_norm_eps must be in (0, 1)");
    if (mc.first_dense > mc.n_layers) return bad("config.first_k_dense_replace exceeds num_hidden_layers");
    if (mc.n_experts > 0) {
        if (mc.top_k < 1 || mc.top_k > std::min(64, mc.n_experts))
            return bad("config.num_experts_per_token must be in [1, min(64, num_experts)]");
        if (mc.moe_inter < 1) return bad("config.moe_intermediate_size must be >= 1 with experts");
    }

    mc.is_kda.assign(mc.n_layers, false);
    if (auto it = c.find("linear_attn_config"); it != c.end() && !it->is_null()) {
        if (!it->is_object()) return bad("config.linear_attn_config must be an object");
        const json &la = *it;
        const std::string lp = "config.linear_attn_config.";
        if (!r.i32(la, "num_heads", lp, 0, 1 << 16, &mc.kda_heads) ||
            !r.i32(la, "head_dim", lp, 0, 4096, &mc.kda_dim) ||
            !r.i32(la, "short_conv_kernel_size", lp, 0, 64, &mc.conv_kernel) ||
            !r.f32(la, "gate_lower_bound", lp, &mc.gate_lower_bound))
            return format_error(r.err);
        mc.full_rank_gate = Reader::present(la, "use_full_rank_gate");
        if (auto kl = la.find("kda_layers"); kl != la.end() && !kl->is_null()) {
            if (!kl->is_array()) return bad("config.linear_attn_config.kda_layers must be an array");
            for (const auto &v : *kl) {
                if (!v.is_number_integer()) return bad("config.linear_attn_config.kda_layers holds a non-integer");
                int64_t l1 = v.get<int64_t>();
                if (l1 < 1 || l1 > mc.n_layers)
                    return bad("config.linear_attn_config.kda_layers holds " + std::to_string(l1) +
                               ", outside [1, num_hidden_layers]");
                mc.is_kda[(size_t)(l1 - 1)] = true;  // 1-based list (MODEL.md §1.3)
            }
        }
    }
    bool any_kda = false, any_mla = false, any_dense = false;
    for (int L = 0; L < mc.n_layers; L++) {
        (mc.is_kda[L] ? any_kda : any_mla) = true;
        if (!mc.is_moe_layer(L)) any_dense = true;
    }
    if (any_kda && (mc.kda_heads < 1 || mc.kda_dim < 1 || mc.conv_kernel < 1))
        return bad("a KDA layer exists but linear_attn_config num_heads/head_dim/short_conv_kernel_size < 1");
    if (any_kda && (int64_t)mc.kda_heads * mc.kda_dim > kMaxDim)
        return bad("linear_attn_config num_heads*head_dim is too large");
    if (any_mla) {
        if (mc.kv_lora < 1 || mc.d_nope + mc.d_rope < 1 || mc.d_v < 1)
            return bad("an MLA layer exists but kv_lora_rank, qk_nope+qk_rope or v_head_dim < 1");
        if ((int64_t)mc.n_heads * (mc.d_nope + mc.d_rope + mc.d_v) > 4 * kMaxDim)
            return bad("MLA heads x head dims is too large");
        if (mc.rope.enabled && (mc.d_rope % 2 != 0 || mc.d_rope / 2 > 64))
            return unsupported(r.where + ": rotary needs an even qk_rope_head_dim <= 128, got " +
                               std::to_string(mc.d_rope));
    }
    if (any_dense && mc.inter < 1) return bad("a dense layer exists but config.intermediate_size < 1");
    if (mc.situ && !(mc.situ_beta > 0)) return bad("config.activation_situ_beta must be > 0");
    return Status::ok();
}

Status parse_expert_quant(const json &root, Reader &r, Manifest *m) {
    auto it = root.find("expert_quant");
    if (it == root.end() || it->is_null()) return Status::ok();
    if (!it->is_object()) return format_error(r.where + ": expert_quant must be an object");
    const json &e = *it;
    ExpertQuant &q = m->eq;
    const std::string p = "expert_quant.";
    if (!r.str(e, "fmt", p, &q.fmt) || !r.i32(e, "stages", p, 1, 8, &q.stages) ||
        !r.i32(e, "vec_dim", p, 1, 64, &q.vec_dim) || !r.i32(e, "entries", p, 1, 256, &q.entries) ||
        !r.i32(e, "index_block", p, 0, 1 << 16, &q.index_block) || !r.i32(e, "index_bits", p, 1, 64, &q.index_bits))
        return format_error(r.err);
    if (q.index_block != 64)
        return format_error(r.where + ": expert_quant.index_block is " + std::to_string(q.index_block) +
                            "; only 64 is a valid WASTE v0 layout");
    if (q.vec_dim != 8) return unsupported(r.where + ": expert_quant.vec_dim " + std::to_string(q.vec_dim) +
                                           " is not implemented (only 8)");
    if (!(q.index_bits == 8 || (q.index_bits == 6 && q.stages == 4 && q.entries == 64)))
        return format_error(r.where + ": expert_quant.index_bits " + std::to_string(q.index_bits) +
                            " is invalid (8, or 6 with stages 4 and entries 64)");
    return Status::ok();
}

Status parse_trunk(const json &root, Reader &r, Manifest *m) {
    auto it = root.find("trunk");
    if (it == root.end()) return format_error(r.where + ": key 'trunk' is missing");
    if (!it->is_array()) return format_error(r.where + ": key 'trunk' must be an array");
    size_t i = 0;
    for (const auto &t : *it) {
        std::string p = "trunk[" + std::to_string(i++) + "].";
        if (!t.is_object()) return format_error(r.where + ": " + p + " must be an object");
        TrunkEntry e;
        if (!r.str(t, "name", p, &e.name)) return format_error(r.err);
        if (e.name.empty()) return format_error(r.where + ": " + p + "name is missing");
        p = "trunk '" + e.name + "' ";
        int64_t fmt = -1, off = -1, group = 128, scale_off = -1, bytes = -1;
        const int64_t kMaxOff = (int64_t)1 << 53;
        if (!r.integer(t, "fmt", p, 0, 255, &fmt) || !r.integer(t, "off", p, 0, kMaxOff, &off) ||
            !r.integer(t, "group", p, 1, 1 << 20, &group) || !r.integer(t, "scale_off", p, -1, kMaxOff, &scale_off) ||
            !r.integer(t, "bytes", p, -1, kMaxOff, &bytes))
            return format_error(r.err);
        if (fmt < 0 || off < 0) return format_error(r.where + ": " + p + "lacks fmt or off");
        e.fmt = (int)fmt;
        e.off = (uint64_t)off;
        e.group = group;
        e.has_scale_off = scale_off >= 0;
        e.scale_off = e.has_scale_off ? (uint64_t)scale_off : 0;
        e.bytes = bytes;
        auto sh = t.find("shape");
        if (sh == t.end() || !sh->is_array() || sh->empty() || sh->size() > 4)
            return format_error(r.where + ": " + p + "shape must be an array of 1-4 dimensions");
        int64_t numel = 1;
        for (const auto &d : *sh) {
            if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > (1 << 26))
                return format_error(r.where + ": " + p + "shape has a dimension outside [1, 2^26]");
            e.shape.push_back(d.get<int64_t>());
            // Checked at every step (four factors of 2^26 overflow int64);
            // 2^40 elements bounds every size computed from the shape later
            // (memory plan, row geometry).
            if (!checked_mul<int64_t>(numel, d.get<int64_t>(), &numel) || numel > ((int64_t)1 << 40))
                return format_error(r.where + ": " + p + "shape has more than 2^40 elements");
        }
        m->trunk.push_back(std::move(e));
    }
    return Status::ok();
}

Status parse_layers(const json &root, Reader &r, Manifest *m) {
    auto it = root.find("layers");
    if (it == root.end() || it->is_null()) return Status::ok();
    if (!it->is_object()) return format_error(r.where + ": key 'layers' must be an object");
    for (const auto &[key, v] : it->items()) {
        char *end = nullptr;
        long L = std::strtol(key.c_str(), &end, 10);
        if (key.empty() || *end != '\0' || L < 0 || L > 100000)
            return format_error(r.where + ": layers key '" + key + "' is not a layer index");
        if (L >= m->cfg.n_layers) continue;  // never looked at (FORMAT.md §2.4)
        std::string p = "layers." + key + ".";
        if (!v.is_object()) return format_error(r.where + ": " + p + " must be an object");
        BankEntry b;
        // experts and bytes size every later division and allocation: they
        // must be written, integral and positive before anything uses them.
        if (!r.required(v, "file", p) || !r.required(v, "experts", p) || !r.required(v, "bytes", p) ||
            !r.str(v, "file", p, &b.file) || !r.integer(v, "experts", p, 1, 1 << 20, &b.experts) ||
            !r.integer(v, "bytes", p, 1, (int64_t)1 << 50, &b.bytes) ||
            !r.integer(v, "codebook_base", p, 0, 1 << 30, &b.codebook_base))
            return format_error(r.err);
        // The file name is joined to the container path: refuse anything
        // that could escape the directory.
        if (b.file.empty() || b.file.find('/') != std::string::npos || b.file == "." || b.file == "..")
            return format_error(r.where + ": " + p + "file must be a plain file name");
        m->banks[(int)L] = b;
    }
    return Status::ok();
}

}  // namespace

Status parse_manifest(const std::string &text, const std::string &where, Manifest *out) {
    json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded()) return io_error(where + ": not valid JSON");
    if (!root.is_object()) return format_error(where + ": top level must be a JSON object");
    Reader r{where, {}};
    Manifest m;
    auto fv = root.find("format_version");
    if (fv == root.end()) return format_error(where + ": key 'format_version' is missing");
    if (!fv->is_number_integer() || fv->get<int64_t>() != 0)
        return format_error(where + ": key 'format_version' must be 0, got " + fv->dump());
    if (!r.str(root, "tensor_prefix", "", &m.tensor_prefix) || !r.str(root, "arch", "", &m.arch))
        return format_error(r.err);
    auto cfg = root.find("config");
    if (cfg == root.end()) return format_error(where + ": key 'config' is missing");
    if (!cfg->is_object()) return format_error(where + ": key 'config' must be an object");
    SLUICE_TRY(parse_config(*cfg, r, &m));
    SLUICE_TRY(parse_expert_quant(root, r, &m));
    SLUICE_TRY(parse_trunk(root, r, &m));
    SLUICE_TRY(parse_layers(root, r, &m));
    // The bank index is checked as a whole here, before any caller (the
    // memory plan, `sluice plan` without a container) divides by it; the
    // codebook bound is checked again by Container::open with the real count.
    SLUICE_TRY(validate_banks(m, (int64_t)1 << 40, where));
    if (auto pv = root.find("provenance"); pv != root.end() && pv->is_object()) m.provenance_json = pv->dump();
    if (auto in = root.find("integrity"); in != root.end() && !in->is_null()) {
        if (!in->is_object()) return format_error(where + ": key 'integrity' must be an object");
        for (auto [key, dst] : {std::pair{"trunk_sha256", &m.trunk_sha256}, std::pair{"codebooks_sha256", &m.codebooks_sha256}}) {
            if (!r.str(*in, key, "integrity.", dst)) return format_error(r.err);
            if (!dst->empty() && (dst->size() != 64 || dst->find_first_not_of("0123456789abcdef") != std::string::npos))
                return format_error(where + ": key 'integrity." + key + "' is not 64 lowercase hex digits");
        }
    }
    *out = std::move(m);
    return Status::ok();
}

Status validate_banks(const Manifest &m, int64_t n_books, const std::string &where) {
    const ModelConfig &c = m.cfg;
    for (const auto &[L, b] : m.banks) {
        std::string p = where + ": layers." + std::to_string(L);
        if (!c.is_moe_layer(L)) return format_error(p + " is a bank for a dense layer");
        if (b.experts != c.n_experts)
            return format_error(p + ".experts is " + std::to_string(b.experts) + ", config.num_experts is " +
                                std::to_string(c.n_experts));
        if (b.bytes <= 0 || b.bytes % b.experts != 0)
            return format_error(p + ".bytes is not a positive multiple of experts");
        if (b.experts <= 0) return format_error(p + ".experts must be >= 1");
        if ((b.bytes / b.experts) % 4096 != 0)
            return format_error(p + ": record stride " + std::to_string(b.bytes / b.experts) +
                                " is not a multiple of 4096");
        if (b.codebook_base + 3 * (int64_t)m.eq.stages > n_books)
            return format_error(p + ".codebook_base " + std::to_string(b.codebook_base) + " + 3*stages exceeds the " +
                                std::to_string(n_books) + " codebooks in codebooks.bin");
    }
    for (int L = 0; L < c.n_layers; L++)
        if (c.is_moe_layer(L) && !m.banks.count(L))
            return format_error(where + ": MoE layer " + std::to_string(L) + " has no entry in 'layers'");
    return Status::ok();
}

}  // namespace sluice
