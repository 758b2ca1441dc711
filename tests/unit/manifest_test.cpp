#include <gtest/gtest.h>

#include "format/manifest.h"

using namespace sluice;

namespace {
std::string minimal(const std::string &config_extra) {
    return R"({"format_version":0,"config":{"num_hidden_layers":2,"hidden_size":64,"vocab_size":100,
      "num_attention_heads":2,"kv_lora_rank":16,"qk_nope_head_dim":8,"qk_rope_head_dim":8,"v_head_dim":8,
      "intermediate_size":32)" + config_extra + R"(},"trunk":[]})";
}
}  // namespace

TEST(Manifest, ParsesAndDefaults) {
    Manifest m;
    Status st = parse_manifest(minimal(""), "m.json", &m);
    ASSERT_TRUE(st) << st.message();
    EXPECT_EQ(m.cfg.n_layers, 2);
    EXPECT_FLOAT_EQ(m.cfg.eps, 1e-5f);
    EXPECT_TRUE(m.cfg.rope.enabled);
    EXPECT_EQ(m.eq.stages, 3);
    EXPECT_EQ(m.eq.index_bits, 8);
}

TEST(Manifest, NullReadsAsAbsentAndPresenceFlags) {
    Manifest m;
    ASSERT_TRUE(parse_manifest(minimal(R"(,"q_lora_rank":null,"moe_renormalize":false,"mla_use_nope":true)"), "m",
                               &m));
    EXPECT_EQ(m.cfg.q_lora, 0);
    EXPECT_TRUE(m.cfg.renormalize);  // presence flag, as warp (MODEL.md §1.2)
    EXPECT_FALSE(m.cfg.rope.enabled);
}

TEST(Manifest, RefusalsNameTheKey) {
    struct Case {
        std::string extra, needle;
    } cases[] = {
        {R"(,"mla_use_nope":1)", "mla_use_nope"},
        {R"(,"rms_norm_eps":2)", "rms_norm_eps"},
        {R"(,"num_experts":4,"num_experts_per_token":9,"moe_intermediate_size":8)", "num_experts_per_token"},
        {R"(,"linear_attn_config":{"kda_layers":[3]})", "kda_layers"},
        {R"(,"rope_scaling":{"type":"yarn","factor":4,"mscale":1})", "mscale"},
        {R"(,"hidden_act":5)", "hidden_act"},
    };
    for (auto &c : cases) {
        Manifest m;
        Status st = parse_manifest(minimal(c.extra), "m.json", &m);
        EXPECT_FALSE(st) << c.extra;
        EXPECT_NE(st.message().find(c.needle), std::string::npos) << st.message();
        std::printf("%-70s -> %s\n", c.extra.c_str(), st.message().c_str());
    }
}

TEST(Manifest, ExpertQuantRules) {
    Manifest m;
    std::string base = minimal("");
    auto with_eq = [&](const std::string &eq) {
        std::string s = base;
        s.insert(s.size() - 1, R"(,"expert_quant":)" + eq);
        return s;
    };
    EXPECT_TRUE(parse_manifest(with_eq(R"({"stages":4,"entries":64,"index_bits":6,"index_block":64})"), "m", &m));
    EXPECT_FALSE(parse_manifest(with_eq(R"({"stages":3,"entries":64,"index_bits":6})"), "m", &m));
    EXPECT_FALSE(parse_manifest(with_eq(R"({"index_block":0})"), "m", &m));
    EXPECT_FALSE(parse_manifest(with_eq(R"({"stages":9})"), "m", &m));
}
