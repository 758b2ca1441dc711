// Issue 14 item 3 at K3 scale: peak RSS (VmHWM: every page the process
// ever held) stays under the budget on the full-size K3-shaped container
// (`sluice synth --family k3`, ~42 GB, 11.83 MB records). SLUICE_K3_MODEL
// names it; without it each test SKIPs with the reason. One budget per
// process (VmHWM is per process): CTest runs each test on its own.
//  - UnderBudgetWith4GiBCache: budget = floor + 4 GiB, 16 + 16 tokens.
//  - UnderTheDefaultBudget: the budget sluice picks on this machine.
#include <gtest/gtest.h>

#include "proc_status.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sluice/sluice.h"

namespace fs = std::filesystem;

namespace {

const char *model() { return std::getenv("SLUICE_K3_MODEL"); }

using sluice_test::vm_hwm_kb;

// Opens under `extra` cache above the floor (0: the default budget), runs a
// 16-token prompt in chunks and 16 greedy tokens, and compares VmHWM.
void run_under(uint64_t extra) {
    if (!model()) GTEST_SKIP() << "SLUICE_K3_MODEL is not set (a container from `sluice synth --family k3`)";
    if (!fs::exists(fs::path(model()) / "manifest.json")) GTEST_SKIP() << model() << " has no manifest.json";
    if (vm_hwm_kb() < 0) GTEST_SKIP() << "no VmHWM in /proc/self/status";
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.n_threads = 2;
    cfg.no_hotlist = 1;
    if (extra) {
        sluice_memory_plan plan{};
        char err[512] = {0};
        ASSERT_EQ(sluice_plan_model(model(), 0, 0, nullptr, &plan, err, sizeof err), SLUICE_OK) << err;
        // The floor of the open (its thread count) may differ a little from
        // plan_model's: ask for floor + extra + 64 MiB of margin for that.
        cfg.budget_bytes = plan.floor + extra + (64ull << 20);
    }
    sluice_ctx *ctx = nullptr;
    ASSERT_EQ(sluice_open(model(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
    sluice_memory_plan plan{};
    ASSERT_EQ(sluice_memory_plan_get(ctx, &plan), SLUICE_OK);
    const int V = sluice_n_vocab(ctx);
    std::vector<int32_t> prompt(16);
    for (size_t i = 0; i < prompt.size(); i++) prompt[i] = (int32_t)((i * 7919 + 101) % (size_t)V);
    std::vector<float> lg((size_t)V);
    ASSERT_EQ(sluice_eval(ctx, prompt.data(), prompt.size(), lg.data()), SLUICE_OK) << sluice_last_error(ctx);
    for (int i = 0; i < 16; i++) {
        int32_t t = (int32_t)(std::max_element(lg.begin(), lg.end()) - lg.begin());
        ASSERT_EQ(sluice_eval(ctx, &t, 1, lg.data()), SLUICE_OK) << sluice_last_error(ctx);
    }
    sluice_stats st{};
    sluice_stats_get(ctx, &st);
    const long hwm = vm_hwm_kb();
    std::printf("K3 scale: budget %.2f GiB (%s), floor %.2f GiB (trunk %.2f, page tables %.1f MiB, %d thread stacks "
                "%.1f MiB), cache %.2f GiB; peak RSS %.2f GiB = %.3f x budget; %llu tokens in %.1f s, %llu records "
                "read, cache shrinks %llu\n",
                plan.budget / 1073741824.0, plan.choice, plan.floor / 1073741824.0, plan.trunk / 1073741824.0,
                plan.page_tables / 1048576.0, plan.threads, plan.thread_stacks / 1048576.0, plan.cache / 1073741824.0,
                hwm / 1048576.0, hwm * 1024.0 / (double)plan.budget, (unsigned long long)st.tokens_evaluated,
                st.seconds_eval, (unsigned long long)st.expert_reads, (unsigned long long)st.cache_shrinks);
    EXPECT_LE((uint64_t)hwm * 1024, plan.budget) << "peak RSS over the budget";
    sluice_close(ctx);
}

TEST(K3Rss, UnderBudgetWith4GiBCache) { run_under(4ull << 30); }

TEST(K3Rss, UnderTheDefaultBudget) { run_under(0); }

}  // namespace
