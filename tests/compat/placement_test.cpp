// Placement changes timing, never results: expert cache on/off, read-ahead
// on/off, router lookahead on/off, synchronous reads, buffered vs direct
// I/O and a pre-warmed hotlist all give bit-identical logits. Also: the
// memory plan's budget rules and the cgroup limit read through a fake tree.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "fixtures_util.h"
#include "router_model.h"
#include "sluice/sluice.h"
#include "synth/synth.h"

using namespace sluice_test;
namespace fs = std::filesystem;

namespace {

struct Placement {
    const char *what;
    int no_cache, io_threads, no_readahead, no_lookahead, no_direct, chunk;
    const char *hotlist;
    int threads = 0;  // 0 = the default
    int io_engine = SLUICE_IO_AUTO, io_depth = 0;
    const char *policy = nullptr;
    int cache_records = 0;  // > 0: a budget whose expert cache holds this many records (forces evictions)
    int backend = SLUICE_BACKEND_AUTO;
};

std::vector<float> run_all(const std::string &model, const std::vector<int32_t> &ids, const Placement &p,
                           sluice_stats *stats = nullptr, const char *learn = nullptr) {
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.no_cache = p.no_cache;
    cfg.io_threads = p.io_threads;
    cfg.no_readahead = p.no_readahead;
    cfg.no_lookahead = p.no_lookahead;
    cfg.no_direct_io = p.no_direct;
    cfg.prefill_chunk = p.chunk;
    // chunk 1: a token at a time, as decode runs (the lookahead's case);
    // other chunks run in the plan's waves.
    cfg.prefill_wave = p.chunk == 1 ? 1 : 0;
    cfg.hotlist = p.hotlist;
    cfg.no_hotlist = p.hotlist ? 0 : 1;
    cfg.n_threads = p.threads;
    cfg.io_engine = p.io_engine;
    cfg.io_depth = p.io_depth;
    cfg.cache_policy = p.policy;
    cfg.backend = p.backend;
    if (p.cache_records > 0) {
        // The floor depends on the chunk: ask an engine opened like this one.
        sluice_ctx *probe = nullptr;
        sluice_memory_plan plan{};
        EXPECT_EQ(sluice_open(model.c_str(), &cfg, &probe), SLUICE_OK) << sluice_last_error(probe);
        EXPECT_EQ(sluice_memory_plan_get(probe, &plan), SLUICE_OK);
        sluice_close(probe);
        // The floor counts this process's measured footprint in 8 MiB steps,
        // and the next open can measure one step more (parallel ctest: a
        // budget of 24.4 MiB under a floor of 31.8 MiB). One step of slack:
        // the cache is then up to 8 MiB larger, still far under the model's
        // records, so it still evicts.
        plan.floor += 8u << 20;
        cfg.budget_bytes = plan.floor + (uint64_t)p.cache_records * plan.record_bytes - plan.min_cache / 2;
    }
    sluice_ctx *ctx = nullptr;
    sluice_status st = sluice_open(model.c_str(), &cfg, &ctx);
    EXPECT_EQ(st, SLUICE_OK) << sluice_last_error(ctx);
    std::vector<float> all;
    if (st == SLUICE_OK) {
        const int V = sluice_n_vocab(ctx);
        all.resize((size_t)V * (ids.size() + 8));
        EXPECT_EQ(sluice_eval_all(ctx, ids.data(), ids.size(), all.data()), SLUICE_OK) << sluice_last_error(ctx);
        // Greedy decode 8 more steps so single-token paths are covered too.
        for (int i = 0; i < 8; i++) {
            const float *last = all.data() + (ids.size() + i - 1) * V;
            int32_t t = (int32_t)(std::max_element(last, last + V) - last);
            EXPECT_EQ(sluice_eval(ctx, &t, 1, all.data() + (ids.size() + i) * V), SLUICE_OK);
        }
        if (stats) sluice_stats_get(ctx, stats);
        if (learn) {
            EXPECT_EQ(sluice_save_usage(ctx, learn), SLUICE_OK) << sluice_last_error(ctx);
        }
    }
    sluice_close(ctx);
    return all;
}

// The shared router-shape model (router_model.h), written to dir/m.waste.
void synth_router_model(const fs::path &dir, sluice::SynthOptions *out) {
    *out = router_shape_synth((dir / "m.waste").string());
    fs::create_directories(dir);
    const sluice::Status st = sluice::run_synth(*out, nullptr);
    ASSERT_TRUE(st) << st.message();
}

class Placements : public ::testing::TestWithParam<std::string> {};

TEST_P(Placements, BitIdentical) {
    const std::string name = GetParam();
    const std::string model = container_path(name);
    std::vector<int32_t> ids;
    for (auto &c : fixture_cases(name))
        if (c.ids.size() > ids.size()) ids = c.ids;
    const std::string hot = (fs::temp_directory_path() / ("sluice-hot-" + std::to_string(::getpid()) + ".waste")).string();
    const Placement base = {"no cache, sync reads, token at a time", 1, -1, 1, 1, 1, 1, nullptr};
    sluice_stats s0;
    const auto ref = run_all(model, ids, base, &s0, hot.c_str());
    const Placement variants[] = {
        {"cache on (default budget)", 0, 0, 0, 0, 0, 1, nullptr},
        {"cache on, no read-ahead", 0, 0, 1, 0, 0, 1, nullptr},
        {"cache on, no lookahead", 0, 0, 0, 1, 0, 1, nullptr},
        {"no cache, read-ahead + lookahead", 1, 2, 0, 0, 0, 1, nullptr},
        {"4 I/O threads, chunk 64", 0, 4, 0, 0, 0, 64, nullptr},
        {"direct I/O requested", 0, 2, 0, 0, 0, 1, nullptr},
        {"hotlist preloaded", 0, 2, 0, 0, 0, 1, hot.c_str()},
        {"threads engine, depth 1, lru", 0, 0, 0, 0, 0, 1, nullptr, 0, SLUICE_IO_THREADS, 1, "lru"},
        {"threads engine, depth 8, lfru", 0, 0, 0, 0, 0, 1, nullptr, 0, SLUICE_IO_THREADS, 8, "lfru"},
        {"auto engine (io_uring), depth 3, freq", 0, 0, 0, 0, 0, 1, nullptr, 0, SLUICE_IO_AUTO, 3, "freq"},
        {"threads engine, depth 4, pred", 0, 0, 0, 0, 0, 1, nullptr, 0, SLUICE_IO_THREADS, 4, "pred"},
        {"auto engine (io_uring), depth 8, no cache", 1, 0, 0, 0, 0, 64, nullptr, 0, SLUICE_IO_AUTO, 8, nullptr},
    };
    for (const Placement &p : variants) {
        sluice_stats s;
        const auto got = run_all(model, ids, p, &s);
        const bool same = got.size() == ref.size() && std::memcmp(got.data(), ref.data(), ref.size() * 4) == 0;
        const uint64_t acc = s.expert_cache_hits + s.expert_cache_misses;
        std::printf("%-22s %-34s %s  reads %4llu  hits %4llu/%-4llu  prefetched %4llu used %4llu  %s\n", name.c_str(),
                    p.what, same ? "bit-identical" : "DIFFERENT", (unsigned long long)s.expert_reads,
                    (unsigned long long)s.expert_cache_hits, (unsigned long long)acc,
                    (unsigned long long)s.experts_prefetched, (unsigned long long)s.experts_prefetch_used,
                    s.direct_io ? "O_DIRECT" : "buffered");
        EXPECT_TRUE(same) << name << ": " << p.what;
    }
    fs::remove(hot);
}

INSTANTIATE_TEST_SUITE_P(Warp, Placements, ::testing::ValuesIn(fixture_names()),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                             std::string s = i.param;
                             for (char &c : s)
                                 if (!isalnum((unsigned char)c)) c = '_';
                             return s;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Placements);

// The same on a generated model with the full-scale router shape (64
// experts, top-8, 64-row-aligned expert widths): the fixtures route top-2/3
// of 8, so only this one drives the expert-parallel MoE path in single-token
// steps and the 64-row VQ product blocks. Thread counts are varied too.
TEST(PlacementsGenerated, BitIdentical) {
    const fs::path dir = fs::temp_directory_path() / ("sluice-synth-" + std::to_string(::getpid()));
    sluice::SynthOptions o;
    ASSERT_NO_FATAL_FAILURE(synth_router_model(dir, &o));
    std::vector<int32_t> ids(40);
    for (int i = 0; i < 40; i++) ids[(size_t)i] = (i * 97 + 5) % o.vocab;
    const std::string hot = (dir / "hot.waste").string();
    const Placement base = {"no cache, sync reads, token at a time, 1 thread", 1, -1, 1, 1, 1, 1, nullptr, 1};
    sluice_stats s0;
    const auto ref = run_all(o.out, ids, base, &s0, hot.c_str());
    const Placement variants[] = {
        {"cache on, 2 threads", 0, 0, 0, 0, 0, 1, nullptr, 2},
        {"cache on, no lookahead, 3 threads", 0, 0, 0, 1, 0, 1, nullptr, 3},
        {"no cache, read-ahead, 2 threads", 1, 2, 0, 0, 0, 1, nullptr, 2},
        {"chunk 64, 2 threads", 0, 2, 0, 0, 0, 64, nullptr, 2},
        {"chunk 7, 4 I/O threads, 2 threads", 0, 4, 0, 0, 0, 7, nullptr, 2},
        {"hotlist preloaded, 2 threads", 0, 2, 0, 0, 0, 1, hot.c_str(), 2},
        {"buffered I/O, 1 thread", 0, 2, 0, 0, 1, 1, nullptr, 1},
        {"threads engine depth 1, lru, 2 threads", 0, 0, 0, 0, 0, 1, nullptr, 2, SLUICE_IO_THREADS, 1, "lru"},
        {"threads engine depth 8, lfru, chunk 5, 3 threads", 0, 0, 0, 0, 0, 5, nullptr, 3, SLUICE_IO_THREADS, 8, "lfru"},
        {"auto engine (io_uring) depth 16, freq, 2 threads", 0, 0, 0, 0, 0, 1, nullptr, 2, SLUICE_IO_AUTO, 16, "freq"},
        {"auto engine (io_uring) depth 4, no cache, chunk 64", 1, 0, 0, 0, 0, 64, nullptr, 2, SLUICE_IO_AUTO, 4, nullptr},
        {"12-record cache, freq, 2 threads", 0, 0, 0, 0, 0, 1, nullptr, 2, SLUICE_IO_AUTO, 8, "freq", 12},
        {"12-record cache, pred, 2 threads", 0, 0, 0, 0, 0, 1, nullptr, 2, SLUICE_IO_AUTO, 8, "pred", 12},
        {"12-record cache, lfru, chunk 3", 0, 0, 0, 0, 0, 3, nullptr, 2, SLUICE_IO_THREADS, 2, "lfru", 12},
        {"12-record cache, lru, hotlist, 1 thread", 0, 0, 0, 0, 0, 1, hot.c_str(), 1, SLUICE_IO_AUTO, 8, "lru", 12},
        // The kernel sets, bit-identical to the scalar reference.
        {"scalar kernels, chunk 64, 2 threads", 0, 2, 0, 0, 0, 64, nullptr, 2, SLUICE_IO_AUTO, 0, nullptr, 0,
         SLUICE_BACKEND_SCALAR},
        {"avx2 kernels, chunk 64, 2 threads", 0, 2, 0, 0, 0, 64, nullptr, 2, SLUICE_IO_AUTO, 0, nullptr, 0,
         SLUICE_BACKEND_AVX2},
        {"avx512 kernels, chunk 5, 2 threads", 0, 2, 0, 0, 0, 5, nullptr, 2, SLUICE_IO_AUTO, 0, nullptr, 0,
         SLUICE_BACKEND_AVX512},
        {"neon kernels, chunk 64, 2 threads", 0, 2, 0, 0, 0, 64, nullptr, 2, SLUICE_IO_AUTO, 0, nullptr, 0,
         SLUICE_BACKEND_NEON},
    };
    int checked = 0, skipped = 0;
    for (const Placement &p : variants) {
        if (p.backend != SLUICE_BACKEND_AUTO) {
            sluice_config c;
            sluice_config_default(&c);
            c.backend = p.backend;
            sluice_ctx *probe = nullptr;
            const bool ok = sluice_open(o.out.c_str(), &c, &probe) == SLUICE_OK;
            sluice_close(probe);
            if (!ok) {
                std::printf("generated top-8 of 64  %-36s not on this CPU, skipped\n", p.what);
                skipped++;
                continue;
            }
        }
        sluice_stats s;
        const auto got = run_all(o.out, ids, p, &s);
        const bool same = got.size() == ref.size() && std::memcmp(got.data(), ref.data(), ref.size() * 4) == 0;
        std::printf("generated top-8 of 64  %-36s %s  reads %4llu  prefetched %4llu used %4llu\n", p.what,
                    same ? "bit-identical" : "DIFFERENT", (unsigned long long)s.expert_reads,
                    (unsigned long long)s.experts_prefetched, (unsigned long long)s.experts_prefetch_used);
        EXPECT_TRUE(same) << p.what;
        checked += same;
    }
    std::printf("generated model: %d of %zu placements bit-identical to the 1-thread synchronous baseline (%zu logits; "
                "%d kernel sets not on this CPU)\n",
                checked, sizeof(variants) / sizeof(variants[0]) - (size_t)skipped, ref.size(), skipped);
    fs::remove_all(dir);
}

// Lookahead guesses under a small cache (most fetches miss, as in a model
// far larger than RAM): they go out, and change no logit. (How many go out
// at full scale is a benchmark: bench_budget's "guesses" on the 48B shape,
// docs/PERF.md 2026-12-05; this model's reads land too fast to show it.)
TEST(PlacementsGenerated, LookaheadGuessesGoOutUnderACache) {
    const fs::path dir = fs::temp_directory_path() / ("sluice-synth-la-" + std::to_string(::getpid()));
    sluice::SynthOptions o;
    ASSERT_NO_FATAL_FAILURE(synth_router_model(dir, &o));
    std::vector<int32_t> ids(24);
    for (int i = 0; i < 24; i++) ids[(size_t)i] = (i * 131 + 7) % o.vocab;
    sluice_stats off{}, on{};
    // A cache of 24 of the 256 records: most fetches miss, as in a model
    // far larger than RAM.
    const auto ref = run_all(o.out, ids, {"cache on, no lookahead", 0, 0, 0, 1, 0, 1, nullptr, 2, SLUICE_IO_AUTO, 8, "freq", 24}, &off);
    const auto got = run_all(o.out, ids, {"cache on, lookahead", 0, 0, 0, 0, 0, 1, nullptr, 2, SLUICE_IO_AUTO, 8, "freq", 24}, &on);
    std::printf("cache on (%llu B), lookahead: %llu guesses, %llu used, %llu withdrawn; reads %llu (no lookahead: %llu)\n", (unsigned long long)on.cache_bytes,
                (unsigned long long)on.lookahead_guesses, (unsigned long long)on.lookahead_guesses_used,
                (unsigned long long)on.lookahead_guesses_dropped, (unsigned long long)on.expert_reads,
                (unsigned long long)off.expert_reads);
    EXPECT_EQ(off.lookahead_guesses, 0u);
    EXPECT_GT(on.lookahead_guesses, 0u) << "no lookahead guess went out under a cache";
    ASSERT_EQ(got.size(), ref.size());
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * 4), 0) << "lookahead changed the logits";
    fs::remove_all(dir);
}

