// The converter's logical tensors (convert/checkpoint.h) on hand-made
// files: every decoded dtype, and refusals of what it cannot decode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "convert/numeric.h"
#include "convert/checkpoint.h"
#include "test_util.h"

using namespace sluice::convert;
using ctest::TempDir;

using ctest::raw;
using T = ctest::StTensor;
static void write_st(const std::string& path, const std::vector<T>& ts,
                     const std::function<void(nlohmann::json&)>& fix = nullptr, size_t cut = 0) {
    ctest::write_safetensors(path, ts, fix, cut);
}

TEST(ConvertSafetensors, DecodesEveryDtype) {
    TempDir d;
    std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f};
    std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x3800, 0x0001};
    std::vector<uint16_t> bf = {0x3F80, 0xC040, 0x3F00, 0x0000};
    // fp8 e4m3 [2, 3] with block size [1, 2]: scales [2, 2].
    std::vector<uint8_t> f8 = {0x38, 0x40, 0x30, 0xB8, 0x7E, 0x01};
    std::vector<float> f8s = {2.0f, 0.5f, 4.0f, 1.0f};
    // MXFP4 [2, 64]: packed [2, 32], scales [2, 2].
    std::vector<uint8_t> pk(64), ps = {127, 0, 128, 126};
    for (int i = 0; i < 64; ++i) pk[i] = static_cast<uint8_t>((i * 7 + 3) & 0xFF);
    write_st(d.sub("model.safetensors"),
             {{"a", "F32", {2, 2}, raw(f32)}, {"b", "F16", {4}, raw(f16)}, {"c", "BF16", {2, 2}, raw(bf)},
              {"w", "F8_E4M3", {2, 3}, raw(f8)}, {"w_scale_inv", "F32", {2, 2}, raw(f8s)},
              {"m_packed", "U8", {2, 32}, raw(pk)}, {"m_scale", "U8", {2, 2}, raw(ps)}});
    Checkpoint ck;
    std::string err;
    ASSERT_TRUE(ck.open(d.path, &err)) << err;
    ck.set_fp8_block(1, 2);
    std::vector<float> o(4);
    ASSERT_TRUE(ck.read_rows_f32("a", 0, 2, o.data(), &err)) << err;
    EXPECT_EQ(o, f32);
    ASSERT_TRUE(ck.read_rows_f32("b", 0, 1, o.data(), &err)) << err;
    EXPECT_EQ(o[0], 1.0f);
    EXPECT_EQ(o[3], std::ldexp(1.0f, -24));
    ASSERT_TRUE(ck.read_rows_f32("c", 1, 2, o.data(), &err)) << err;
    EXPECT_EQ(o[0], 0.5f);
    std::vector<float> w(6);
    ASSERT_TRUE(ck.read_rows_f32("w", 0, 2, w.data(), &err)) << err;
    EXPECT_EQ(w[0], 1.0f * 2.0f);  // multiplied by scale_inv
    EXPECT_EQ(w[2], 0.5f * 0.5f);
    EXPECT_EQ(w[4], 448.0f * 4.0f);   // row 1, tile column 0
    EXPECT_EQ(w[5], std::ldexp(1.0f, -9) * 1.0f);  // row 1, tile column 1
    std::vector<int64_t> shape;
    ASSERT_TRUE(ck.logical_shape("m", &shape, &err)) << err;
    EXPECT_EQ(shape, (std::vector<int64_t>{2, 64}));
    std::vector<float> m(128);
    ASSERT_TRUE(ck.read_rows_f32("m", 0, 2, m.data(), &err)) << err;
    int zeros_in_zero_block = 0;
    for (int c = 32; c < 64; ++c) zeros_in_zero_block += m[c] == 0.0f;
    EXPECT_EQ(zeros_in_zero_block, 32);  // e8m0 = 0 -> zero scale
    EXPECT_EQ(m[0], fp4_e2m1_to_f32(pk[0] & 15));
    EXPECT_EQ(m[1], fp4_e2m1_to_f32(pk[0] >> 4));
    EXPECT_EQ(m[64], fp4_e2m1_to_f32(pk[32] & 15) * 2.0f);
}

