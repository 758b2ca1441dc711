// Expert-major prefill through the C API: a prompt in one wave reads each
// routed record once per MoE layer (sluice_stats and
// sluice_prefill_layer_reads say so), chunk-sized waves without a cache
// read them again per sub-wave, and the logits are the same bits either way.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "capi/prompt_reuse_models.h"
#include "sluice/sluice.h"

using namespace sluice_test;

namespace {

struct WaveRun {
    sluice_stats st{};
    std::vector<double> layers;
    std::vector<float> logits;
    sluice_memory_plan plan{};
};

WaveRun run_wave(const ReuseModel &m, int chunk, int wave, bool no_cache, size_t n) {
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.n_threads = 2;
    cfg.no_hotlist = 1;
    cfg.no_direct_io = 1;
    cfg.no_lookahead = 1;  // a guess is a read of a record nobody routed to
    cfg.no_cache = no_cache ? 1 : 0;
    cfg.prefill_chunk = chunk;
    cfg.prefill_wave = wave;
    WaveRun r;
    sluice_ctx *ctx = nullptr;
    EXPECT_EQ(sluice_open(m.path.c_str(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
    if (!ctx) return r;
    std::vector<int32_t> ids(n);
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 131 + 7) % (size_t)m.vocab);
    r.logits.resize((size_t)sluice_n_vocab(ctx));
    EXPECT_EQ(sluice_eval(ctx, ids.data(), ids.size(), r.logits.data()), SLUICE_OK) << sluice_last_error(ctx);
    EXPECT_EQ(sluice_stats_get(ctx, &r.st), SLUICE_OK);
    EXPECT_EQ(sluice_memory_plan_get(ctx, &r.plan), SLUICE_OK);
    r.layers.resize((size_t)sluice_prefill_layer_reads(ctx, nullptr, 0));
    EXPECT_EQ(sluice_prefill_layer_reads(ctx, r.layers.data(), (int32_t)r.layers.size()), (int32_t)r.layers.size());
    sluice_close(ctx);
    return r;
}

TEST(PrefillWave, OneWaveReadsEachRecordOnce) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    for (const ReuseModel &m : models) {
        SCOPED_TRACE(m.name);
        const size_t n = 96;
        const WaveRun one = run_wave(m, 4, 0, false, n);      // the plan's wave: the whole prompt
        const WaveRun waves = run_wave(m, 4, 4, true, n);     // chunk-sized waves, no cache
        const WaveRun step = run_wave(m, 1, 1, false, n);     // one token at a time
        ASSERT_GE(one.plan.wave_tokens, (int32_t)n);
        EXPECT_EQ(one.st.prefill_wave_tokens, one.plan.wave_tokens);
        EXPECT_EQ(one.st.prefill_waves, 1u);
        EXPECT_EQ(one.st.prefill_tokens, (uint64_t)n);
        EXPECT_EQ(waves.st.prefill_waves, n / 4);
        ASSERT_EQ(one.layers.size(), (size_t)one.st.prefill_moe_layers);
        ASSERT_GT(one.layers.size(), 0u);
        std::printf("%-12s one wave of %zu: records read per layer mean %.3f max %.3f; %zu waves of 4 without a "
                    "cache: mean %.3f max %.3f\n",
                    m.name.c_str(), n, one.st.prefill_reads_per_record_mean, one.st.prefill_reads_per_record_max,
                    (size_t)waves.st.prefill_waves, waves.st.prefill_reads_per_record_mean,
                    waves.st.prefill_reads_per_record_max);
        for (double r : one.layers) EXPECT_EQ(r, 1.0);  // held across the wave's sub-waves: read once
        // Token at a time (waves of 1) is still one prompt: every layer's
        // routed records are counted, each read at least once.
        ASSERT_EQ(step.layers.size(), one.layers.size());
        for (double r : step.layers) EXPECT_GE(r, 1.0);
        EXPECT_EQ(one.st.prefill_reads_per_record_max, 1.0);
        EXPECT_GT(waves.st.prefill_reads_per_record_mean, 2.0);  // every wave reads its records again
        // Timing only: the same bits.
        EXPECT_EQ(std::memcmp(one.logits.data(), step.logits.data(), one.logits.size() * 4), 0);
        EXPECT_EQ(std::memcmp(waves.logits.data(), step.logits.data(), one.logits.size() * 4), 0);
    }
}

// Issue 33: record buffers are made resident off the reads' path, and the
// statistics say how much and how long; what the pool warmed stays within
// the budget. (The pool's own behaviour: RecordPool.* in the unit suite.)
TEST(PrefillWave, ResidentMemoryIsReported) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    for (const ReuseModel &m : models) {
        SCOPED_TRACE(m.name);
        const WaveRun r = run_wave(m, 4, 0, false, 96);
        std::printf("%-12s warmed %.2f MiB in %.4f s; %llu reads into cold buffers; cache %.2f of %.2f MiB\n",
                    m.name.c_str(), r.st.memory_warmed_bytes / 1048576.0, r.st.seconds_memory_warm,
                    (unsigned long long)r.st.records_into_cold_memory, r.st.cache_bytes_used / 1048576.0,
                    r.st.cache_capacity_bytes / 1048576.0);
        EXPECT_GT(r.st.memory_warmed_bytes + r.st.records_into_cold_memory, 0u) << "a cache was used: memory was made resident";
        EXPECT_GE(r.st.seconds_memory_warm, 0.0);
        EXPECT_LE(r.st.memory_warmed_bytes, r.plan.budget);
        EXPECT_LE(r.st.cache_bytes_used, r.st.cache_capacity_bytes);
    }
}

// A wave asked for is part of the floor; the plan's own comes out of the
// cache's room and never exceeds the context.
TEST(PrefillWave, PlanCountsTheWave) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    const ReuseModel &m = models[0];
    auto plan = [&](int wave) {
        sluice_config cfg;
        sluice_config_default(&cfg);
        cfg.no_hotlist = 1;
        cfg.prefill_chunk = 8;
        cfg.prefill_wave = wave;
        cfg.max_context = 1024;
        sluice_ctx *ctx = nullptr;
        sluice_memory_plan p{};
        EXPECT_EQ(sluice_open(m.path.c_str(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
        if (ctx) {
            EXPECT_EQ(sluice_memory_plan_get(ctx, &p), SLUICE_OK);
        }
        sluice_close(ctx);
        return p;
    };
    const sluice_memory_plan chunk = plan(8), given = plan(512), chosen = plan(0);
    EXPECT_EQ(chunk.wave, 0u);
    EXPECT_EQ(given.wave_tokens, 512);
    EXPECT_GT(given.wave, 0u);
    // The wave and its page tables (8 bytes per 4 KiB page; ceilings apart by one).
    EXPECT_NEAR((double)(given.floor - chunk.floor), (double)(given.wave + given.wave / 512), 1.0);
    EXPECT_LE(chosen.wave_tokens, 1024);
    EXPECT_EQ(chosen.floor, chunk.floor);
    EXPECT_LE(chosen.floor + chosen.wave, chosen.budget);
}

TEST(PrefillWave, RefusesAnAbsurdWave) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.prefill_wave = -3;
    sluice_ctx *ctx = nullptr;
    EXPECT_EQ(sluice_open(models[0].path.c_str(), &cfg, &ctx), SLUICE_E_ARG);
    EXPECT_NE(std::strstr(sluice_last_error(ctx), "prefill_wave"), nullptr) << sluice_last_error(ctx);
    sluice_close(ctx);
}

}  // namespace
