// The GGUF source of `sluice convert` (convert/gguf_source.h) on tiny
// GGUF files written here with the export's writer: each inverse transform
// of export_families.cpp against the Hugging Face tensor it was made from,
// the synthesized config, the refusals (architecture, key, tensor, type,
// truncation), and a whole conversion with its provenance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "convert/checkpoint.h"
#include "convert/convert.h"
#include "convert/gguf_source.h"
#include "convert/hfconfig.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"

namespace {

using sluice::Status;
using sluice::convert::Checkpoint;
using sluice::convert::GgufSource;
using sluice::convert::ModelPlan;
using sluice::gguf::TensorType;
using sluice::gguf::Writer;
using json = nlohmann::json;

std::vector<float> vals(uint64_t seed, size_t n, float lo = -0.1f, float hi = 0.1f) {
    std::vector<float> v(n);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto& x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = lo + (hi - lo) * static_cast<float>((s >> 40) & 0xFFFFFF) / 16777216.0f;
    }
    return v;
}

// Shapes of the tiny model: 2 layers, layer 0 KDA (or MLA for deepseek2) and
// dense, layer 1 MLA with 4 experts.
struct Dims {
    int64_t d = 16, V = 32, H = 2, D = 8, K = 4, fr = 8, kvr = 8, dn = 4, dr = 4, dv = 4, E = 4, I = 8, ffn = 24;
    int64_t C() const { return H * D; }
};

struct Options {
    std::string arch = "kimi-linear";
    bool positive_ssm_a = false;
    bool drop_eps = false;
    bool drop_k_b = false;
    bool yarn = true;  // deepseek2 only
};

// What the file was built from, by HF name (values as PyTorch [out, in]).
using HfTensors = std::map<std::string, std::vector<float>>;

std::string L(int l, const std::string& rest) { return "model.layers." + std::to_string(l) + "." + rest; }
std::string B(int l, const std::string& rest) { return "blk." + std::to_string(l) + "." + rest; }

Status add(Writer& w, const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
    auto p = std::make_shared<std::vector<float>>(std::move(v));
    const int64_t ne0 = dims[0];
    return w.add_tensor(name, std::move(dims), TensorType::F32, [p, ne0](int64_t r0, int64_t n, float* out) {
        std::copy(p->begin() + r0 * ne0, p->begin() + (r0 + n) * ne0, out);
        return Status::ok();
    });
}

