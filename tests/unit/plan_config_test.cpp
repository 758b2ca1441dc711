// `sluice plan --config` (sluice_plan_config) on the three published shapes
// (tests/plan/*.config.json, from ../shared/spec/MODEL.md §12): the family,
// layer schedule and expert record follow from the config; the budget rule
// is the engine's; the hit rate comes from replaying a routing trace through
// the cache policy and grows with the cache. Bad configs are refused naming
// the key.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "sluice/sluice.h"

namespace fs = std::filesystem;

namespace {

std::string cfg(const char *name) { return std::string(SLUICE_TEST_SOURCE_DIR) + "/plan/" + name + ".config.json"; }

sluice_config_plan plan(const std::string &path, uint64_t ram_gb, const char *trace = nullptr, double gbps = 0) {
    sluice_config_plan p{};
    char err[512] = {0};
    EXPECT_EQ(sluice_plan_config(path.c_str(), ram_gb << 30, 0, trace, nullptr, gbps, &p, err, sizeof err), SLUICE_OK)
        << err;
    return p;
}

void show(const char *what, const sluice_config_plan &p) {
    std::printf("%-16s %-11s container %6.1f GB, trunk.bin %5.1f GB, resident trunk %5.1f GB, floor %5.1f GB, record "
                "%.2f MiB, %d MoE layers x %d top-%d, budget %5.1f GB, cache %5.1f GB (%.1f %% of experts)\n",
                what, p.family, p.container_bytes / 1e9, p.trunk_file_bytes / 1e9, p.plan.trunk / 1e9,
                p.plan.floor / 1e9, p.plan.record_bytes / 1048576.0, p.moe_layers, p.experts, p.top_k,
                p.plan.budget / 1e9, p.plan.cache / 1e9, 100 * p.cache_fraction);
}

TEST(PlanConfig, KimiK3PublishedShape) {
    const auto p = plan(cfg("kimi-k3"), 64);
    show("Kimi K3, 64 GB", p);
    EXPECT_STREQ(p.family, "kimi-k3");
    EXPECT_EQ(p.moe_layers, 92);
    EXPECT_EQ(p.experts, 896);
    EXPECT_EQ(p.top_k, 16);
    // r_lat 3584 -> I 3072 at VQ3R: 11.83 MiB a record, 4 KiB aligned.
    EXPECT_NEAR(p.plan.record_bytes / 1048576.0, 11.83, 0.005);
    EXPECT_EQ(p.plan.record_bytes % 4096, 0u);
    EXPECT_EQ(p.expert_bytes, 92ull * 896 * p.plan.record_bytes);
    // warp documents a 27.3 GB K3 trunk; sluice holds the Q4G scales as
    // f32, so its resident trunk is a little larger, but the same order.
    EXPECT_GT(p.plan.trunk, 22e9);
    EXPECT_LT(p.plan.trunk, 34e9);
    EXPECT_GE(p.plan.floor, p.plan.trunk);
    // A cold token reads 92 x 16 records: about 18 GB.
    EXPECT_NEAR(p.plan.working_set / 1e9, 18.26, 0.05);
}

TEST(PlanConfig, KimiLinear48BPublishedShape) {
    const auto p = plan(cfg("kimi-linear-48b"), 24);
    show("Kimi-Linear 48B", p);
    EXPECT_STREQ(p.family, "kimi-linear");
    EXPECT_EQ(p.moe_layers, 26);
    EXPECT_EQ(p.experts, 256);
    EXPECT_EQ(p.top_k, 8);
    // `sluice synth`'s default is this shape; its container is ~19 GB.
    EXPECT_GT(p.container_bytes, 15e9);
    EXPECT_LT(p.container_bytes, 22e9);
    EXPECT_EQ(p.fits, 1);
}

TEST(PlanConfig, KimiK2DeepSeekSpellings) {
    const auto p = plan(cfg("kimi-k2"), 128);
    show("Kimi K2", p);
    EXPECT_STREQ(p.family, "deepseek");
    EXPECT_EQ(p.moe_layers, 60);  // 61 layers, first_k_dense_replace 1
    EXPECT_EQ(p.experts, 384);    // n_routed_experts
    EXPECT_EQ(p.top_k, 8);        // num_experts_per_tok
    EXPECT_GT(p.container_bytes, 300e9);  // ~1T parameters at ~3 bits
}

TEST(PlanConfig, BudgetFollowsRamAndHitRateFollowsTheCache) {
    const std::string trace = std::string(SLUICE_FIXTURES_DIR) + "/../traces/kimi-linear-48b-route-150.jsonl";
    if (!fs::exists(trace)) GTEST_SKIP() << "no routing trace at " << trace;
    double last_hit = -1, last_budget = 0;
    for (uint64_t ram : {16, 24, 32, 64, 128}) {
        const auto p = plan(cfg("kimi-linear-48b"), ram, trace.c_str(), 2.0);
        std::printf("Kimi-Linear 48B, RAM %3llu GB: budget %6.2f GB, cache %.1f %% of experts, hit %.1f %%, %.2f GB "
                    "read/token, %.2f tok/s at 2 GB/s\n",
                    (unsigned long long)ram, p.plan.budget / 1e9, 100 * p.cache_fraction, 100 * p.hit_rate,
                    p.read_bytes_per_token / 1e9, p.tok_per_s);
        EXPECT_GE(p.hit_rate, 0.0);
        EXPECT_LE(p.hit_rate, 1.0);
        EXPECT_GE(p.hit_rate, last_hit) << "a larger cache must not hit less";
        EXPECT_GE((double)p.plan.budget, last_budget);
        EXPECT_LE(p.plan.budget, (ram << 30) / 4 * 3) << "the budget leaves a quarter of RAM to the OS";
        EXPECT_NEAR(p.tok_per_s, 2e9 / p.read_bytes_per_token, 1e-9 * p.tok_per_s);
        last_hit = p.hit_rate;
        last_budget = (double)p.plan.budget;
    }
    EXPECT_GT(last_hit, 0.3) << "the trace's reuse shows through a cache of a tenth of the expert set";
    // No trace: no hit rate is invented.
    const auto n = plan(cfg("kimi-linear-48b"), 24);
    EXPECT_EQ(n.hit_rate, -1.0);
    EXPECT_EQ(n.tok_per_s, 0.0);
}

TEST(PlanConfig, BadConfigsAreRefusedNamingTheKey) {
    const fs::path d = fs::temp_directory_path() / ("sluice-plan-cfg-" + std::to_string(::getpid()));
    fs::create_directories(d);
    auto refuse = [&](const std::string &body, const std::string &needle) {
        const fs::path f = d / "config.json";
        std::ofstream(f) << body;
        sluice_config_plan p{};
        char err[512] = {0};
        EXPECT_NE(sluice_plan_config(f.string().c_str(), 16ull << 30, 0, nullptr, nullptr, 0, &p, err, sizeof err),
                  SLUICE_OK)
            << body;
        std::printf("refused: %s\n", err);
        EXPECT_NE(std::string(err).find(needle), std::string::npos) << err;
    };
    refuse("{", "not JSON");
    refuse("{\"hidden_size\": 2304}", "num_hidden_layers");
    refuse("{\"num_hidden_layers\": 100000, \"hidden_size\": 8}", "num_hidden_layers");
    refuse("{\"num_hidden_layers\": 2, \"hidden_size\": \"big\"}", "hidden_size");
    sluice_config_plan p{};
    char err[256] = {0};
    EXPECT_NE(sluice_plan_config((d / "absent.json").string().c_str(), 16ull << 30, 0, nullptr, nullptr, 0, &p, err,
                                 sizeof err),
              SLUICE_OK);
    std::printf("refused: %s\n", err);
    fs::remove_all(d);
}

}  // namespace