// The header bound checks are the reader's (tests/unit/safetensors_test.cpp);
// a valid file whose dtype the converter cannot decode is refused when the
// tensor is used, naming it.
TEST(ConvertSafetensors, RefusesUndecodableDtypeWhenUsed) {
    TempDir d;
    std::vector<int64_t> iv(4, 1);
    write_st(d.sub("model.safetensors"), {{"y.weight", "I64", {2, 2}, raw(iv)}});
    Checkpoint ck;
    std::string err;
    ASSERT_TRUE(ck.open(d.path, &err)) << err;
    std::vector<float> o(4);
    EXPECT_FALSE(ck.read_rows_f32("y.weight", 0, 2, o.data(), &err));
    std::printf("%-22s -> %s\n", "wrong dtype", err.c_str());
    EXPECT_NE(err.find("y.weight"), std::string::npos);
    EXPECT_NE(err.find("I64"), std::string::npos);
}

// A broken shard in a real checkpoint: convert fails, names the shard, and
// leaves nothing that looks like a finished container.
TEST(ConvertSafetensors, ConvertOfTruncatedShardLeavesNoManifest) {
    if (!ctest::have_fixtures()) GTEST_SKIP() << "fixtures not found at " << ctest::fixtures();
    TempDir d;
    const std::string src = d.sub("src");
    ctest::fs::create_directories(src);
    for (const auto& de : ctest::fs::directory_iterator(ctest::source_dir())) {
        ctest::fs::copy_file(de.path(), src + "/" + de.path().filename().string());
        ctest::fs::permissions(src + "/" + de.path().filename().string(), ctest::fs::perms::owner_write,
                               ctest::fs::perm_options::add);
    }
    const std::string shard = src + "/model-00002-of-00002.safetensors";
    ctest::fs::resize_file(shard, ctest::fs::file_size(shard) - 1000);
    auto o = ctest::recipe("default");
    o.source_dir = src;
    o.output_dir = d.sub("out.waste");
    std::string err;
    ctest::QuietSink sink;
    EXPECT_EQ(run_convert(o, &err, &sink), 2);
    std::printf("truncated shard -> %s\n", err.c_str());
    EXPECT_NE(err.find("model-00002-of-00002.safetensors"), std::string::npos);
    EXPECT_FALSE(ctest::fs::exists(o.output_dir + "/manifest.json"));
}

// A NaN or infinity in the source is refused with the tensor, row and column
// named: quantizing it would give garbage scales and codes silently.
TEST(ConvertSafetensors, RefusesNonFiniteValues) {
    TempDir d;
    std::vector<uint16_t> bf = {0x3F80, 0x3F80, 0x3F80, 0x3F80, 0x3F80, 0x7FC0};  // [2, 3], NaN at (1, 2)
    std::vector<float> f32 = {1.0f, -INFINITY};
    std::vector<uint8_t> pk(32, 0x11), ps = {127, 255};  // MXFP4 [1, 64]: scale 255 is 2^128 = inf
    write_st(d.sub("model.safetensors"), {{"layer.w", "BF16", {2, 3}, raw(bf)},
                                          {"layer.v", "F32", {2}, raw(f32)},
                                          {"layer.m_packed", "U8", {1, 32}, raw(pk)},
                                          {"layer.m_scale", "U8", {1, 2}, raw(ps)}});
    Checkpoint ck;
    std::string err;
    ASSERT_TRUE(ck.open(d.path, &err)) << err;
    std::vector<float> o(64);
    EXPECT_TRUE(ck.read_rows_f32("layer.w", 0, 1, o.data(), &err)) << err;  // row 0 is fine
    EXPECT_FALSE(ck.read_rows_f32("layer.w", 0, 2, o.data(), &err));
    std::printf("%s\n", err.c_str());
    EXPECT_NE(err.find("model.safetensors: tensor 'layer.w': row 1, column 2 decodes to NaN"), std::string::npos) << err;
    EXPECT_FALSE(ck.read_rows_f32("layer.v", 0, 1, o.data(), &err));
    EXPECT_NE(err.find("tensor 'layer.v': row 0, column 1 decodes to an infinity"), std::string::npos) << err;
    EXPECT_FALSE(ck.read_rows_f32("layer.m", 0, 1, o.data(), &err));
    EXPECT_NE(err.find("tensor 'layer.m_packed': row 0, column 32"), std::string::npos) << err;
}