TEST(Prefill, ChunkedReadsEachDistinctExpertOncePerChunk) {
    if (!have_fixtures()) GTEST_SKIP() << "no fixtures at " << warp_dir();
    for (const std::string name : {"kimi-linear-tiny", "k3-tiny", "deepseek-yarn-tiny"}) {
        std::vector<int32_t> ids(64);
        for (int i = 0; i < 64; i++) ids[(size_t)i] = (i * 37 + 11) % 200;
        uint64_t reads[2];
        for (int chunk : {1, 64}) {
            sluice_config cfg;
            sluice_config_default(&cfg);
            cfg.no_cache = 1;
            cfg.io_threads = -1;
            cfg.no_hotlist = 1;
            cfg.prefill_chunk = chunk;
            sluice_ctx *ctx = nullptr;
            ASSERT_EQ(sluice_open(container_path(name).c_str(), &cfg, &ctx), SLUICE_OK);
            ASSERT_EQ(sluice_eval(ctx, ids.data(), ids.size(), nullptr), SLUICE_OK);
            sluice_stats s;
            sluice_stats_get(ctx, &s);
            reads[chunk == 64] = s.expert_reads;
            sluice_close(ctx);
        }
        std::printf("%-20s 64-token prompt, no cache: %llu record reads token at a time, %llu chunked (%.1fx fewer)\n",
                    name.c_str(), (unsigned long long)reads[0], (unsigned long long)reads[1],
                    (double)reads[0] / (double)reads[1]);
        EXPECT_LT(reads[1], reads[0]);
    }
}

