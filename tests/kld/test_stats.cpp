// numpy-exact RNG and statistics against numpy itself (§4.3-§4.5).
#include "kld_test_util.h"

using namespace kt;

TEST(KldStats, Pcg64FirstOutputSeed1) {
    NumpyPcg64 g(1);
    const uint64_t v = g.next64();
    std::printf("PCG64(seed 1) first output: %016llx\n", (unsigned long long)v);
    EXPECT_EQ(v, 0x8306bdf37922e4ffull);  // KLD.md §4.5 step 4
}

TEST(KldStats, IndexStreamsMatchNumpy) {
    if (!have_numpy()) GTEST_SKIP() << "no /usr/bin/python3 with numpy (install python3-numpy)";
    for (auto [seed, n, B] : std::vector<std::tuple<int, int, int>>{{1, 16, 300}, {1, 32, 300}, {1, 6, 500}, {7, 3, 400}, {1, 1, 5}}) {
        json o = run_oracle("rng " + std::to_string(seed) + " " + std::to_string(n) + " " + std::to_string(B));
        NumpyPcg64 g{uint64_t(seed)};
        NumpyPcg64 raw{uint64_t(seed)};
        EXPECT_EQ(o["first64"].get<std::string>(), [&] { char b[32]; std::snprintf(b, 32, "%016llx", (unsigned long long)raw.next64()); return std::string(b); }());
        int mism = 0;
        for (int b = 0; b < B; ++b)
            for (int j = 0; j < n; ++j) mism += o["matrix"][b][j].get<uint64_t>() != g.bounded(uint64_t(n));
        EXPECT_EQ(mism, 0) << "seed " << seed << " n " << n;
        std::printf("numpy integers(0,%d,(%d,%d)) seed %d: %d mismatches\n", n, B, n, seed, mism);
    }
}

TEST(KldStats, BootstrapAndSummaryBitIdenticalToNumpy) {
    if (!have_numpy()) GTEST_SKIP() << "no /usr/bin/python3 with numpy (install python3-numpy)";
    const std::string d = tmpdir("stats");
    std::mt19937_64 rng(3);
    std::lognormal_distribution<double> ln(-4.0, 1.5);
    for (int n : {8, 16, 32, 7}) {
        std::vector<double> w(static_cast<size_t>(n));
        for (auto& x : w) x = ln(rng);
        write_f64(d + "/w.f64", w);
        json o = run_oracle("boot " + d + "/w.f64 10000 1");
        Bootstrap b = bootstrap_window_means(w, 10000, 1);
        std::printf("n=%2d estimate %.17g se %.17g CI [%.17g, %.17g]\n", n, b.estimate, b.standard_error, b.ci95_low, b.ci95_high);
        EXPECT_EQ(b.estimate, o["estimate"].get<double>());
        EXPECT_EQ(b.standard_error, o["standard_error"].get<double>());
        EXPECT_EQ(b.ci95_low, o["ci95_low"].get<double>());
        EXPECT_EQ(b.ci95_high, o["ci95_high"].get<double>());
    }
    for (size_t n : {size_t(2047), size_t(65504), size_t(9), size_t(10)}) {
        std::vector<double> v(n);
        for (auto& x : v) x = ln(rng);
        write_f64(d + "/v.f64", v);
        json o = run_oracle("summ " + d + "/v.f64");
        Summary s = summarize(v);
        EXPECT_EQ(s.mean, o["mean"].get<double>()) << n;
        EXPECT_EQ(s.median, o["median"].get<double>()) << n;
        EXPECT_EQ(s.p95, o["p95"].get<double>()) << n;
        EXPECT_EQ(s.p99, o["p99"].get<double>()) << n;
        EXPECT_EQ(s.max, o["max"].get<double>()) << n;
    }
}

TEST(KldStats, BootstrapDeterministicWithFixedSeed) {
    std::vector<double> w = {0.01, 0.02, 0.015, 0.03, 0.011, 0.019};
    Bootstrap a = bootstrap_window_means(w, 10000, 1), b = bootstrap_window_means(w, 10000, 1);
    EXPECT_EQ(std::memcmp(&a.ci95_low, &b.ci95_low, 8), 0);
    EXPECT_EQ(std::memcmp(&a.ci95_high, &b.ci95_high, 8), 0);
    Bootstrap c = bootstrap_window_means(w, 10000, 2);
    EXPECT_NE(a.ci95_low, c.ci95_low);
    EXPECT_LE(a.ci95_low, a.estimate);
    EXPECT_GE(a.ci95_high, a.estimate);
}
