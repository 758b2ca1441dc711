// Issue 14: the cache cliff cannot happen. On a generated model, the
// pressure watcher shrinks the expert cache when available memory (an
// injected reading, then a real child process taking memory) falls under
// the reserve, returns the memory, grows back when it is free again, and
// the logits stay bit-identical throughout. Also the automatic budget from
// a fake cgroup tree.
#include <gtest/gtest.h>

#include "proc_status.h"
#include "router_model.h"

#include <sys/mman.h>
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "runtime/mem_status.h"
#include "sluice/sluice.h"
#include "synth/synth.h"

namespace fs = std::filesystem;

namespace {

constexpr uint64_t GiB = 1ull << 30, MiB = 1ull << 20;

using sluice_test::vm_rss_kb;

// 64 experts, top-8, 4 MoE layers of 256-wide experts: about 20 MiB of
// records, written once for the suite.
class Pressure : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = fs::temp_directory_path() / ("sluice-pressure-" + std::to_string(::getpid()));
        fs::create_directories(dir_);
        sluice::SynthOptions o = sluice_test::router_shape_synth((dir_ / "m.waste").string());
        o.vocab = 512;
        o.moe_inter = 256;
        const sluice::Status st = sluice::run_synth(o, nullptr);
        ok_ = st.is_ok();
        why_ = st.message();
        model_ = o.out;
    }
    static void TearDownTestSuite() { fs::remove_all(dir_); }
    void SetUp() override { ASSERT_TRUE(ok_) << why_; }

    static inline fs::path dir_;
    static inline std::string model_, why_;
    static inline bool ok_ = false;
};

// The injected reading (sluice_config.memory_probe).
std::atomic<uint64_t> g_avail{0};
int32_t probe(void *, uint64_t *out) {
    *out = g_avail.load();
    return 1;
}

sluice_config base_config() {
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.n_threads = 2;
    cfg.no_hotlist = 1;
    cfg.prefill_chunk = 1;
    return cfg;
}

sluice_stats stats(sluice_ctx *ctx) {
    sluice_stats s{};
    EXPECT_EQ(sluice_stats_get(ctx, &s), SLUICE_OK);
    return s;
}