// Writes the GGUF as export-gguf would from the HF tensors it records in *hf.
void write_model(const std::string& path, const Options& o, HfTensors* hf) {
    const Dims z;
    const bool ds = o.arch == "deepseek2";
    const std::string A = o.arch + ".";
    Writer w;
    w.set_str("general.architecture", o.arch);
    w.set_u32(A + "block_count", 2);
    w.set_u32(A + "embedding_length", (uint32_t)z.d);
    w.set_u32(A + "vocab_size", (uint32_t)z.V);
    w.set_u32(A + "attention.head_count", (uint32_t)z.H);
    if (ds) w.set_u32(A + "attention.head_count_kv", 1);
    else w.set_arr_u32(A + "attention.head_count_kv", {0, 1});
    if (!o.drop_eps) w.set_f32(A + "attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_u32(A + "attention.kv_lora_rank", (uint32_t)z.kvr);
    w.set_u32(A + "attention.key_length_mla", (uint32_t)(z.dn + z.dr));
    w.set_u32(A + "attention.value_length_mla", (uint32_t)z.dv);
    w.set_u32(A + "rope.dimension_count", (uint32_t)z.dr);
    if (!ds) {
        w.set_u32(A + "ssm.conv_kernel", (uint32_t)z.K);
        w.set_u32(A + "kda.head_dim", (uint32_t)z.D);
    } else {
        w.set_u32(A + "attention.q_lora_rank", 0);
        w.set_f32(A + "rope.freq_base", 50000.0f);
        if (o.yarn) {
            w.set_str(A + "rope.scaling.type", "yarn");
            w.set_f32(A + "rope.scaling.factor", 32.0f);
            w.set_u32(A + "rope.scaling.original_context_length", 4096);
            w.set_f32(A + "rope.scaling.yarn_log_multiplier", 0.1f * 0.707f);
            w.set_f32(A + "rope.scaling.yarn_beta_fast", 8.0f);
            w.set_f32(A + "rope.scaling.yarn_beta_slow", 1.0f);
        } else {
            w.set_str(A + "rope.scaling.type", "none");
        }
    }
    w.set_u32(A + "feed_forward_length", (uint32_t)z.ffn);
    w.set_u32(A + "leading_dense_block_count", 1);
    w.set_u32(A + "expert_count", (uint32_t)z.E);
    w.set_u32(A + "expert_used_count", 2);
    w.set_u32(A + "expert_feed_forward_length", (uint32_t)z.I);
    w.set_u32(A + "expert_shared_count", 1);
    w.set_f32(A + "expert_weights_scale", 2.446f);
    w.set_bool(A + "expert_weights_norm", true);
    w.set_u32(A + "expert_gating_func", 2);
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);

    uint64_t seed = 1;
    // A matrix HF [out, in] stored as ne {in, out}: the same values.
    auto mat = [&](const std::string& g, const std::string& h, int64_t out, int64_t in) {
        auto v = vals(seed++, (size_t)(out * in));
        (*hf)[h] = v;
        ASSERT_TRUE(add(w, g, {in, out}, v).is_ok());
    };
    auto vec = [&](const std::string& g, const std::string& h, int64_t n) {
        auto v = vals(seed++, (size_t)n, 0.5f, 1.5f);
        (*hf)[h] = v;
        ASSERT_TRUE(add(w, g, {n}, v).is_ok());
    };
    const int64_t d = z.d, C = z.C(), H = z.H;
    mat("token_embd.weight", "model.embed_tokens.weight", z.V, d);
    vec("output_norm.weight", "model.norm.weight", d);
    mat("output.weight", "lm_head.weight", z.V, d);
    const std::string moe = ds ? "mlp." : "block_sparse_moe.";
    for (int l = 0; l < 2; ++l) {
        vec(B(l, "attn_norm.weight"), L(l, "input_layernorm.weight"), d);
        vec(B(l, "ffn_norm.weight"), L(l, "post_attention_layernorm.weight"), d);
        const std::string a = "self_attn.";
        if (l == 0 && !ds) {
            for (const char* x : {"q", "k", "v"}) {
                mat(B(l, std::string("attn_") + x + ".weight"), L(l, a + x + "_proj.weight"), C, d);
                auto cv = vals(seed++, (size_t)(C * z.K), -0.5f, 0.5f);
                (*hf)[L(l, a + x + "_conv1d.weight")] = cv;
                ASSERT_TRUE(add(w, B(l, std::string("ssm_conv1d_") + x + ".weight"), {z.K, 1, C}, cv).is_ok());
            }
            mat(B(l, "ssm_f_a.weight"), L(l, a + "f_a_proj.weight"), z.fr, d);
            mat(B(l, "ssm_f_b.weight"), L(l, a + "f_b_proj.weight"), C, z.fr);
            mat(B(l, "ssm_beta.weight"), L(l, a + "b_proj.weight"), H, d);
            auto alog = vals(seed++, (size_t)H, -1.0f, 1.0f);
            (*hf)[L(l, a + "A_log")] = alog;
            std::vector<float> ssm_a((size_t)H);
            for (int64_t h = 0; h < H; ++h)
                ssm_a[(size_t)h] = (o.positive_ssm_a && h == 1 ? 1.0f : -1.0f) * (float)std::exp((double)alog[(size_t)h]);
            ASSERT_TRUE(add(w, B(l, "ssm_a"), {1, H}, ssm_a).is_ok());
            auto dt = vals(seed++, (size_t)C, -0.5f, 0.5f);
            (*hf)[L(l, a + "dt_bias")] = dt;
            ASSERT_TRUE(add(w, B(l, "ssm_dt.bias"), {C}, dt).is_ok());
            mat(B(l, "ssm_g_a.weight"), L(l, a + "g_a_proj.weight"), z.fr, d);
            mat(B(l, "ssm_g_b.weight"), L(l, a + "g_b_proj.weight"), C, z.fr);
            vec(B(l, "ssm_norm.weight"), L(l, a + "o_norm.weight"), z.D);
            mat(B(l, "attn_output.weight"), L(l, a + "o_proj.weight"), d, C);
        } else {
            mat(B(l, "attn_q.weight"), L(l, a + "q_proj.weight"), H * (z.dn + z.dr), d);
            mat(B(l, "attn_kv_a_mqa.weight"), L(l, a + "kv_a_proj_with_mqa.weight"), z.kvr + z.dr, d);
            vec(B(l, "attn_kv_a_norm.weight"), L(l, a + "kv_a_layernorm.weight"), z.kvr);
            // kv_b_proj [H·(dn+dv), r] split as export_families.cpp's mla_tensors does.
            const int64_t dn = z.dn, dv = z.dv, r = z.kvr;
            auto kvb = vals(seed++, (size_t)(H * (dn + dv) * r));
            (*hf)[L(l, a + "kv_b_proj.weight")] = kvb;
            std::vector<float> kb((size_t)(H * r * dn)), vb((size_t)(H * dv * r));
            for (int64_t h = 0; h < H; h++) {
                const float* head = kvb.data() + h * (dn + dv) * r;
                for (int64_t i = 0; i < dn; i++)
                    for (int64_t j = 0; j < r; j++) kb[(size_t)((h * r + j) * dn + i)] = head[i * r + j];
                std::copy(head + dn * r, head + (dn + dv) * r, vb.begin() + h * dv * r);
            }
            if (!o.drop_k_b) {
                ASSERT_TRUE(add(w, B(l, "attn_k_b.weight"), {dn, r, H}, kb).is_ok());
            }
            ASSERT_TRUE(add(w, B(l, "attn_v_b.weight"), {r, dv, H}, vb).is_ok());
            mat(B(l, "attn_output.weight"), L(l, a + "o_proj.weight"), d, H * dv);
        }
        if (l == 0) {
            mat(B(l, "ffn_gate.weight"), L(l, "mlp.gate_proj.weight"), z.ffn, d);
            mat(B(l, "ffn_up.weight"), L(l, "mlp.up_proj.weight"), z.ffn, d);
            mat(B(l, "ffn_down.weight"), L(l, "mlp.down_proj.weight"), d, z.ffn);
            continue;
        }
        mat(B(l, "ffn_gate_inp.weight"), L(l, moe + "gate.weight"), z.E, d);
        auto bias = vals(seed++, (size_t)z.E, -0.05f, 0.05f);
        (*hf)[L(l, moe + "gate.e_score_correction_bias")] = bias;
        ASSERT_TRUE(add(w, B(l, "exp_probs_b.bias"), {z.E}, bias).is_ok());
        const char* kimi[3] = {"w1", "w3", "w2"};
        const char* dsn[3] = {"gate_proj", "up_proj", "down_proj"};
        const char* stack[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
        for (int k = 0; k < 3; ++k) {
            const int64_t out = k == 2 ? d : z.I, in = k == 2 ? z.I : d;
            std::vector<float> all;
            for (int64_t e = 0; e < z.E; ++e) {
                auto v = vals(seed++, (size_t)(out * in), -0.02f, 0.02f);
                (*hf)[L(l, moe + "experts." + std::to_string(e) + "." + (ds ? dsn[k] : kimi[k]) + ".weight")] = v;
                all.insert(all.end(), v.begin(), v.end());
            }
            ASSERT_TRUE(add(w, B(l, stack[k]), {in, out, z.E}, all).is_ok());
        }
        mat(B(l, "ffn_gate_shexp.weight"), L(l, moe + "shared_experts.gate_proj.weight"), z.I, d);
        mat(B(l, "ffn_up_shexp.weight"), L(l, moe + "shared_experts.up_proj.weight"), z.I, d);
        mat(B(l, "ffn_down_shexp.weight"), L(l, moe + "shared_experts.down_proj.weight"), d, z.I);
    }
    ASSERT_TRUE(w.write(path).is_ok());
}

// Sets the stored ggml type of `tensor` in the file's index (the writer only
// writes types sluice reads; this makes one it does not).
void patch_type(const std::string& path, const std::string& tensor, uint32_t type) {
    std::string bytes = ctest::slurp(path);
    const size_t at = bytes.find(tensor);
    ASSERT_NE(at, std::string::npos);
    uint32_t nd = 0;
    std::memcpy(&nd, bytes.data() + at + tensor.size(), 4);
    ASSERT_GE(nd, 1u);
    ASSERT_LE(nd, 4u);
    std::memcpy(bytes.data() + at + tensor.size() + 4 + 8 * nd, &type, 4);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::vector<float> read_all(const GgufSource& g, const std::string& hf) {
    std::vector<int64_t> shape;
    std::string err;
    EXPECT_TRUE(g.shape(hf, &shape, &err)) << err;
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
    std::vector<float> v((size_t)(rows * (shape.empty() ? 1 : shape.back())));
    EXPECT_TRUE(g.read_rows_f32(hf, 0, rows, v.data(), &err)) << hf << ": " << err;
    return v;
}

class GgufSourceTest : public ::testing::Test {
protected:
    ctest::TempDir tmp_;
    std::string path_ = tmp_.sub("tiny.gguf");
    HfTensors hf_;
};

TEST_F(GgufSourceTest, KimiLinearInverseTransforms) {
    write_model(path_, {}, &hf_);
    ASSERT_TRUE(sluice::convert::is_gguf_file(path_));
    EXPECT_FALSE(sluice::convert::is_gguf_file(tmp_.path));
    GgufSource g;
    std::string err;
    ASSERT_TRUE(g.open(path_, &err)) << err;
    EXPECT_EQ(g.arch(), "kimi-linear");
    // Every HF tensor the file was made from, and nothing else.
    std::vector<std::string> want;
    for (const auto& [n, v] : hf_) want.push_back(n);
    EXPECT_EQ(g.names(), want);
    const Dims z;
    for (const auto& [n, v] : hf_) {
        const std::vector<float> got = read_all(g, n);
        ASSERT_EQ(got.size(), v.size()) << n;
        if (n.ends_with("A_log")) {
            // log(-(-exp(a))): one rounding each way.
            for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(got[i], v[i], 1e-6f * (1 + std::fabs(v[i]))) << n;
        } else {
            EXPECT_EQ(std::memcmp(got.data(), v.data(), v.size() * 4), 0) << n << " is not bit-exact";
        }
    }
    std::vector<int64_t> s;
    ASSERT_TRUE(g.shape(L(0, "self_attn.q_conv1d.weight"), &s, &err));
    EXPECT_EQ(s, (std::vector<int64_t>{z.C(), 1, z.K}));
    ASSERT_TRUE(g.shape(L(0, "self_attn.A_log"), &s, &err));
    EXPECT_EQ(s, (std::vector<int64_t>{1, 1, z.H, 1}));
    ASSERT_TRUE(g.shape(L(1, "self_attn.kv_b_proj.weight"), &s, &err));
    EXPECT_EQ(s, (std::vector<int64_t>{z.H * (z.dn + z.dv), z.kvr}));
    ASSERT_TRUE(g.shape(L(1, "block_sparse_moe.experts.3.w2.weight"), &s, &err));
    EXPECT_EQ(s, (std::vector<int64_t>{z.d, z.I}));
    // kv_b_proj in row ranges that start and end inside heads.
    const auto& kvb = hf_[L(1, "self_attn.kv_b_proj.weight")];
    for (auto [r0, r1] : {std::pair<int64_t, int64_t>{3, 11}, {7, 9}, {0, 16}, {15, 16}}) {
        std::vector<float> part((size_t)((r1 - r0) * z.kvr));
        ASSERT_TRUE(g.read_rows_f32(L(1, "self_attn.kv_b_proj.weight"), r0, r1, part.data(), &err)) << err;
        EXPECT_EQ(std::memcmp(part.data(), kvb.data() + r0 * z.kvr, part.size() * 4), 0) << r0 << ".." << r1;
    }
    std::vector<float> one(1);
    EXPECT_FALSE(g.read_rows_f32(L(1, "self_attn.kv_b_proj.weight"), 15, 17, one.data(), &err));

    const auto& c = g.config();
    EXPECT_EQ(c["model_type"], "kimi_linear");
    EXPECT_EQ(c["architectures"][0], "KimiLinearForCausalLM");
    EXPECT_EQ(c["hidden_size"], z.d);
    EXPECT_EQ(c["vocab_size"], z.V);
    EXPECT_EQ(c["num_hidden_layers"], 2);
    EXPECT_DOUBLE_EQ(c["rms_norm_eps"].get<double>(), 1e-5);
    EXPECT_DOUBLE_EQ(c["routed_scaling_factor"].get<double>(), 2.446);
    EXPECT_EQ(c["first_k_dense_replace"], 1);
    EXPECT_EQ(c["intermediate_size"], z.ffn);
    EXPECT_EQ(c["moe_intermediate_size"], z.I);
    EXPECT_EQ(c["num_experts"], z.E);
    EXPECT_EQ(c["num_experts_per_token"], 2);
    EXPECT_EQ(c["num_shared_experts"], 1);
    EXPECT_EQ(c["moe_renormalize"], true);
    EXPECT_TRUE(c["q_lora_rank"].is_null());
    EXPECT_EQ(c["kv_lora_rank"], z.kvr);
    EXPECT_EQ(c["qk_nope_head_dim"], z.dn);
    EXPECT_EQ(c["qk_rope_head_dim"], z.dr);
    EXPECT_EQ(c["v_head_dim"], z.dv);
    EXPECT_EQ(c["mla_use_nope"], true);
    EXPECT_EQ(c["bos_token_id"], 1);
    EXPECT_EQ(c["eos_token_id"], 2);
    EXPECT_EQ(c["linear_attn_config"]["kda_layers"], json::parse("[1]"));
    EXPECT_EQ(c["linear_attn_config"]["full_attn_layers"], json::parse("[2]"));
    EXPECT_EQ(c["linear_attn_config"]["head_dim"], z.D);
    EXPECT_EQ(c["linear_attn_config"]["num_heads"], z.H);
    EXPECT_EQ(c["linear_attn_config"]["short_conv_kernel_size"], z.K);
    EXPECT_FALSE(c["linear_attn_config"].contains("use_full_rank_gate"));
}

TEST_F(GgufSourceTest, CheckpointAndPlanSeeHuggingFaceNames) {
    write_model(path_, {}, &hf_);
    Checkpoint ck;
    ModelPlan mp;
    std::string err;
    ASSERT_TRUE(sluice::convert::open_source(path_, &ck, &mp, &err)) << err;
    ASSERT_NE(ck.gguf(), nullptr);
    EXPECT_EQ(mp.arch, "kimi-linear");
    EXPECT_FALSE(mp.deepseek_naming);
    EXPECT_EQ(mp.moe_layers, std::vector<int>{1});
    EXPECT_TRUE(ck.has("lm_head.weight"));
    EXPECT_TRUE(ck.logical_exists(mp.expert_name(1, 2, 1)));
    std::vector<float> w((size_t)(Dims{}.I * Dims{}.d));
    ASSERT_TRUE(ck.read_rows_f32(mp.expert_name(1, 2, 1), 0, Dims{}.I, w.data(), &err)) << err;
    EXPECT_EQ(w, hf_[L(1, "block_sparse_moe.experts.2.w3.weight")]);
}

TEST_F(GgufSourceTest, Deepseek2NamingAndYarnConfig) {
    Options o;
    o.arch = "deepseek2";
    write_model(path_, o, &hf_);
    Checkpoint ck;
    ModelPlan mp;
    std::string err;
    ASSERT_TRUE(sluice::convert::open_source(path_, &ck, &mp, &err)) << err;
    EXPECT_TRUE(mp.deepseek_naming);
    EXPECT_EQ(mp.arch, "DeepseekV3ForCausalLM");
    EXPECT_TRUE(ck.has(L(1, "mlp.experts.0.down_proj.weight")));
    EXPECT_TRUE(ck.has(L(1, "mlp.gate.e_score_correction_bias")));
    EXPECT_EQ(sluice::convert::trunk_rename(L(1, "mlp.gate.weight"), true), L(1, "block_sparse_moe.gate.weight"));
    for (const auto& [n, v] : hf_) EXPECT_EQ(read_all(*ck.gguf(), n), v) << n;
    const auto& c = ck.gguf()->config();
    EXPECT_EQ(c["model_type"], "deepseek_v3");
    EXPECT_EQ(c["mla_use_nope"], false);
    EXPECT_TRUE(c["q_lora_rank"].is_null());
    EXPECT_DOUBLE_EQ(c["rope_theta"].get<double>(), 50000.0);
    const auto& rs = c["rope_scaling"];
    EXPECT_EQ(rs["type"], "yarn");
    EXPECT_DOUBLE_EQ(rs["factor"].get<double>(), 32.0);
    EXPECT_EQ(rs["original_max_position_embeddings"], 4096);
    EXPECT_DOUBLE_EQ(rs["mscale"].get<double>(), 0.707);
    EXPECT_DOUBLE_EQ(rs["mscale_all_dim"].get<double>(), 0.707);
    EXPECT_DOUBLE_EQ(rs["beta_fast"].get<double>(), 8.0);
    EXPECT_DOUBLE_EQ(rs["beta_slow"].get<double>(), 1.0);
    EXPECT_FALSE(c.contains("linear_attn_config"));
}

TEST_F(GgufSourceTest, RefusesNamingWhatIsWrong) {
    std::string err;
    {
        Options o;
        o.arch = "llama";
        write_model(path_, o, &hf_);
        GgufSource g;
        EXPECT_FALSE(g.open(path_, &err));
        EXPECT_NE(err.find(path_), std::string::npos) << err;
        EXPECT_NE(err.find("'llama' is not supported"), std::string::npos) << err;
    }
    {
        Options o;
        o.drop_eps = true;
        write_model(path_, o, &hf_);
        GgufSource g;
        EXPECT_FALSE(g.open(path_, &err));
        EXPECT_NE(err.find("kimi-linear.attention.layer_norm_rms_epsilon is missing"), std::string::npos) << err;
    }
    {
        Options o;
        o.drop_k_b = true;
        write_model(path_, o, &hf_);
        GgufSource g;
        EXPECT_FALSE(g.open(path_, &err));
        EXPECT_NE(err.find("tensor blk.1.attn_k_b.weight is missing"), std::string::npos) << err;
    }
    {
        write_model(path_, {}, &hf_);
        patch_type(path_, "blk.1.ffn_up_exps.weight", 16);  // IQ2_XXS: not read
        GgufSource g;
        EXPECT_FALSE(g.open(path_, &err));
        EXPECT_NE(err.find("tensor blk.1.ffn_up_exps.weight is of ggml type IQ2_XXS"), std::string::npos) << err;
    }
    {
        Options o;
        o.positive_ssm_a = true;
        write_model(path_, o, &hf_);
        GgufSource g;
        ASSERT_TRUE(g.open(path_, &err)) << err;
        std::vector<float> v(2);
        EXPECT_FALSE(g.read_rows_f32(L(0, "self_attn.A_log"), 0, 2, v.data(), &err));
        EXPECT_NE(err.find("blk.0.ssm_a"), std::string::npos) << err;
    }
}

sluice::convert::ConvertOptions small_options(const std::string& src, const std::string& out) {
    sluice::convert::ConvertOptions o;
    o.source_dir = src;
    o.output_dir = out;
    o.entries = 16;
    o.cb_sample = 4;
    o.train_vectors = 1000;
    o.kmeans_iters = 3;
    o.jobs = 2;
    o.quiet = true;
    return o;
}

TEST_F(GgufSourceTest, ConvertsWithProvenanceAndVerifies) {
    write_model(path_, {}, &hf_);
    const std::string out = tmp_.sub("out.waste");
    ctest::QuietSink sink;
    std::string err;
    ASSERT_EQ(sluice::convert::run_convert(small_options(path_, out), &err, &sink), 0) << err;
    const json m = json::parse(ctest::slurp(out + "/manifest.json"));
    const json& src = m["provenance"]["source"];
    EXPECT_EQ(src["format"], "gguf");
    EXPECT_EQ(src["gguf_architecture"], "kimi-linear");
    ASSERT_EQ(src["shards"].size(), 1u);
    EXPECT_EQ(src["shards"][0]["file"], "tiny.gguf");
    EXPECT_EQ(src["shards"][0]["bytes"].get<uint64_t>(), ctest::fs::file_size(path_));
    EXPECT_EQ(src["shards"][0]["header_sha256"].get<std::string>().size(), 64u);
    EXPECT_EQ(src["shards"][0]["dtypes"]["F32"]["tensors"].get<int>() > 0, true);
    EXPECT_EQ(m["config"]["model_type"], "kimi_linear");
    EXPECT_EQ(m["arch"], "kimi-linear");
    EXPECT_FALSE(ctest::fs::exists(out + "/tokenizer.model"));
    EXPECT_NE(sink.lines.find("note: tokenizer: not imported"), std::string::npos) << sink.lines;
    // The same weights through verify --source: every trunk tensor of this
    // size stays f32, so it equals what the GGUF source presents exactly.
    sluice::convert::VerifyOptions vo;
    vo.container_dir = out;
    vo.source_dir = path_;
    sluice::convert::VerifyReport rep;
    ASSERT_EQ(sluice::convert::run_verify(vo, &rep, &err, &sink), 0) << err;
    ASSERT_FALSE(rep.trunk.empty());
    for (const auto& t : rep.trunk) EXPECT_EQ(t.max_abs, 0.0) << t.name;
    // A rerun with the same settings is complete already.
    ASSERT_EQ(sluice::convert::run_convert(small_options(path_, out), &err, &sink), 0) << err;
}

TEST_F(GgufSourceTest, TruncatedFileLeavesNoContainer) {
    write_model(path_, {}, &hf_);
    std::string bytes = ctest::slurp(path_);
    const std::string cut = tmp_.sub("cut.gguf");
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 1000);
    const std::string out = tmp_.sub("cut.waste");
    std::string err;
    ctest::QuietSink sink;
    EXPECT_EQ(sluice::convert::run_convert(small_options(cut, out), &err, &sink), 2);
    EXPECT_NE(err.find(cut), std::string::npos) << err;
    EXPECT_NE(err.find("runs past the end of the file"), std::string::npos) << err;
    EXPECT_FALSE(ctest::fs::exists(out + "/manifest.json"));
}

}  // namespace