TEST(MemoryPlan, UnderFloorBudgetIsRefusedNamingTheFloor) {
    if (!have_fixtures()) GTEST_SKIP() << "no fixtures at " << warp_dir();
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.budget_bytes = 1 << 20;
    sluice_ctx *ctx = nullptr;
    EXPECT_EQ(sluice_open(container_path("kimi-linear-tiny").c_str(), &cfg, &ctx), SLUICE_E_NOMEM);
    std::string msg = sluice_last_error(ctx);
    std::printf("%s\n", msg.c_str());
    EXPECT_NE(msg.find("memory floor"), std::string::npos);
    EXPECT_NE(msg.find("sluice plan"), std::string::npos);
    sluice_close(ctx);
}

TEST(MemoryPlan, FakeCgroupLimitDrivesTheAutomaticBudget) {
    if (!have_fixtures()) GTEST_SKIP() << "no fixtures at " << warp_dir();
    const fs::path root = fs::temp_directory_path() / ("sluice-cgroup-" + std::to_string(::getpid()));
    fs::create_directories(root);
    sluice_memory_plan p;
    char err[512];
    const std::string model = container_path("kimi-linear-tiny");
    // A generous memory.high: the automatic budget takes all the tiny model
    // can use (its floor and every expert record).
    std::ofstream(root / "memory.max") << "max\n";
    std::ofstream(root / "memory.high") << (8ull << 30) << "\n";
    ASSERT_EQ(sluice_plan_model(model.c_str(), 0, 4096, root.c_str(), &p, err, sizeof err), SLUICE_OK) << err;
    std::printf("limit %.2f GiB from %s -> budget %.1f MiB: %s\n", p.ram_limit / 1073741824.0, p.ram_source,
                p.budget / 1048576.0, p.choice);
    EXPECT_EQ(p.ram_limit, 8ull << 30);
    EXPECT_EQ(p.budget, p.max_useful);
    // A limit that leaves less than the floor after the 1 GiB reserve: the
    // plan falls back to the floor.
    std::ofstream(root / "memory.max") << (p.floor + p.floor / 4) << "\n";
    ASSERT_EQ(sluice_plan_model(model.c_str(), 0, 4096, root.c_str(), &p, err, sizeof err), SLUICE_OK) << err;
    std::printf("limit %.1f MiB from %s -> budget %.1f MiB: %s\n", p.ram_limit / 1048576.0, p.ram_source,
                p.budget / 1048576.0, p.choice);
    EXPECT_EQ(p.budget, p.floor);
    EXPECT_NE(std::string(p.ram_source).find("memory.max"), std::string::npos);
    // Open honours the same fake tree.
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.cgroup_root = root.c_str();
    sluice_ctx *ctx = nullptr;
    ASSERT_EQ(sluice_open(model.c_str(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
    sluice_memory_plan q;
    ASSERT_EQ(sluice_memory_plan_get(ctx, &q), SLUICE_OK);
    EXPECT_EQ(q.budget, p.budget);
    sluice_close(ctx);
    fs::remove_all(root);
}

}  // namespace