// Waits (up to 5 s; the watcher polls every 10 ms here) until pred holds.
template <class P>
bool wait_for(sluice_ctx *ctx, P pred) {
    for (int i = 0; i < 500; i++) {
        if (pred(stats(ctx))) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return pred(stats(ctx));
}

std::vector<int32_t> prompt(int V) {
    std::vector<int32_t> ids(24);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = (int32_t)((i * 97 + 5) % (size_t)V);
    return ids;
}

TEST_F(Pressure, InjectedShortageShrinksTheCacheReturnsMemoryAndGrowsBack) {
    sluice_config cfg = base_config();
    cfg.memory_probe = probe;
    cfg.pressure_reserve_bytes = GiB;
    cfg.pressure_poll_ms = 10;
    g_avail = 16 * GiB;
    sluice_ctx *ctx = nullptr;
    ASSERT_EQ(sluice_open(model_.c_str(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
    const int V = sluice_n_vocab(ctx);
    const auto ids = prompt(V);
    std::vector<float> lg((size_t)V);
    ASSERT_EQ(sluice_eval(ctx, ids.data(), ids.size(), lg.data()), SLUICE_OK) << sluice_last_error(ctx);
    sluice_stats s = stats(ctx);
    ASSERT_EQ(s.pressure_watch, 1);
    EXPECT_EQ(s.cache_shrinks, 0u);
    EXPECT_EQ(s.cache_grows, 0u);
    const uint64_t planned = s.cache_capacity_bytes, held = s.cache_bytes_used;
    ASSERT_GT(planned, 0u);
    EXPECT_LE(planned, s.cache_bytes) << "the capacity never exceeds the plan's cache";
    ASSERT_GT(held, 4 * MiB) << "the prompt must have filled some cache";
    const long rss_full = vm_rss_kb();
    // Another process takes memory: 512 MiB left, under the 1 GiB reserve.
    g_avail = 512 * MiB;
    ASSERT_TRUE(wait_for(ctx, [](const sluice_stats &x) { return x.cache_shrinks > 0 && x.cache_bytes_used == 0; }));
    s = stats(ctx);
    const long rss_shrunk = vm_rss_kb();
    std::printf("cache %.1f MiB held of %.1f MiB; after the shortage: capacity %.1f MiB, held %.1f MiB, %.1f MiB "
                "returned, VmRSS %ld -> %ld kB\n",
                held / (double)MiB, planned / (double)MiB, s.cache_capacity_bytes / (double)MiB,
                s.cache_bytes_used / (double)MiB, s.cache_bytes_released / (double)MiB, rss_full, rss_shrunk);
    EXPECT_EQ(s.cache_capacity_bytes, 0u) << "640 MiB missing is more than the whole cache";
    EXPECT_GE(s.cache_bytes_released, held / 2);
    EXPECT_LE(rss_shrunk, rss_full - (long)(held / 2 / 1024)) << "the records' memory must leave the process";
    EXPECT_EQ(s.memory_available, 512 * MiB);
    EXPECT_EQ(s.pressure_reserve, GiB);
    // Decoding goes on with no cache.
    int32_t t = 7;
    ASSERT_EQ(sluice_eval(ctx, &t, 1, lg.data()), SLUICE_OK);
    // The memory comes back: so does the cache, to its planned size, not beyond.
    g_avail = 16 * GiB;
    ASSERT_TRUE(wait_for(ctx, [&](const sluice_stats &x) { return x.cache_capacity_bytes == planned; }));
    s = stats(ctx);
    EXPECT_GE(s.cache_grows, 1u);
    const uint64_t shrinks = s.cache_shrinks;
    // Inside the band (reserve + a step): no further change.
    g_avail = GiB + 128 * MiB;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(stats(ctx).cache_shrinks, shrinks);
    sluice_close(ctx);
}

TEST_F(Pressure, LogitsBitIdenticalWithShrinksAndGrowsMidGeneration) {
    auto generate = [&](bool squeeze, sluice_stats *out) {
        sluice_config cfg = base_config();
        if (squeeze) {
            cfg.memory_probe = probe;
            cfg.pressure_reserve_bytes = GiB;
            cfg.pressure_poll_ms = 10;
            g_avail = 16 * GiB;
        } else {
            cfg.no_pressure_watch = 1;
        }
        sluice_ctx *ctx = nullptr;
        EXPECT_EQ(sluice_open(model_.c_str(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
        const uint64_t planned = stats(ctx).cache_capacity_bytes;
        const int V = sluice_n_vocab(ctx);
        const auto ids = prompt(V);
        std::vector<float> all((size_t)V * (ids.size() + 12));
        EXPECT_EQ(sluice_eval_all(ctx, ids.data(), ids.size(), all.data()), SLUICE_OK);
        for (int i = 0; i < 12; i++) {
            if (squeeze && i % 4 == 1) {
                // Every fourth step the memory goes (the cache empties), the
                // next it comes back; the watcher acts while we wait.
                g_avail = 256 * MiB;
                wait_for(ctx, [](const sluice_stats &x) { return x.cache_capacity_bytes == 0; });
            } else if (squeeze && i % 4 == 2) {
                g_avail = 16 * GiB;
                wait_for(ctx, [&](const sluice_stats &x) { return x.cache_capacity_bytes == planned; });
            }
            const float *last = all.data() + (ids.size() + i - 1) * V;
            int32_t t = (int32_t)(std::max_element(last, last + V) - last);
            EXPECT_EQ(sluice_eval(ctx, &t, 1, all.data() + (ids.size() + i) * V), SLUICE_OK);
        }
        *out = stats(ctx);
        sluice_close(ctx);
        return all;
    };
    sluice_stats s0, s1;
    const auto ref = generate(false, &s0);
    const auto got = generate(true, &s1);
    std::printf("watcher off: %d, shrinks %llu; squeezed: shrinks %llu, grows %llu, %.1f MiB returned, records read "
                "%llu vs %llu\n",
                s0.pressure_watch, (unsigned long long)s0.cache_shrinks, (unsigned long long)s1.cache_shrinks,
                (unsigned long long)s1.cache_grows, s1.cache_bytes_released / (double)MiB,
                (unsigned long long)s0.expert_reads, (unsigned long long)s1.expert_reads);
    EXPECT_EQ(s0.pressure_watch, 0);
    EXPECT_GE(s1.cache_shrinks, 3u);
    EXPECT_GE(s1.cache_grows, 3u);
    EXPECT_GT(s1.expert_reads, s0.expert_reads) << "an emptied cache must cost reads (else nothing was shrunk)";
    ASSERT_EQ(ref.size(), got.size());
    EXPECT_EQ(std::memcmp(ref.data(), got.data(), ref.size() * sizeof(float)), 0)
        << "shrinking and growing the cache changed the logits";
}

TEST_F(Pressure, ARealChildTakingMemoryShrinksTheCache) {
    sluice::MemStatus m = sluice::read_mem_status(sluice::MemPaths{});
    if (!m.have_meminfo) GTEST_SKIP() << "no MemAvailable in /proc/meminfo on this system";
    const uint64_t take = 640 * MiB, margin = 192 * MiB;
    if (m.available() < 4 * take) GTEST_SKIP() << "only " << m.available() / MiB << " MiB available: too little to "
                                                                                     "take 640 MiB for the test";
    sluice_config cfg = base_config();
    cfg.pressure_poll_ms = 20;
    // The reserve set just under what is available now: the child pushes
    // MemAvailable below it once it holds `margin`; other processes' noise
    // (less than that in the second this takes) does not.
    cfg.pressure_reserve_bytes = m.available() - margin;
    sluice_ctx *ctx = nullptr;
    ASSERT_EQ(sluice_open(model_.c_str(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
    const int V = sluice_n_vocab(ctx);
    const auto ids = prompt(V);
    ASSERT_EQ(sluice_eval(ctx, ids.data(), ids.size(), nullptr), SLUICE_OK);
    const sluice_stats before = stats(ctx);
    ASSERT_GT(before.cache_bytes_used, 0u);
    ASSERT_EQ(before.cache_shrinks, 0u) << "memory ran short before the child started (a busy machine)";
    const auto t0 = std::chrono::steady_clock::now();
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        // Only system calls after fork in a threaded process: map, touch
        // every page, then wait to be killed. (A first touch costs the host
        // a fault each on these VMs, about 90 MB/s: the parent stops the
        // child as soon as the cache has shrunk.)
        void *p = ::mmap(nullptr, take, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) ::_exit(1);
        for (size_t i = 0; i < take; i += 4096) static_cast<volatile char *>(p)[i] = 1;
        for (;;) ::pause();
    }
    bool shrank = false;
    for (int i = 0; i < 1500 && !shrank; i++) {  // 15 s at most
        shrank = stats(ctx).cache_shrinks > 0;
        if (!shrank) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const sluice_stats after = stats(ctx);
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    std::printf("reserve %.0f MiB (available at open - %.0f MiB); a child taking up to %.0f MiB: the cache shrank "
                "after %.2f s (shrinks %llu, capacity %.1f -> %.1f MiB, %.1f MiB returned, available seen %.0f MiB)\n",
                cfg.pressure_reserve_bytes / (double)MiB, margin / (double)MiB, take / (double)MiB, waited,
                (unsigned long long)after.cache_shrinks, before.cache_capacity_bytes / (double)MiB,
                after.cache_capacity_bytes / (double)MiB, after.cache_bytes_released / (double)MiB,
                after.memory_available / (double)MiB);
    EXPECT_TRUE(shrank) << "a second process taking memory did not shrink the cache";
    EXPECT_LT(after.cache_capacity_bytes, before.cache_capacity_bytes);
    EXPECT_GT(after.cache_bytes_released, 0u);
    sluice_close(ctx);
}

TEST_F(Pressure, FakeCgroupRoomBoundsTheDefaultBudget) {
    // A cgroup of 3 GiB with 1 GiB charged leaves 2 GiB of room; the
    // reserve is max(1 GiB, 10 % of 3 GiB) = 1 GiB, so the default budget is
    // 1 GiB if the model can use that much, else floor + every record.
    const fs::path root = dir_ / "cg";
    fs::create_directories(root);
    std::ofstream(root / "memory.max") << 3 * GiB << "\n";
    std::ofstream(root / "memory.current") << GiB << "\n";
    sluice_memory_plan p{};
    char err[512] = {0};
    ASSERT_EQ(sluice_plan_model(model_.c_str(), 0, 4096, root.c_str(), &p, err, sizeof err), SLUICE_OK) << err;
    std::printf("cgroup 3 GiB, 1 GiB charged: available %.2f GiB, reserve %.2f GiB, budget %.1f MiB (floor %.1f MiB, "
                "all records at %.1f MiB): %s\n",
                p.available / (double)GiB, p.reserve / (double)GiB, p.budget / (double)MiB, p.floor / (double)MiB,
                p.max_useful / (double)MiB, p.choice);
    EXPECT_EQ(p.ram_limit, 3 * GiB);
    EXPECT_LE(p.available, 2 * GiB);
    EXPECT_EQ(p.reserve, GiB);
    EXPECT_EQ(p.budget, std::max(p.floor, std::min(p.max_useful, p.available - GiB)));
    EXPECT_GT(p.page_tables, 0u);
    EXPECT_GT(p.thread_stacks, 0u);
    // Every term of the floor is named: what is left is the floor's own page tables.
    const uint64_t named = p.trunk + p.kda_state + p.checkpoints + p.replay_log + p.mla_kv + p.scratch + p.min_cache + p.vision + p.runtime +
                           p.allocator_slack + p.thread_stacks;
    ASSERT_GT(p.floor, named);
    EXPECT_LE(p.floor - named, p.page_tables);
    EXPECT_EQ(p.floor - named, (named + 511) / 512);
    fs::remove_all(root);
}

}  // namespace
