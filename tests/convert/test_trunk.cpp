// Against warp's own conversions of the same checkpoint: trunk.bin and the
// manifest's trunk entries must be byte-identical, as must everything else
// that does not depend on k-means (expert record headers minus the CRC, the
// f16 row scales, side files, config, expert_quant, layers).
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "convert/vq.h"
#include "test_util.h"

using namespace sluice::convert;
using ctest::TempDir;
using ojson = nlohmann::ordered_json;

class TrunkVsWarp : public ::testing::TestWithParam<std::string> {};

TEST_P(TrunkVsWarp, ByteIdentical) {
    if (!ctest::have_fixtures()) GTEST_SKIP() << "fixtures not found at " << ctest::fixtures();
    const std::string r = GetParam();
    TempDir d;
    auto o = ctest::recipe(r);
    o.output_dir = d.sub("out.waste");
    o.kmeans_iters = 2;  // experts are not compared bit for bit here
    std::string err;
    ctest::QuietSink sink;
    ASSERT_EQ(run_convert(o, &err, &sink), 0) << err;
    const std::string w = ctest::warp_dir(r), m = o.output_dir;

    int64_t compared = 0;
    const int64_t bad = ctest::diff_bytes(m + "/trunk.bin", w + "/trunk.bin", &compared);
    std::printf("[%s] trunk.bin: %lld bytes compared, %lld mismatches\n", r.c_str(), static_cast<long long>(compared),
                static_cast<long long>(bad));
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(compared, static_cast<int64_t>(ctest::fs::file_size(w + "/trunk.bin")));

    const ojson mine = ojson::parse(ctest::slurp(m + "/manifest.json"));
    const ojson theirs = ojson::parse(ctest::slurp(w + "/manifest.json"));
    ASSERT_EQ(mine["trunk"].size(), theirs["trunk"].size());
    int entry_bad = 0;
    for (size_t i = 0; i < theirs["trunk"].size(); ++i)
        if (mine["trunk"][i] != theirs["trunk"][i]) {
            ++entry_bad;
            ADD_FAILURE() << "trunk entry " << i << ": " << mine["trunk"][i].dump() << " vs " << theirs["trunk"][i].dump();
        }
    std::printf("[%s] manifest trunk entries: %zu compared, %d differ\n", r.c_str(), theirs["trunk"].size(), entry_bad);
    for (const char* k : {"format_version", "arch", "tensor_prefix", "config", "expert_quant", "layers"})
        EXPECT_EQ(mine[k], theirs[k]) << k;

    for (const char* f : {"tokenizer.model", "specials.json", "chat.json"}) {
        int64_t n = 0;
        const int64_t b = ctest::diff_bytes(m + "/" + f, w + "/" + f, &n);
        std::printf("[%s] %s: %lld bytes compared, %lld mismatches\n", r.c_str(), f, static_cast<long long>(n),
                    static_cast<long long>(b));
        EXPECT_EQ(b, 0) << f;
    }

    // Records: header bytes except the CRC, and the row scales, equal warp's.
    const auto cfg = theirs["config"];
    const RecordGeom g = record_geometry(cfg["moe_intermediate_size"], cfg["hidden_size"], theirs["expert_quant"]["stages"],
                                         theirs["expert_quant"]["index_bits"]);
    int64_t hdr_bytes = 0, hdr_bad = 0, sc_bytes = 0, sc_bad = 0;
    for (auto it = theirs["layers"].begin(); it != theirs["layers"].end(); ++it) {
        const std::string a = ctest::slurp(m + "/" + it.value()["file"].get<std::string>());
        const std::string b = ctest::slurp(w + "/" + it.value()["file"].get<std::string>());
        ASSERT_EQ(a.size(), b.size());
        for (size_t e = 0; e * g.stride < b.size(); ++e) {
            const size_t base = e * g.stride;
            for (size_t i = 0; i < 48; ++i) {
                if (i >= 36 && i < 40) continue;  // crc covers k-means-dependent indices
                ++hdr_bytes;
                hdr_bad += a[base + i] != b[base + i];
            }
            for (size_t i = g.off[3]; i < g.scale_end; ++i) {
                ++sc_bytes;
                sc_bad += a[base + i] != b[base + i];
            }
        }
    }
    std::printf("[%s] record headers: %lld bytes compared, %lld mismatches; row scales: %lld bytes, %lld mismatches\n",
                r.c_str(), static_cast<long long>(hdr_bytes), static_cast<long long>(hdr_bad),
                static_cast<long long>(sc_bytes), static_cast<long long>(sc_bad));
    EXPECT_EQ(hdr_bad, 0);
    EXPECT_EQ(sc_bad, 0);
    EXPECT_EQ(ctest::fs::file_size(m + "/codebooks.bin"), ctest::fs::file_size(w + "/codebooks.bin"));
    EXPECT_TRUE(mine.contains("provenance"));
    EXPECT_EQ(mine["provenance"]["settings"]["trunk_bits"], o.trunk_bits);
}

INSTANTIATE_TEST_SUITE_P(Recipes, TrunkVsWarp, ::testing::Values("default", "trunk3", "vq2r", "vq4p"));
