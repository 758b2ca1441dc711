// The GGUF mapping of each family: llama.cpp's metadata keys and tensor
// names (revision v0.5.0, the npm prebuilt's), from the container's Hugging
// Face names. Each mapping was checked end to end against llama.cpp's
// logits (tests/llamacpp); the comments name the llama.cpp behaviour that
// makes a transform or a refusal necessary.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "gguf/export_source.h"

namespace sluice::gguf {

namespace {

std::string layer_name(int L, const std::string &rest) { return "model.layers." + std::to_string(L) + "." + rest; }
std::string blk(int L, const std::string &rest) { return "blk." + std::to_string(L) + "." + rest; }

Status refuse(ExportSource &s, const std::string &arch, const std::string &what) {
    return unsupported(s.container().dir() + ": cannot be written as llama.cpp's " + arch + ": " + what);
}

// The leading layers without a router; llama.cpp's kimi and deepseek
// graphs know only dense layers before the first MoE layer.
Status dense_lead(ExportSource &s, const std::string &arch, int *n_dense) {
    const ModelConfig &c = s.cfg();
    int n = c.n_layers;
    for (int L = 0; L < c.n_layers; L++)
        if (s.has(layer_name(L, "block_sparse_moe.gate.weight")) || s.has(layer_name(L, "mlp.gate.weight"))) {
            n = L;
            break;
        }
    for (int L = n; L < c.n_layers; L++) {
        const bool moe = s.has(layer_name(L, "block_sparse_moe.gate.weight")) || s.has(layer_name(L, "mlp.gate.weight"));
        if (!moe) return refuse(s, arch, "layer " + std::to_string(L) + " is dense after an MoE layer");
        if (!s.container().manifest().banks.count(L))
            return refuse(s, arch, "layer " + std::to_string(L) + " has a router but no expert bank");
    }
    *n_dense = n;
    return Status::ok();
}

// The container's tokenizer when it has one (export_tokenizer.cpp); else a
// vocabulary llama.cpp accepts for a model fed token ids: "none" makes it
// create vocab_size placeholder tokens.
Status vocab(ExportSource &s) {
    const std::string dir = s.container().dir();
    if (std::filesystem::exists(dir + "/tokenizer.model") || std::filesystem::exists(dir + "/tiktoken.model"))
        return export_tokenizer(s);
    s.writer().set_str("tokenizer.ggml.model", "none");
    s.note("tokenizer: the container has none; ids only (tokenizer.ggml.model none)");
    return Status::ok();
}

// The MLA keys shared by kimi-linear, kimi-k3 and deepseek2. key_length is
// the cache row (latent + rope part: llama.cpp serves MLA as MQA over the
// latent); key_length_mla / value_length_mla are the per-head widths, and
// their presence selects the absorbed attn_k_b / attn_v_b path.
void mla_keys(ExportSource &s, const std::string &A) {
    const ModelConfig &c = s.cfg();
    Writer &w = s.writer();
    w.set_u32(A + ".attention.kv_lora_rank", (uint32_t)c.kv_lora);
    w.set_u32(A + ".attention.key_length", (uint32_t)(c.kv_lora + c.d_rope));
    w.set_u32(A + ".attention.value_length", (uint32_t)c.kv_lora);
    w.set_u32(A + ".attention.key_length_mla", (uint32_t)(c.d_nope + c.d_rope));
    w.set_u32(A + ".attention.value_length_mla", (uint32_t)c.d_v);
    w.set_u32(A + ".rope.dimension_count", (uint32_t)c.d_rope);
}

// kv_b_proj [H·(dn+dv), r] split per head: k_b as [H][r][dn] (transposed:
// the absorbed path multiplies q_nope by it), v_b as [H][dv][r]. The fused
// attn_kv_b is not written: with it llama.cpp takes a fallback path whose
// key concatenation order differs from the query's in this revision.
Status mla_tensors(ExportSource &s, int L) {
    const ModelConfig &c = s.cfg();
    const std::string a = "self_attn.";
    if (c.q_lora > 0) {
        SLUICE_TRY(s.matrix(layer_name(L, a + "q_a_proj.weight"), blk(L, "attn_q_a.weight")));
        SLUICE_TRY(s.as_f32(layer_name(L, a + "q_a_layernorm.weight"), blk(L, "attn_q_a_norm.weight"), {c.q_lora}));
        SLUICE_TRY(s.matrix(layer_name(L, a + "q_b_proj.weight"), blk(L, "attn_q_b.weight")));
    } else {
        SLUICE_TRY(s.matrix(layer_name(L, a + "q_proj.weight"), blk(L, "attn_q.weight")));
    }
    SLUICE_TRY(s.matrix(layer_name(L, a + "kv_a_proj_with_mqa.weight"), blk(L, "attn_kv_a_mqa.weight")));
    SLUICE_TRY(s.as_f32(layer_name(L, a + "kv_a_layernorm.weight"), blk(L, "attn_kv_a_norm.weight"), {c.kv_lora}));
    std::vector<float> kvb;
    std::vector<int64_t> shape;
    SLUICE_TRY(s.load(layer_name(L, a + "kv_b_proj.weight"), &kvb, &shape));
    const int64_t H = c.n_heads, dn = c.d_nope, dv = c.d_v, r = c.kv_lora;
    if (shape.size() != 2 || shape[0] != H * (dn + dv) || shape[1] != r)
        return format_error(s.container().dir() + ": " + layer_name(L, a + "kv_b_proj.weight") +
                            " is not [heads·(nope+v), kv_lora_rank]");
    std::vector<float> kb((size_t)(H * r * dn)), vb((size_t)(H * dv * r));
    for (int64_t h = 0; h < H; h++) {
        const float *head = kvb.data() + h * (dn + dv) * r;
        for (int64_t i = 0; i < dn; i++)
            for (int64_t j = 0; j < r; j++) kb[(size_t)((h * r + j) * dn + i)] = head[i * r + j];
        std::copy(head + dn * r, head + (dn + dv) * r, vb.begin() + h * dv * r);
    }
    SLUICE_TRY(s.add(blk(L, "attn_k_b.weight"), {dn, r, H}, std::move(kb)));
    SLUICE_TRY(s.add(blk(L, "attn_v_b.weight"), {r, dv, H}, std::move(vb)));
    if (c.mla_output_gate) SLUICE_TRY(s.matrix(layer_name(L, a + "g_proj.weight"), blk(L, "attn_gate.weight")));
    return s.matrix(layer_name(L, a + "o_proj.weight"), blk(L, "attn_output.weight"));
}

// The router's selection bias: sluice applies it only when stored as f32
// (a quantized bias is ignored, FORMAT.md §4.10); llama.cpp requires the
// tensor, so the other cases write zeros, which select the same experts.
Status router_bias(ExportSource &s, int L, const std::string &hf) {
    const ModelConfig &c = s.cfg();
    const TrunkEntry *e = s.find(hf);
    if (e && e->fmt == 0) {
        std::vector<float> v;
        SLUICE_TRY(s.load(hf, &v));
        if ((int64_t)v.size() < c.n_experts) return format_error(s.container().dir() + ": " + hf + " is shorter than num_experts");
        v.resize((size_t)c.n_experts);
        return s.add(blk(L, "exp_probs_b.bias"), {c.n_experts}, std::move(v));
    }
    return s.add(blk(L, "exp_probs_b.bias"), {c.n_experts}, std::vector<float>((size_t)c.n_experts, 0.0f));
}

Status routed_experts(ExportSource &s, int L) {
    SLUICE_TRY(s.experts(L, ExpertMatrix::gate, blk(L, "ffn_gate_exps.weight")));
    SLUICE_TRY(s.experts(L, ExpertMatrix::up, blk(L, "ffn_up_exps.weight")));
    return s.experts(L, ExpertMatrix::down, blk(L, "ffn_down_exps.weight"));
}

Status shared_experts(ExportSource &s, int L, const std::string &m) {
    SLUICE_TRY(s.matrix(layer_name(L, m + "shared_experts.gate_proj.weight"), blk(L, "ffn_gate_shexp.weight")));
    SLUICE_TRY(s.matrix(layer_name(L, m + "shared_experts.up_proj.weight"), blk(L, "ffn_up_shexp.weight")));
    return s.matrix(layer_name(L, m + "shared_experts.down_proj.weight"), blk(L, "ffn_down_shexp.weight"));
}

Status dense_ffn(ExportSource &s, int L) {
    SLUICE_TRY(s.matrix(layer_name(L, "mlp.gate_proj.weight"), blk(L, "ffn_gate.weight")));
    SLUICE_TRY(s.matrix(layer_name(L, "mlp.up_proj.weight"), blk(L, "ffn_up.weight")));
    return s.matrix(layer_name(L, "mlp.down_proj.weight"), blk(L, "ffn_down.weight"));
}

Status vector_f32(ExportSource &s, const std::string &hf, const std::string &gguf, int64_t n) {
    return s.as_f32(hf, gguf, {n});
}

// What both Kimi architectures share: the trunk keys, KDA and MLA layers,
// the MoE. k3 adds latent experts, AttnRes, SiTU and the bounded gate.
Status export_kimi(ExportSource &s, const std::string &A) {
    const ModelConfig &c = s.cfg();
    const bool k3 = A == "kimi-k3";
    bool any_kda = false, any_mla = false;
    for (int L = 0; L < c.n_layers; L++) (L < (int)c.is_kda.size() && c.is_kda[L] ? any_kda : any_mla) = true;
    // One head count serves both layer kinds in llama.cpp's kimi graphs.
    if (any_kda && any_mla && c.kda_heads != c.n_heads)
        return refuse(s, A, "KDA heads (" + std::to_string(c.kda_heads) + ") differ from MLA heads (" +
                                std::to_string(c.n_heads) + "); llama.cpp uses one head_count for both");
    if (any_mla && c.rope.enabled) return refuse(s, A, "MLA with rotary positions (its kimi graphs apply none)");
    if (c.routed_scaling == 0.0f) return refuse(s, A, "routed_scaling_factor 0 (llama.cpp reads 0 as no scaling)");
    if (!k3) {
        // kimi-linear always renormalizes the routing weights and builds a
        // shared expert; sluice renormalizes only with the flag and k > 1.
        if (!c.renormalize || c.top_k < 2) return refuse(s, A, "routing weights not renormalized (moe_renormalize absent or top-k 1)");
        if (c.n_shared < 1) return refuse(s, A, "no shared expert");
        if (c.q_lora > 0) return refuse(s, A, "q_lora_rank set (kimi-linear reads attn_q only)");
        if (c.full_rank_gate || c.gate_lower_bound < 0 || c.r_lat > 0 || c.attn_res_block > 0 || c.situ ||
            c.mla_output_gate)
            return refuse(s, A, "K3 blocks (full-rank gate, bounded decay, latent experts, AttnRes, SiTU or MLA "
                                "output gate): export it as kimi-k3");
    } else if (c.renormalize && c.top_k == 1) {
        return refuse(s, A, "renormalized top-1 routing (llama.cpp gives weight 1, sluice the sigmoid)");
    }
    int n_dense = 0;
    SLUICE_TRY(dense_lead(s, A, &n_dense));
    const bool has_moe = n_dense < c.n_layers;

    s.set_arch(A);
    Writer &w = s.writer();
    w.set_str("general.name", "sluice export");
    w.set_u32(A + ".context_length", 4096);
    w.set_u32(A + ".embedding_length", (uint32_t)c.hidden);
    w.set_u32(A + ".block_count", (uint32_t)c.n_layers);
    w.set_u32(A + ".vocab_size", (uint32_t)c.vocab);
    w.set_u32(A + ".attention.head_count", (uint32_t)(any_mla ? c.n_heads : c.kda_heads));
    // 0 marks a recurrent (KDA) layer, 1 an MLA layer (MQA over the latent).
    std::vector<uint32_t> head_kv;
    for (int L = 0; L < c.n_layers; L++) head_kv.push_back(L < (int)c.is_kda.size() && c.is_kda[L] ? 0 : 1);
    w.set_arr_u32(A + ".attention.head_count_kv", head_kv);
    w.set_f32(A + ".attention.layer_norm_rms_epsilon", c.eps);
    if (any_mla) {
        mla_keys(s, A);
        if (k3 && c.q_lora > 0) w.set_u32(A + ".attention.q_lora_rank", (uint32_t)c.q_lora);
    } else {
        // The loader reads these whether or not a layer uses them.
        w.set_u32(A + ".attention.kv_lora_rank", 1);
        w.set_u32(A + ".attention.key_length_mla", 1);
        w.set_u32(A + ".attention.value_length_mla", 1);
    }
    w.set_u32(A + ".ssm.conv_kernel", (uint32_t)c.conv_kernel);
    w.set_u32(A + ".kda.head_dim", (uint32_t)(any_kda ? c.kda_dim : 1));
    // Present = the bounded decay gate λ·σ(e^{A_log}·z) (sluice: λ < 0).
    if (k3 && c.gate_lower_bound < 0) w.set_f32(A + ".kda.gate_lower_bound", c.gate_lower_bound);
    w.set_u32(A + ".feed_forward_length", (uint32_t)c.inter);
    w.set_u32(A + ".leading_dense_block_count", (uint32_t)n_dense);
    w.set_u32(A + ".expert_count", (uint32_t)(has_moe ? c.n_experts : 0));
    w.set_u32(A + ".expert_used_count", (uint32_t)(has_moe ? c.top_k : 0));
    w.set_u32(A + ".expert_feed_forward_length", (uint32_t)c.moe_inter);
    w.set_u32(A + ".expert_shared_count", (uint32_t)c.n_shared);
    w.set_f32(A + ".expert_weights_scale", c.routed_scaling);
    w.set_bool(A + ".expert_weights_norm", c.renormalize);
    w.set_u32(A + ".expert_gating_func", 2);  // sigmoid
    if (k3) {
        if (c.r_lat > 0) w.set_u32(A + ".expert_latent_length", (uint32_t)c.r_lat);
        // SiLU-GLU as SiTU with β = 1e30: β·tanh(a/β) is a itself in f32.
        w.set_f32(A + ".activation.situ_beta", c.situ ? c.situ_beta : 1e30f);
        w.set_f32(A + ".activation.situ_linear_beta", c.situ ? c.situ_linear_beta : 0.0f);
        w.set_u32(A + ".attn_res.block_size", (uint32_t)std::max(c.attn_res_block, 0));
    }
    SLUICE_TRY(vocab(s));

    const int64_t d = c.hidden, H = c.kda_heads, D = c.kda_dim, C = H * D, K = c.conv_kernel;
    SLUICE_TRY(s.matrix("model.embed_tokens.weight", "token_embd.weight"));
    for (int L = 0; L < c.n_layers; L++) {
        SLUICE_TRY(vector_f32(s, layer_name(L, "input_layernorm.weight"), blk(L, "attn_norm.weight"), d));
        SLUICE_TRY(vector_f32(s, layer_name(L, "post_attention_layernorm.weight"), blk(L, "ffn_norm.weight"), d));
        if (k3 && c.attn_res_block > 0) {
            // AttnRes scores: llama.cpp takes the norm's weight times the projection.
            for (auto [norm, proj, out] : {std::tuple{"self_attention_res_norm.weight", "self_attention_res_proj.weight",
                                                      "attn_res_score.weight"},
                                           std::tuple{"mlp_res_norm.weight", "mlp_res_proj.weight", "ffn_res_score.weight"}}) {
                std::vector<float> n, p;
                SLUICE_TRY(s.load(layer_name(L, norm), &n));
                SLUICE_TRY(s.load(layer_name(L, proj), &p));
                if ((int64_t)n.size() != d || (int64_t)p.size() != d)
                    return format_error(s.container().dir() + ": layer " + std::to_string(L) + " AttnRes weights are not of width hidden_size");
                for (int64_t i = 0; i < d; i++) n[(size_t)i] *= p[(size_t)i];
                SLUICE_TRY(s.add(blk(L, out), {d}, std::move(n)));
            }
        }
        const std::string a = "self_attn.";
        if (L < (int)c.is_kda.size() && c.is_kda[L]) {
            for (const char *x : {"q", "k", "v"}) {
                SLUICE_TRY(s.matrix(layer_name(L, a + x + "_proj.weight"), blk(L, std::string("attn_") + x + ".weight")));
                std::vector<float> conv;
                SLUICE_TRY(s.load(layer_name(L, a + x + "_conv1d.weight"), &conv));
                if ((int64_t)conv.size() < C * K)
                    return format_error(s.container().dir() + ": " + layer_name(L, a + x + "_conv1d.weight") +
                                        " holds fewer than heads·head_dim·kernel values");
                conv.resize((size_t)(C * K));
                std::vector<int64_t> dims = k3 ? std::vector<int64_t>{K, 1, C, 1} : std::vector<int64_t>{K, 1, C};
                SLUICE_TRY(s.add(blk(L, std::string("ssm_conv1d_") + x + ".weight"), dims, std::move(conv)));
            }
            SLUICE_TRY(s.matrix(layer_name(L, a + "f_a_proj.weight"), blk(L, "ssm_f_a.weight")));
            SLUICE_TRY(s.matrix(layer_name(L, a + "f_b_proj.weight"), blk(L, "ssm_f_b.weight")));
            SLUICE_TRY(s.matrix(layer_name(L, a + "b_proj.weight"), blk(L, "ssm_beta.weight")));
            std::vector<float> alog;
            SLUICE_TRY(s.load(layer_name(L, a + "A_log"), &alog));
            if ((int64_t)alog.size() < H) return format_error(s.container().dir() + ": " + layer_name(L, a + "A_log") + " holds fewer than heads values");
            std::vector<float> ssm_a((size_t)H);
            for (int64_t h = 0; h < H; h++) ssm_a[(size_t)h] = (float)-std::exp((double)alog[(size_t)h]);
            SLUICE_TRY(s.add(blk(L, "ssm_a"), k3 ? std::vector<int64_t>{H} : std::vector<int64_t>{1, H}, std::move(ssm_a)));
            std::vector<float> dt;
            SLUICE_TRY(s.load(layer_name(L, a + "dt_bias"), &dt));
            if ((int64_t)dt.size() < C) return format_error(s.container().dir() + ": " + layer_name(L, a + "dt_bias") + " holds fewer than heads·head_dim values");
            dt.resize((size_t)C);
            SLUICE_TRY(s.add(blk(L, "ssm_dt.bias"), {C}, std::move(dt)));
            if (!k3) {
                SLUICE_TRY(s.matrix(layer_name(L, a + "g_a_proj.weight"), blk(L, "ssm_g_a.weight")));
                SLUICE_TRY(s.matrix(layer_name(L, a + "g_b_proj.weight"), blk(L, "ssm_g_b.weight")));
            } else if (c.full_rank_gate) {
                SLUICE_TRY(s.matrix(layer_name(L, a + "g_proj.weight"), blk(L, "ssm_g.weight")));
            } else {
                // kimi-k3 has one gate matrix: the low-rank pair folded, g_b·g_a, in f64.
                std::vector<float> ga, gb;
                std::vector<int64_t> sa, sb;
                SLUICE_TRY(s.load(layer_name(L, a + "g_a_proj.weight"), &ga, &sa));
                SLUICE_TRY(s.load(layer_name(L, a + "g_b_proj.weight"), &gb, &sb));
                if (sa.size() != 2 || sb.size() != 2 || sb[1] != sa[0] || sa[1] != d || sb[0] != C)
                    return format_error(s.container().dir() + ": layer " + std::to_string(L) + " g_a_proj / g_b_proj shapes do not chain");
                const int64_t R = sa[0];
                std::vector<float> g((size_t)(C * d));
                std::vector<double> row((size_t)d);
                for (int64_t i = 0; i < C; i++) {
                    std::fill(row.begin(), row.end(), 0.0);
                    for (int64_t k = 0; k < R; k++) {
                        const double b = gb[(size_t)(i * R + k)];
                        const float *ar = ga.data() + k * d;
                        for (int64_t j = 0; j < d; j++) row[(size_t)j] += b * ar[j];
                    }
                    for (int64_t j = 0; j < d; j++) g[(size_t)(i * d + j)] = (float)row[(size_t)j];
                }
                SLUICE_TRY(s.add(blk(L, "ssm_g.weight"), {d, C}, std::move(g)));
            }
            SLUICE_TRY(vector_f32(s, layer_name(L, a + "o_norm.weight"), blk(L, "ssm_norm.weight"), D));
            SLUICE_TRY(s.matrix(layer_name(L, a + "o_proj.weight"), blk(L, "attn_output.weight")));
        } else {
            SLUICE_TRY(mla_tensors(s, L));
        }
        if (L < n_dense) {
            SLUICE_TRY(dense_ffn(s, L));
            continue;
        }
        const std::string m = "block_sparse_moe.";
        SLUICE_TRY(s.matrix(layer_name(L, m + "gate.weight"), blk(L, "ffn_gate_inp.weight")));
        SLUICE_TRY(router_bias(s, L, layer_name(L, m + "gate.e_score_correction_bias")));
        SLUICE_TRY(routed_experts(s, L));
        if (k3 && c.r_lat > 0) {
            SLUICE_TRY(s.matrix(layer_name(L, m + "routed_expert_down_proj.weight"), blk(L, "ffn_routed_down.weight")));
            SLUICE_TRY(s.matrix(layer_name(L, m + "routed_expert_up_proj.weight"), blk(L, "ffn_routed_up.weight")));
            if (c.latent_norm)
                SLUICE_TRY(vector_f32(s, layer_name(L, m + "routed_expert_norm.weight"), blk(L, "ffn_routed_norm.weight"), c.r_lat));
        }
        if (s.has(layer_name(L, m + "shared_experts.gate_proj.weight"))) SLUICE_TRY(shared_experts(s, L, m));
    }
    if (k3 && c.attn_res_block > 0) {
        std::vector<float> n, p;
        SLUICE_TRY(s.load("model.output_attn_res_norm.weight", &n));
        SLUICE_TRY(s.load("model.output_attn_res_proj.weight", &p));
        if ((int64_t)n.size() != d || (int64_t)p.size() != d)
            return format_error(s.container().dir() + ": the output AttnRes weights are not of width hidden_size");
        for (int64_t i = 0; i < d; i++) n[(size_t)i] *= p[(size_t)i];
        SLUICE_TRY(s.add("output_res_score.weight", {d}, std::move(n)));
    }
    SLUICE_TRY(vector_f32(s, "model.norm.weight", "output_norm.weight", d));
    return s.matrix("lm_head.weight", "output.weight");
}

}  // namespace

Status export_kimi_linear(ExportSource &s) { return export_kimi(s, "kimi-linear"); }
Status export_k3(ExportSource &s) { return export_kimi(s, "kimi-k3"); }
// DeepSeek-V3 / Kimi K2 as llama.cpp's deepseek2: MLA with q_lora and
// interleaved rotary (llama.cpp's NORM rope pairs adjacent values, as
// sluice does: no row permutation), YaRN, sigmoid routing with the
// selection bias, shared experts, dense lead layers.
Status export_deepseek(ExportSource &s) {
    const std::string A = "deepseek2";
    const ModelConfig &c = s.cfg();
    for (int L = 0; L < c.n_layers; L++)
        if (L < (int)c.is_kda.size() && c.is_kda[L]) return refuse(s, A, "KDA layers (export it as kimi-linear)");
    if (c.mla_output_gate || c.r_lat > 0 || c.attn_res_block > 0 || c.situ)
        return refuse(s, A, "K3 blocks (MLA output gate, latent experts, AttnRes or SiTU): export it as kimi-k3");
    if (!c.rope.enabled) return refuse(s, A, "MLA without rotary positions (deepseek2 always rotates)");
    if (c.routed_scaling == 0.0f) return refuse(s, A, "routed_scaling_factor 0 (llama.cpp reads 0 as no scaling)");
    int n_dense = 0;
    SLUICE_TRY(dense_lead(s, A, &n_dense));
    const bool has_moe = n_dense < c.n_layers;
    if (has_moe && !s.has(layer_name(n_dense, "block_sparse_moe.shared_experts.gate_proj.weight")))
        return refuse(s, A, "MoE layers without a shared expert (deepseek2 builds one in every MoE layer)");

    s.set_arch(A);
    Writer &w = s.writer();
    w.set_str("general.name", "sluice export");
    const RopeConfig &rp = c.rope;
    const bool yarn = rp.yarn && rp.factor > 1.0;
    w.set_u32(A + ".context_length", yarn ? (uint32_t)(rp.original_max_pos * rp.factor) : 4096u);
    w.set_u32(A + ".embedding_length", (uint32_t)c.hidden);
    w.set_u32(A + ".block_count", (uint32_t)c.n_layers);
    w.set_u32(A + ".vocab_size", (uint32_t)c.vocab);
    w.set_u32(A + ".feed_forward_length", (uint32_t)c.inter);
    w.set_u32(A + ".leading_dense_block_count", (uint32_t)n_dense);
    w.set_u32(A + ".attention.head_count", (uint32_t)c.n_heads);
    w.set_u32(A + ".attention.head_count_kv", 1);  // MLA served as MQA over the latent
    w.set_f32(A + ".attention.layer_norm_rms_epsilon", c.eps);
    w.set_u32(A + ".attention.q_lora_rank", (uint32_t)std::max(c.q_lora, 0));
    mla_keys(s, A);
    w.set_f32(A + ".rope.freq_base", (float)rp.theta);
    w.set_u32(A + ".expert_count", (uint32_t)(has_moe ? c.n_experts : 0));
    w.set_u32(A + ".expert_used_count", (uint32_t)(has_moe ? c.top_k : 0));
    w.set_u32(A + ".expert_feed_forward_length", (uint32_t)c.moe_inter);
    // The shared width is moe_intermediate_size · max(n_shared, 1) in sluice.
    w.set_u32(A + ".expert_shared_count", (uint32_t)std::max(c.n_shared, 1));
    w.set_u32(A + ".expert_gating_func", 2);  // sigmoid; the default (softmax) would be silently wrong
    // llama.cpp would renormalize a single expert to weight 1; sluice keeps its sigmoid.
    w.set_bool(A + ".expert_weights_norm", c.renormalize && c.top_k > 1);
    w.set_f32(A + ".expert_weights_scale", c.routed_scaling);
    if (yarn) {
        w.set_str(A + ".rope.scaling.type", "yarn");
        w.set_f32(A + ".rope.scaling.factor", (float)rp.factor);
        w.set_u32(A + ".rope.scaling.original_context_length", (uint32_t)rp.original_max_pos);
        // llama.cpp's attention scale is sluice's (1 + 0.1·mscale_all_dim·ln s)² / √(nope + rope)
        // with a rotary amplitude of 1 only through these keys (measured: 0.49 and 0.70 off without).
        if (rp.mscale_all_dim != 0.0)
            w.set_f32(A + ".rope.scaling.yarn_log_multiplier", (float)(0.1 * rp.mscale_all_dim));
        else
            w.set_f32(A + ".rope.scaling.attn_factor", (float)(1.0 / (1.0 + 0.1 * std::log(rp.factor))));
        // Written for a llama.cpp that reads them; v0.5.0's deepseek2 does not (see the note).
        w.set_f32(A + ".rope.scaling.yarn_beta_fast", (float)rp.beta_fast);
        w.set_f32(A + ".rope.scaling.yarn_beta_slow", (float)rp.beta_slow);
        if (rp.beta_fast != 32.0 || rp.beta_slow != 1.0) {
            char line[200];
            std::snprintf(line, sizeof line,
                          "YaRN betas %g / %g: llama.cpp v0.5.0's deepseek2 ignores them in the file and uses 32 / 1; "
                          "run it with --yarn-beta-fast %g --yarn-beta-slow %g",
                          rp.beta_fast, rp.beta_slow, rp.beta_fast, rp.beta_slow);
            s.note(line);
        }
    } else {
        w.set_str(A + ".rope.scaling.type", "none");
    }
    // No expert_group_count: sluice, like warp, routes without DeepSeek-V3's
    // group limit (docs/LEARNED.md); writing it would judge a different model.
    SLUICE_TRY(vocab(s));

    const int64_t d = c.hidden;
    SLUICE_TRY(s.matrix("model.embed_tokens.weight", "token_embd.weight"));
    for (int L = 0; L < c.n_layers; L++) {
        SLUICE_TRY(vector_f32(s, layer_name(L, "input_layernorm.weight"), blk(L, "attn_norm.weight"), d));
        SLUICE_TRY(mla_tensors(s, L));
        SLUICE_TRY(vector_f32(s, layer_name(L, "post_attention_layernorm.weight"), blk(L, "ffn_norm.weight"), d));
        if (L < n_dense) {
            SLUICE_TRY(dense_ffn(s, L));
            continue;
        }
        const std::string m = "block_sparse_moe.";
        SLUICE_TRY(s.matrix(layer_name(L, m + "gate.weight"), blk(L, "ffn_gate_inp.weight")));
        // Optional in deepseek2: written only where sluice applies it (stored as f32).
        const std::string bias = layer_name(L, m + "gate.e_score_correction_bias");
        if (const TrunkEntry *e = s.find(bias); e && e->fmt == 0) SLUICE_TRY(router_bias(s, L, bias));
        SLUICE_TRY(routed_experts(s, L));
        SLUICE_TRY(shared_experts(s, L, m));
    }
    SLUICE_TRY(vector_f32(s, "model.norm.weight", "output_norm.weight", d));
    return s.matrix("lm_head.weight", "output.weight");
}

}  // namespace sluice::gguf
