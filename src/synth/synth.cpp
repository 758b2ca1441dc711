#include "common/checked_file.h"
#include "synth/synth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "convert/numeric.h"
#include "convert/trunk.h"
#include "convert/vq.h"

namespace sluice {
namespace {

namespace cv = sluice::convert;

// splitmix64: a fixed, portable stream per (seed, stream id), so any
// thread schedule writes the same bytes.
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed, uint64_t stream) : s(seed * 0x9E3779B97F4A7C15ull ^ (stream + 0x632BE59BD9B4E019ull)) {}
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // Uniform in (-a, a): variance a²/3.
    float uni(float a) { return (float)((double)(next() >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0) * a; }
};

struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    int fmt = 0;        // 0 F32, 2 Q8G, 3 Q4G, 7 Q3G
    float amp = 0.0f;   // uniform amplitude of the random weights
    float fill = 0.0f;  // constant value (norm weights) when amp == 0
    int kind = 0;       // 0 plain, 1 A_log
    int64_t used = -1;  // A_log: values past this many are padding (K3 pads H to D with zeros)
    uint64_t off = 0, scale_off = 0, bytes = 0;
};

Status pwrite_all(int fd, const void *p, size_t n, uint64_t off, const std::string &path) {
    const uint8_t *b = static_cast<const uint8_t *>(p);
    while (n > 0) {
        ssize_t w = ::pwrite(fd, b, n, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return io_error(path + ": write failed: " + std::strerror(errno));
        b += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return Status::ok();
}

std::vector<Tensor> plan_trunk(const SynthOptions &o, const std::vector<bool> &is_kda) {
    std::vector<Tensor> t;
    const int64_t d = o.hidden, C = (int64_t)o.kda_heads * o.kda_dim, D = o.kda_dim;
    const int mat = o.trunk_bits == 8 ? 2 : (o.trunk_bits == 3 ? 7 : 3);
    const std::string X = o.k3 ? "language_model." : "";
    auto m = [&](const std::string &n, int64_t r, int64_t c, float gain = 1.0f) {
        t.push_back({X + n, {r, c}, mat, gain * std::sqrt(3.0f / (float)c)});
    };
    auto v = [&](const std::string &n, int64_t len, float fill) { t.push_back({X + n, {len}, 0, 0.0f, fill}); };
    // AttnRes projections are [1, d] vectors; amplitude sqrt(3/d) keeps the
    // depth-softmax scores near 1, so the mix neither collapses nor saturates.
    auto res = [&](const std::string &n) { t.push_back({X + n, {1, d}, 0, std::sqrt(3.0f / (float)d)}); };
    t.push_back({X + "model.embed_tokens.weight", {o.vocab, d}, 2, std::sqrt(3.0f)});
    t.push_back({X + "lm_head.weight", {o.vocab, d}, 2, std::sqrt(3.0f / (float)d)});
    v("model.norm.weight", d, 1.0f);
    if (o.attn_res_block > 0) {
        v("model.output_attn_res_norm.weight", d, 1.0f);
        res("model.output_attn_res_proj.weight");
    }
    const int64_t sh = (int64_t)o.moe_inter * std::max(1, o.shared);
    for (int L = 0; L < o.layers; L++) {
        const std::string P = "model.layers." + std::to_string(L) + ".";
        v(P + "input_layernorm.weight", d, 1.0f);
        v(P + "post_attention_layernorm.weight", d, 1.0f);
        if (o.attn_res_block > 0) {
            v(P + "self_attention_res_norm.weight", d, 1.0f);
            res(P + "self_attention_res_proj.weight");
            v(P + "mlp_res_norm.weight", d, 1.0f);
            res(P + "mlp_res_proj.weight");
        }
        const std::string A = P + "self_attn.";
        if (is_kda[(size_t)L]) {
            m(A + "q_proj.weight", C, d);
            m(A + "k_proj.weight", C, d);
            m(A + "v_proj.weight", C, d);
            for (const char *c : {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"})
                t.push_back({X + A + c, {C, 1, 4}, 0, 0.5f});
            m(A + "f_a_proj.weight", D, d);
            m(A + "f_b_proj.weight", C, D);
            m(A + "b_proj.weight", o.kda_heads, d);
            if (o.k3)  // K3 stores A_log padded to D; only the first H values are read
                t.push_back({X + A + "A_log", {1, 1, 1, std::max<int64_t>(D, o.kda_heads)}, 0, 0.0f, 0.0f, 1, o.kda_heads});
            else
                t.push_back({X + A + "A_log", {1, 1, o.kda_heads, 1}, 0, 0.0f, 0.0f, 1});
            v(A + "dt_bias", C, 0.0f);
            if (o.k3) {
                m(A + "g_proj.weight", C, d);
            } else {
                m(A + "g_a_proj.weight", D, d);
                m(A + "g_b_proj.weight", C, D);
            }
            v(A + "o_norm.weight", D, 1.0f);
            m(A + "o_proj.weight", d, C, 0.5f);
        } else {
            const int64_t qw = (int64_t)o.heads * (o.d_nope + o.d_rope);
            if (o.q_lora > 0) {
                m(A + "q_a_proj.weight", o.q_lora, d);
                v(A + "q_a_layernorm.weight", o.q_lora, 1.0f);
                m(A + "q_b_proj.weight", qw, o.q_lora);
            } else {
                m(A + "q_proj.weight", qw, d);
            }
            m(A + "kv_a_proj_with_mqa.weight", o.kv_lora + o.d_rope, d);
            v(A + "kv_a_layernorm.weight", o.kv_lora, 1.0f);
            m(A + "kv_b_proj.weight", (int64_t)o.heads * (o.d_nope + o.d_v), o.kv_lora);
            if (o.k3) m(A + "g_proj.weight", (int64_t)o.heads * o.d_v, d);
            m(A + "o_proj.weight", d, (int64_t)o.heads * o.d_v, 0.5f);
        }
        if (L >= o.first_dense && o.experts > 0) {
            const std::string M = P + "block_sparse_moe.";
            m(M + "gate.weight", o.experts, d);
            v(M + "gate.e_score_correction_bias", o.experts, 0.0f);
            m(M + "shared_experts.gate_proj.weight", sh, d);
            m(M + "shared_experts.up_proj.weight", sh, d);
            m(M + "shared_experts.down_proj.weight", d, sh, 0.5f);
            if (o.r_lat > 0) {
                m(M + "routed_expert_down_proj.weight", o.r_lat, d);
                m(M + "routed_expert_up_proj.weight", d, o.r_lat, 0.5f);
                v(M + "routed_expert_norm.weight", o.r_lat, 1.0f);
            }
        } else {
            m(P + "mlp.gate_proj.weight", o.inter, d);
            m(P + "mlp.up_proj.weight", o.inter, d);
            m(P + "mlp.down_proj.weight", d, o.inter, 0.5f);
        }
    }
    std::sort(t.begin(), t.end(), [](const Tensor &a, const Tensor &b) { return a.name < b.name; });
    return t;
}

Status write_tensor(int fd, const std::string &path, const Tensor &t, uint64_t seed, uint64_t stream) {
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < t.shape.size(); i++) rows *= t.shape[i];
    const int64_t N = t.shape.back();
    Rng rng(seed, stream);
    if (t.fmt == 0) {
        std::vector<float> x((size_t)(rows * N));
        for (size_t i = 0; i < x.size(); i++) {
            if (t.kind == 1) {
                const float a = std::log(1.0f + 15.0f * (0.5f + 0.5f * rng.uni(1.0f)));  // A_log: a in [1, 16]
                x[i] = t.used < 0 || (int64_t)i < t.used ? a : 0.0f;
            } else {
                x[i] = t.amp > 0 ? rng.uni(t.amp) : t.fill;
            }
        }
        return pwrite_all(fd, x.data(), x.size() * 4, t.off, path);
    }
    const int64_t n = (N + 127) / 128 * 128, ng = n / 128;
    const uint64_t rb = cv::trunk_row_bytes(t.fmt, n);
    // Row blocks keep memory bounded: the 163840-row embedding is 1.5 GB as f32.
    const int64_t block = std::max<int64_t>(1, (16 << 20) / (N * 4));
    std::vector<float> x;
    std::vector<uint8_t> pay;
    std::vector<uint16_t> sc;
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
        const int64_t nr = std::min(block, rows - r0);
        x.resize((size_t)(nr * N));
        for (auto &e : x) e = rng.uni(t.amp);
        pay.assign((size_t)(nr * rb), 0);
        sc.assign((size_t)(nr * ng), 0);
        cv::quantize_rows(x.data(), nr, N, t.fmt, pay.data(), sc.data());
        SLUICE_TRY(pwrite_all(fd, pay.data(), pay.size(), t.off + (uint64_t)r0 * rb, path));
        SLUICE_TRY(pwrite_all(fd, sc.data(), sc.size() * 2, t.scale_off + (uint64_t)(r0 * ng) * 2, path));
    }
    return Status::ok();
}

// The layer schedule and the trunk's byte layout: shared by the writer and
// by synth_sizes, so the printed sizes are the written ones.
struct Layout {
    std::vector<bool> is_kda;
    std::vector<Tensor> trunk;
    std::vector<int> moe;
    cv::RecordGeom g;
    uint64_t trunk_bytes = 0;
};

Layout layout(const SynthOptions &o) {
    Layout l;
    l.is_kda.resize((size_t)o.layers);
    for (int L = 0; L < o.layers; L++) {
        const int one = L + 1;
        l.is_kda[(size_t)L] = o.kda_layers.empty() ? !(one % o.mla_every == 0 || one == o.layers)
                                                   : std::find(o.kda_layers.begin(), o.kda_layers.end(), one) != o.kda_layers.end();
    }
    l.trunk = plan_trunk(o, l.is_kda);
    uint64_t off = 0;
    for (Tensor &t : l.trunk) {
        int64_t rows = 1;
        for (size_t i = 0; i + 1 < t.shape.size(); i++) rows *= t.shape[i];
        const int64_t N = t.shape.back();
        t.off = off;
        if (t.fmt == 0) {
            t.bytes = (uint64_t)(rows * N) * 4;
        } else {
            const int64_t n = (N + 127) / 128 * 128;
            t.scale_off = off + (uint64_t)rows * cv::trunk_row_bytes(t.fmt, n);
            t.bytes = t.scale_off - off + (uint64_t)(rows * (n / 128)) * 2;
        }
        off += t.bytes;
    }
    l.trunk_bytes = off;
    // Latent MoE: the routed experts' input width is r_lat, not the hidden.
    l.g = cv::record_geometry(o.moe_inter, o.r_lat > 0 ? o.r_lat : o.hidden, o.stages, o.index_bits);
    for (int L = o.first_dense; L < o.layers && o.experts > 0; L++) l.moe.push_back(L);
    return l;
}

// manifest.json for a shape: what run_synth commits last, and what `sluice
// plan --config` parses to plan a model it has no container for.
std::string manifest_text(const SynthOptions &o, const Layout &lay) {
    const std::vector<bool> &is_kda = lay.is_kda;
    const std::vector<Tensor> &trunk = lay.trunk;
    const std::vector<int> &moe = lay.moe;
    const cv::RecordGeom &g = lay.g;
    const int E = o.index_bits == 6 ? 64 : 256, S = o.stages;
    nlohmann::json kda_layers = nlohmann::json::array(), full_layers = nlohmann::json::array();
    for (int L = 0; L < o.layers; L++) (is_kda[(size_t)L] ? kda_layers : full_layers).push_back(L + 1);
    nlohmann::ordered_json m;
    m["format_version"] = 0;
    m["arch"] = "kimi_linear";
    m["tensor_prefix"] = o.k3 ? "language_model." : "";
    m["config"] = {{"model_type", "kimi_linear"},
                   {"architectures", {"KimiLinearForCausalLM"}},
                   {"hidden_size", o.hidden},
                   {"num_hidden_layers", o.layers},
                   {"vocab_size", o.vocab},
                   {"num_attention_heads", o.heads},
                   {"intermediate_size", o.inter},
                   {"moe_intermediate_size", o.moe_inter},
                   {"num_experts", o.experts},
                   {"num_experts_per_token", o.top_k},
                   {"num_shared_experts", o.shared},
                   {"first_k_dense_replace", o.first_dense},
                   {"routed_scaling_factor", 2.446},
                   {"moe_renormalize", true},
                   {"kv_lora_rank", o.kv_lora},
                   {"q_lora_rank", o.q_lora > 0 ? nlohmann::ordered_json(o.q_lora) : nlohmann::ordered_json()},
                   {"qk_nope_head_dim", o.d_nope},
                   {"qk_rope_head_dim", o.d_rope},
                   {"v_head_dim", o.d_v},
                   {"mla_use_nope", true},
                   {"rms_norm_eps", 1e-5},
                   {"eos_token_id", 1},
                   {"linear_attn_config",
                    {{"num_heads", o.kda_heads}, {"head_dim", o.kda_dim}, {"short_conv_kernel_size", 4},
                     {"kda_layers", kda_layers}}}};
    if (o.k3) {
        // K3's text config as the converter flattens it (MODEL.md §1.1, §12.2).
        auto &c = m["config"];
        c["routed_scaling_factor"] = 1.0;
        c["q_lora_rank"] = o.q_lora;
        c["mla_use_output_gate"] = true;
        c["hidden_act"] = "situ";
        c["activation_situ_beta"] = 4.0;
        c["activation_situ_linear_beta"] = 25.0;
        c["routed_expert_hidden_size"] = o.r_lat;
        c["latent_moe_use_norm"] = true;
        c["attn_res_block_size"] = o.attn_res_block;
        c["linear_attn_config"]["full_attn_layers"] = full_layers;
        c["linear_attn_config"]["use_full_rank_gate"] = true;
        c["linear_attn_config"]["gate_lower_bound"] = -5.0;
        c["_outer"] = {{"architectures", {"KimiK3ForConditionalGeneration"}}};
    }
    m["expert_quant"] = {{"fmt", o.index_bits == 6 ? "VQ4P" : (S == 2 ? "VQ2R" : "VQ3R")},
                         {"stages", S},
                         {"vec_dim", 8},
                         {"entries", E},
                         {"index_block", 64},
                         {"index_bits", o.index_bits},
                         {"bits_per_weight", (double)S * o.index_bits / 8.0}};
    nlohmann::ordered_json layers = nlohmann::ordered_json::object();
    for (size_t j = 0; j < moe.size(); j++)
        layers[std::to_string(moe[j])] = {{"file", "experts-L" + std::to_string(moe[j]) + ".bin"},
                                          {"experts", o.experts},
                                          {"bytes", (uint64_t)o.experts * g.stride},
                                          {"codebook_base", (int)(j * 3 * S)}};
    m["layers"] = layers;
    nlohmann::ordered_json tr = nlohmann::ordered_json::array();
    for (const Tensor &t : trunk) {
        nlohmann::ordered_json e = {{"name", t.name}, {"fmt", t.fmt}, {"off", t.off}, {"shape", t.shape}};
        if (t.fmt != 0) {
            e["group"] = 128;
            e["scale_off"] = t.scale_off;
        }
        e["bytes"] = t.bytes;
        tr.push_back(e);
    }
    m["trunk"] = tr;
    m["provenance"] = {{"converter", "sluice synth"}, {"seed", o.seed}, {"trunk_bits", o.trunk_bits}};
    if (o.k3) m["provenance"]["family"] = "k3";
    return m.dump(1);
}

Status check_shape(const SynthOptions &o) {
    if (o.out.empty()) return arg_error("synth: --out is required");
    if (o.layers < 1 || o.layers > 128 || o.hidden < 8 || o.hidden % 8 || o.vocab < 1 || o.experts < 0 ||
        o.top_k < 1 || o.top_k > std::max(1, o.experts) || o.moe_inter % 8 || o.first_dense > o.layers)
        return arg_error("synth: shape out of range (hidden and moe_inter must be multiples of 8)");
    if (!(o.index_bits == 8 || (o.index_bits == 6 && o.stages == 4)))
        return arg_error("synth: index_bits 6 needs stages 4 (VQ4P)");
    if (o.r_lat < 0 || o.r_lat % 8 || o.q_lora < 0 || o.attn_res_block < 0)
        return arg_error("synth: r_lat must be a non-negative multiple of 8; q_lora and attn_res_block non-negative");
    if (!o.k3 && (o.r_lat || o.attn_res_block))
        return arg_error("synth: r_lat and attn_res_block are K3 features (--family k3)");
    for (int k : o.kda_layers)
        if (k < 1 || k > o.layers) return arg_error("synth: kda layer " + std::to_string(k) + " is not in 1.." + std::to_string(o.layers));
    return Status::ok();
}

}  // namespace

SynthOptions k3_shape() {
    SynthOptions o;
    o.k3 = true;
    o.layers = 93;  // 1-based 4, 8, ..., 92 and 93 are MLA: 24 MLA, 69 KDA, as K3
    o.mla_every = 4;
    o.first_dense = 1;
    o.hidden = 2048;
    o.heads = 32;
    o.kda_heads = 32;
    o.kda_dim = 128;
    o.kv_lora = 512;
    o.q_lora = 1536;
    o.d_nope = 128;
    o.d_rope = 64;
    o.d_v = 128;
    o.vocab = 163840;
    o.inter = 9216;
    o.experts = 32;
    o.top_k = 16;
    o.moe_inter = 3072;
    o.r_lat = 3584;
    o.shared = 2;
    o.attn_res_block = 12;
    return o;
}

std::string synth_manifest(const SynthOptions &o) { return manifest_text(o, layout(o)); }

SynthSizes synth_sizes(const SynthOptions &o) {
    const Layout l = layout(o);
    SynthSizes z;
    z.trunk_bytes = l.trunk_bytes;
    z.record_bytes = l.g.stride;
    z.moe_layers = (int)l.moe.size();
    z.expert_bytes = (uint64_t)z.moe_layers * (uint64_t)o.experts * l.g.stride;
    const int E = o.index_bits == 6 ? 64 : 256;
    z.codebook_bytes = (uint64_t)z.moe_layers * 3 * (uint64_t)o.stages * cv::codebook_record(0, std::vector<float>((size_t)E * 8), E).size();
    for (bool k : l.is_kda) (k ? z.kda_layers : z.mla_layers)++;
    z.total = z.trunk_bytes + z.expert_bytes + z.codebook_bytes;
    return z;
}

std::string describe_synth(const SynthOptions &o) {
    const SynthSizes z = synth_sizes(o);
    auto two = [](double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2f", v);
        return std::string(buf);
    };
    auto gb = [&](uint64_t b) { return two((double)b / 1e9); };
    std::string s;
    s += std::string(o.k3 ? "Kimi K3" : "Kimi-Linear") + " shape: " + std::to_string(o.layers) + " layers (" +
         std::to_string(z.kda_layers) + " KDA, " + std::to_string(z.mla_layers) + " MLA, " + std::to_string(z.moe_layers) +
         " MoE), hidden " + std::to_string(o.hidden) + ", vocab " + std::to_string(o.vocab) + "\n";
    s += "  experts: " + std::to_string(o.experts) + " per layer, top-" + std::to_string(o.top_k) + ", " +
         std::to_string(o.shared) + " shared, I " + std::to_string(o.moe_inter) +
         (o.r_lat > 0 ? ", latent r_lat " + std::to_string(o.r_lat) : std::string()) + ", record " +
         two((double)z.record_bytes / 1048576.0) + " MiB\n";
    if (o.k3)
        s += "  K3 features: AttnRes every " + std::to_string(o.attn_res_block) + " layers, SiTU, q_lora " +
             std::to_string(o.q_lora) + ", gated MLA output, full-rank KDA gate with bounded decay\n";
    s += "  sizes: trunk " + gb(z.trunk_bytes) + " GB, experts " + gb(z.expert_bytes) + " GB, total " + gb(z.total) +
         " GB; a cold token reads " + gb((uint64_t)z.moe_layers * (uint64_t)o.top_k * z.record_bytes) + " GB\n";
    if (o.k3)
        s += "  why: the expert records are K3's own (r_lat 3584 -> I 3072), so per-token expert I/O and compute\n"
             "  are the real model's; the trunk is narrowed from 7168 to the hidden above (K3's 27 GB trunk does\n"
             "  not fit a 24 GB machine with room for a cache) and the experts per layer cut from 896 so the\n"
             "  container fits the disk. Routers, shared experts and latent projections follow the hidden.\n";
    return s;
}

Status run_synth(const SynthOptions &o, const SynthProgress &progress) {
    SLUICE_TRY(check_shape(o));
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(o.out, ec);
    if (ec) return io_error(o.out + ": cannot create: " + ec.message());
    fs::remove(o.out + "/manifest.json", ec);  // a rerun is incomplete until its manifest is written

    Layout lay = layout(o);
    {
        // Refuse before writing rather than fill the disk: files being
        // overwritten count as free.
        const SynthSizes z = synth_sizes(o);
        uint64_t existing = 0;
        for (auto &e : fs::directory_iterator(o.out, ec))
            if (e.is_regular_file(ec)) existing += e.file_size(ec);
        const fs::space_info sp = fs::space(o.out, ec);
        if (!ec && sp.available + existing < z.total)
            return io_error(o.out + ": needs " + std::to_string(z.total / 1000000) + " MB, only " +
                            std::to_string((sp.available + existing) / 1000000) + " MB free");
    }
    std::vector<Tensor> &trunk = lay.trunk;
    const int E = o.index_bits == 6 ? 64 : 256, S = o.stages;
    const cv::RecordGeom g = lay.g;
    const std::vector<int> &moe = lay.moe;

    // Work items: every trunk tensor, then every (layer, expert-range).
    std::atomic<size_t> next{0};
    std::mutex mu;
    Status first_error;
    const std::string tpath = o.out + "/trunk.bin";
    // The data files are written in place (the manifest, renamed in last,
    // is what makes the folder a container); never through a link, a FIFO
    // or a device at their names (common/checked_file.h).
    int tfd = -1;
    SLUICE_TRY(create_output_in_place(tpath, &tfd));
    std::vector<int> bank_fd(moe.size(), -1);
    for (size_t i = 0; i < moe.size(); i++) {
        const std::string p = o.out + "/experts-L" + std::to_string(moe[i]) + ".bin";
        if (Status cs = create_output_in_place(p, &bank_fd[i]); !cs && first_error.is_ok()) first_error = cs;
    }
    const size_t n_items = trunk.size() + moe.size() * (size_t)((o.experts + 15) / 16);
    uint64_t done_bytes = 0;
    const uint64_t total_bytes = lay.trunk_bytes + (uint64_t)moe.size() * (uint64_t)o.experts * g.stride;
    auto worker = [&] {
        std::vector<uint8_t> rec(g.stride);
        std::vector<uint8_t> idx[3];
        std::vector<uint16_t> scl[3];
        for (;;) {
            const size_t i = next++;
            if (i >= n_items) return;
            {
                std::lock_guard<std::mutex> lk(mu);
                if (!first_error.is_ok()) return;
            }
            Status st;
            if (i < trunk.size()) {
                st = write_tensor(tfd, tpath, trunk[i], o.seed, i);
            } else {
                const size_t j = i - trunk.size(), per = (size_t)((o.experts + 15) / 16);
                const int L = moe[j / per];
                const int e0 = (int)(j % per) * 16, e1 = std::min(o.experts, e0 + 16);
                const std::string p = o.out + "/experts-L" + std::to_string(L) + ".bin";
                for (int e = e0; e < e1 && st.is_ok(); e++) {
                    Rng rng(o.seed ^ 0xE0E0E0E0ull, ((uint64_t)L << 32) | (uint64_t)e);
                    for (int k = 0; k < 3; k++) {
                        const int64_t rows = g.rows[k], cols = g.cols[k];
                        idx[k].resize((size_t)(rows * (cols / 8) * S));
                        // E is 256 or 64: eight codes per draw, masked.
                        for (size_t q = 0; q < idx[k].size(); q += 8) {
                            uint64_t w = rng.next();
                            for (size_t b = 0; b < 8 && q + b < idx[k].size(); b++, w >>= 8)
                                idx[k][q + b] = (uint8_t)(w & (uint64_t)(E - 1));
                        }
                        scl[k].assign((size_t)rows, cv::f32_to_f16(1.0f / std::sqrt((float)cols)));
                    }
                    const uint8_t *ip[3] = {idx[0].data(), idx[1].data(), idx[2].data()};
                    const uint16_t *sp[3] = {scl[0].data(), scl[1].data(), scl[2].data()};
                    const int cb = (int)(std::find(moe.begin(), moe.end(), L) - moe.begin()) * 3 * S;
                    std::fill(rec.begin(), rec.end(), 0);
                    cv::build_record(g, L, e, cb, ip, sp, rec.data());
                    st = pwrite_all(bank_fd[j / per], rec.data(), rec.size(), (uint64_t)e * g.stride, p);
                }
                // Tens of GB of dirty pages would push everyone else's page
                // cache out (and stall the machine at writeback): flush this
                // range and drop it. Bytes and order are unaffected.
                if (st.is_ok()) {
                    const off_t r0 = (off_t)((uint64_t)e0 * g.stride), rn = (off_t)((uint64_t)(e1 - e0) * g.stride);
                    ::sync_file_range(bank_fd[j / per], r0, rn,
                                      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
                    ::posix_fadvise(bank_fd[j / per], r0, rn, POSIX_FADV_DONTNEED);
                }
            }
            uint64_t item_bytes = 0;
            if (i < trunk.size()) {
                item_bytes = trunk[i].bytes;
            } else {
                const size_t per = (size_t)((o.experts + 15) / 16);
                const int e0 = (int)((i - trunk.size()) % per) * 16;
                item_bytes = (uint64_t)(std::min(o.experts, e0 + 16) - e0) * g.stride;
            }
            std::lock_guard<std::mutex> lk(mu);
            if (!st.is_ok() && first_error.is_ok()) first_error = st;
            done_bytes += item_bytes;
            if (progress) progress("writing", total_bytes ? (double)done_bytes / (double)total_bytes : 1.0);
        }
    };
    std::vector<std::thread> th;
    for (int t = 0; t < std::max(1, o.jobs); t++) th.emplace_back(worker);
    for (auto &t : th) t.join();
    ::close(tfd);
    for (int fd : bank_fd)
        if (fd >= 0) ::close(fd);
    SLUICE_TRY(first_error);

    // Codebooks: 3·S books per MoE layer; stage s scaled by 2^-s like a
    // residual quantizer's shrinking refinements.
    {
        std::string cb;
        for (size_t j = 0; j < moe.size(); j++)
            for (int k = 0; k < 3; k++)
                for (int s = 0; s < S; s++) {
                    Rng rng(o.seed ^ 0xC0DEB00Cull, (uint64_t)(j * 3 * S + k * S + s));
                    std::vector<float> ent((size_t)E * 8);
                    for (auto &x : ent) x = rng.uni(0.6f) * std::ldexp(1.0f, -s);
                    auto r = cv::codebook_record((uint32_t)(j * 3 * S + k * S + s), ent, E);
                    cb.append(reinterpret_cast<const char *>(r.data()), r.size());
                }
        SLUICE_TRY(write_output_file(o.out + "/codebooks.bin", cb, false));
    }

    const std::string text = manifest_text(o, lay);
    return write_output_file(o.out + "/manifest.json", text, false);
}

}  // namespace sluice
