// Expert quality: our codebooks differ from warp's (different k-means
// randomness), so compare the dequantized-vs-source error of each matrix
// (relative Frobenius, mean and max over experts, per layer and kind) with
// the error of warp's own container for the same recipe. Also: verify
// passes on both containers and catches a damaged record.
#include <gtest/gtest.h>

#include <fstream>

#include "test_util.h"

using namespace sluice::convert;
using ctest::TempDir;

class ExpertsVsWarp : public ::testing::TestWithParam<std::string> {};

TEST_P(ExpertsVsWarp, ErrorNoWorseThanWarp) {
    if (!ctest::have_fixtures()) GTEST_SKIP() << "fixtures not found at " << ctest::fixtures();
    const std::string r = GetParam();
    TempDir d;
    auto o = ctest::recipe(r);
    o.output_dir = d.sub("out.waste");
    std::string err;
    ctest::QuietSink sink;
    ASSERT_EQ(run_convert(o, &err, &sink), 0) << err;

    VerifyOptions vo;
    vo.source_dir = ctest::source_dir();
    VerifyReport mine, theirs;
    vo.container_dir = o.output_dir;
    ASSERT_EQ(run_verify(vo, &mine, &err, &sink), 0) << err;
    vo.container_dir = ctest::warp_dir(r);
    ASSERT_EQ(run_verify(vo, &theirs, &err, &sink), 0) << err;
    EXPECT_EQ(mine.records_checked, theirs.records_checked);
    EXPECT_EQ(mine.crc_failures + mine.header_failures, 0);
    ASSERT_EQ(mine.experts.size(), theirs.experts.size());
    std::printf("[%s] %-8s %12s %12s %12s %12s\n", r.c_str(), "matrix", "ours mean", "warp mean", "ours max", "warp max");
    double sum_m = 0, sum_t = 0;
    for (size_t i = 0; i < mine.experts.size(); ++i) {
        const auto& a = mine.experts[i];
        const auto& b = theirs.experts[i];
        ASSERT_EQ(a.name, b.name);
        std::printf("[%s] %-8s %12.6f %12.6f %12.6f %12.6f  ratio %.4f\n", r.c_str(), a.name.c_str(), a.rel_frob,
                    b.rel_frob, a.rel_frob_max, b.rel_frob_max, a.rel_frob / b.rel_frob);
        EXPECT_LE(a.rel_frob, b.rel_frob) << a.name;
        EXPECT_LE(a.rel_frob_max, b.rel_frob_max) << a.name;
        sum_m += a.rel_frob;
        sum_t += b.rel_frob;
    }
    std::printf("[%s] overall mean rel. Frobenius error: ours %.6f, warp %.6f (ratio %.4f)\n", r.c_str(),
                sum_m / mine.experts.size(), sum_t / theirs.experts.size(), sum_m / sum_t);
    // The trunk is the same bytes as warp's, so its error is too.
    ASSERT_EQ(mine.trunk.size(), theirs.trunk.size());
    for (size_t i = 0; i < mine.trunk.size(); ++i) EXPECT_EQ(mine.trunk[i].rel_frob, theirs.trunk[i].rel_frob);
}

INSTANTIATE_TEST_SUITE_P(Recipes, ExpertsVsWarp, ::testing::Values("default", "vq4p", "vq2r"));

TEST(ConvertVerify, CatchesDamagedRecord) {
    if (!ctest::have_fixtures()) GTEST_SKIP() << "fixtures not found at " << ctest::fixtures();
    TempDir d;
    const std::string c = d.sub("c.waste");
    ctest::fs::copy(ctest::warp_dir("default"), c);  // ../shared is read-only: damage a copy
    ctest::fs::permissions(c, ctest::fs::perms::owner_all, ctest::fs::perm_options::add);
    for (const auto& de : ctest::fs::directory_iterator(c))
        ctest::fs::permissions(de.path(), ctest::fs::perms::owner_write, ctest::fs::perm_options::add);
    {
        std::fstream f(c + "/experts-L2.bin", std::ios::in | std::ios::out | std::ios::binary);
        auto flip = [&](std::streamoff at) {
            char x = 0;
            f.seekg(at);
            f.read(&x, 1);
            x = static_cast<char>(x ^ 0xFF);
            f.seekp(at);
            f.write(&x, 1);
        };
        flip(5 * 20480 + 1000);  // expert 5: an index byte
        flip(3 * 20480 + 4);     // expert 3: the layer field
    }
    VerifyOptions vo;
    vo.container_dir = c;
    VerifyReport rep;
    std::string err;
    ctest::QuietSink sink;
    EXPECT_EQ(run_verify(vo, &rep, &err, &sink), 2);
    for (const auto& p : rep.problems) std::printf("verify: %s\n", p.c_str());
    std::printf("records %lld, crc failures %lld, header failures %lld\n", static_cast<long long>(rep.records_checked),
                static_cast<long long>(rep.crc_failures), static_cast<long long>(rep.header_failures));
    EXPECT_EQ(rep.records_checked, 24);
    EXPECT_EQ(rep.crc_failures, 1);
    EXPECT_EQ(rep.header_failures, 1);
    bool named = false;
    for (const auto& p : rep.problems) named |= p.find("expert 5 of layer 2: checksum mismatch") != std::string::npos;
    EXPECT_TRUE(named);
}

// verify accepts every container warp wrote (all model families and recipes).
TEST(ConvertVerify, AcceptsEveryWarpFixture) {
    if (!ctest::have_fixtures()) GTEST_SKIP() << "fixtures not found at " << ctest::fixtures();
    int n = 0;
    for (const auto& de : ctest::fs::directory_iterator(ctest::fixtures() + "/warp")) {
        if (de.path().extension() != ".waste") continue;
        VerifyOptions vo;
        vo.container_dir = de.path().string();
        VerifyReport rep;
        std::string err;
        ctest::QuietSink sink;
        EXPECT_EQ(run_verify(vo, &rep, &err, &sink), 0) << de.path() << ": " << err;
        std::printf("%-28s records %lld, header failures %lld, crc failures %lld\n", de.path().filename().c_str(),
                    static_cast<long long>(rep.records_checked), static_cast<long long>(rep.header_failures),
                    static_cast<long long>(rep.crc_failures));
        EXPECT_GT(rep.records_checked, 0);
        ++n;
    }
    EXPECT_GE(n, 4);
}
