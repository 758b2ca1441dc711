// Placement changes timing, never results: threads, chunking and call
// boundaries give bit-identical logits, and so does every SIMD kernel set
// (AVX2, AVX-512, NEON) against the scalar reference on every fixture.
#include <gtest/gtest.h>

#include <cstring>

#include "fixtures_util.h"
#include "sluice/sluice.h"

using namespace sluice_test;

namespace {

// wave 0: one token at a time when chunk is 1 (the reference), else the
// memory plan's wave.
std::vector<float> run(const std::string &name, const std::vector<int32_t> &ids, int chunk, int backend, int threads,
                       size_t split = 0, int wave = 0) {
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.prefill_chunk = chunk;
    cfg.prefill_wave = wave > 0 ? wave : chunk == 1 ? 1 : 0;
    cfg.backend = backend;
    cfg.n_threads = threads;
    sluice_ctx *ctx = nullptr;
    sluice_status st = sluice_open(container_path(name).c_str(), &cfg, &ctx);
    EXPECT_EQ(st, SLUICE_OK) << sluice_last_error(ctx);
    std::vector<float> out((size_t)sluice_n_vocab(ctx));
    if (st == SLUICE_OK) {
        if (split > 0 && split < ids.size()) {
            EXPECT_EQ(sluice_eval(ctx, ids.data(), split, nullptr), SLUICE_OK);
            EXPECT_EQ(sluice_eval(ctx, ids.data() + split, ids.size() - split, out.data()), SLUICE_OK);
        } else {
            EXPECT_EQ(sluice_eval(ctx, ids.data(), ids.size(), out.data()), SLUICE_OK) << sluice_last_error(ctx);
        }
    }
    sluice_close(ctx);
    return out;
}

bool bit_identical(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

std::vector<int32_t> longest_ids(const std::string &name) {
    std::vector<int32_t> ids;
    for (auto &c : fixture_cases(name))
        if (c.ids.size() > ids.size()) ids = c.ids;
    return ids;
}

class Invariance : public ::testing::TestWithParam<std::string> {};

TEST_P(Invariance, ScalarVsSimd) {
    const std::string name = GetParam();
    const auto ids = longest_ids(name);
    const auto scalar = run(name, ids, 1, SLUICE_BACKEND_SCALAR, 1);
    for (int be : {SLUICE_BACKEND_AVX2, SLUICE_BACKEND_AVX512, SLUICE_BACKEND_NEON}) {
        const char *be_name = be == SLUICE_BACKEND_AVX2 ? "avx2" : be == SLUICE_BACKEND_AVX512 ? "avx512" : "neon";
        sluice_config cfg;
        sluice_config_default(&cfg);
        cfg.backend = be;
        sluice_ctx *ctx = nullptr;
        bool ok = sluice_open(container_path(name).c_str(), &cfg, &ctx) == SLUICE_OK;
        sluice_close(ctx);
        if (!ok) {
            std::printf("%-22s %s: not available on this CPU, skipped\n", name.c_str(), be_name);
            continue;
        }
        const auto simd = run(name, ids, 1, be, 1);
        DiffStats d = diff_stats(simd, scalar);
        const bool same = simd.size() == scalar.size() &&
                          std::memcmp(simd.data(), scalar.data(), simd.size() * sizeof(float)) == 0;
        std::printf("%-22s %-7s vs scalar: max|diff| %.3e mean|diff| %.3e corr %.10f argmax %d/%d, %s\n", name.c_str(),
                    be_name, d.max_abs, d.mean_abs, d.corr, d.argmax_a, d.argmax_b,
                    same ? "bit-identical" : "NOT bit-identical");
        // The SIMD kernels reproduce the scalar reference's bits, so the
        // logits do too (placement and backend change timing, never results).
        EXPECT_TRUE(same) << be_name;
        EXPECT_EQ(d.argmax_a, d.argmax_b);
    }
}

TEST_P(Invariance, ThreadsChunksAndCallsAreBitIdentical) {
    const std::string name = GetParam();
    const auto ids = longest_ids(name);
    const auto base = run(name, ids, 1, SLUICE_BACKEND_AUTO, 1);
    struct Variant {
        const char *what;
        int chunk, threads;
        size_t split;
        int wave;
    } variants[] = {{"2 threads", 1, 2, 0, 0},
                    {"3 threads", 1, 3, 0, 0},
                    {"chunk 64", 64, 1, 0, 0},
                    {"chunk 3, 2 threads", 3, 2, 0, 0},
                    {"two calls", 1, 1, ids.size() / 2, 0},
                    {"chunk 64, two calls", 64, 2, ids.size() / 3, 0},
                    // Expert-major waves: a layer for many tokens, its
                    // attention in chunks, its experts held across sub-waves.
                    {"wave 5, chunk 2", 2, 1, 0, 5},
                    {"wave 7, chunk 3, 2 thr", 3, 2, 0, 7},
                    {"one wave, chunk 1", 1, 2, 0, 4096},
                    {"one wave, chunk 4, 2 calls", 4, 2, ids.size() / 3, 4096}};
    for (const auto &v : variants) {
        const auto got = run(name, ids, v.chunk, SLUICE_BACKEND_AUTO, v.threads, v.split, v.wave);
        const DiffStats d = diff_stats(got, base);
        std::printf("%-22s %-20s vs step/1 thread: %s (max|diff| %.3e)\n", name.c_str(), v.what,
                    bit_identical(got, base) ? "bit-identical" : "DIFFERENT", d.max_abs);
        EXPECT_TRUE(bit_identical(got, base)) << name << ": " << v.what;
    }
}

INSTANTIATE_TEST_SUITE_P(Warp, Invariance, ::testing::ValuesIn(fixture_names()),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                             std::string s = i.param;
                             for (char &c : s)
                                 if (!isalnum((unsigned char)c)) c = '_';
                             return s;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Invariance);

TEST(InvarianceApi, EvalAllLastRowEqualsEvalAndResetRepeats) {
    if (!have_fixtures()) GTEST_SKIP() << "no fixtures at " << warp_dir();
    const std::string name = "kimi-linear-tiny";
    const auto ids = longest_ids(name);
    sluice_ctx *ctx = nullptr;
    ASSERT_EQ(sluice_open(container_path(name).c_str(), nullptr, &ctx), SLUICE_OK) << sluice_last_error(ctx);
    const int V = sluice_n_vocab(ctx);
    std::vector<float> all((size_t)V * ids.size()), last((size_t)V), again((size_t)V);
    ASSERT_EQ(sluice_eval_all(ctx, ids.data(), ids.size(), all.data()), SLUICE_OK);
    EXPECT_EQ(sluice_n_past(ctx), (int)ids.size());
    ASSERT_EQ(sluice_reset(ctx), SLUICE_OK);
    EXPECT_EQ(sluice_n_past(ctx), 0);
    ASSERT_EQ(sluice_eval(ctx, ids.data(), ids.size(), last.data()), SLUICE_OK);
    EXPECT_EQ(std::memcmp(all.data() + (ids.size() - 1) * V, last.data(), V * 4), 0);
    ASSERT_EQ(sluice_reset(ctx), SLUICE_OK);
    ASSERT_EQ(sluice_eval(ctx, ids.data(), ids.size(), again.data()), SLUICE_OK);
    EXPECT_EQ(std::memcmp(again.data(), last.data(), V * 4), 0);
    // Position 0 of eval_all equals a fresh single-token eval.
    ASSERT_EQ(sluice_reset(ctx), SLUICE_OK);
    ASSERT_EQ(sluice_eval(ctx, ids.data(), 1, again.data()), SLUICE_OK);
    EXPECT_EQ(std::memcmp(all.data(), again.data(), V * 4), 0);
    sluice_close(ctx);
}

}  // namespace
