// src/gguf: the GGUF writer and reader against each other, the writer's
// refusals, and the reader on damaged and hostile headers (every prefix of a
// real header, absurd counts and lengths, offsets past the end). The
// llama.cpp side of the format is checked by tests/llamacpp, where llama.cpp
// itself loads what the writer wrote.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "format/gguf_reader.h"
#include "gguf/gguf_writer.h"

namespace fs = std::filesystem;
using namespace sluice;
using namespace sluice::gguf;

namespace {

struct TempDir {
    fs::path p;
    TempDir() {
        p = fs::temp_directory_path() / ("sluice-gguf-" + std::to_string(::getpid()) + "-" +
                                         std::to_string(std::random_device{}()));
        fs::create_directories(p);
    }
    ~TempDir() { fs::remove_all(p); }
    std::string file(const std::string &n) const { return (p / n).string(); }
};

RowSource from(const std::vector<float> &v, int64_t ne0) {
    return [v, ne0](int64_t r0, int64_t n, float *out) {
        std::copy(v.begin() + r0 * ne0, v.begin() + (r0 + n) * ne0, out);
        return Status::ok();
    };
}

std::vector<float> ramp(size_t n, float scale) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = scale * std::sin(0.37f * (float)i + 0.1f);
    return v;
}

Writer sample(const std::vector<float> &a, const std::vector<float> &b) {
    Writer w;
    w.set_str("general.architecture", "kimi-linear");
    w.set_u32("kimi-linear.block_count", 4);
    w.set_i32("x.i32", -7);
    w.set_f32("kimi-linear.attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_bool("x.flag", true);
    w.set_arr_u32("kimi-linear.attention.head_count_kv", {0, 0, 0, 1});
    w.set_arr_str("tokenizer.ggml.tokens", {"a", "", "\xc4\xa0the"});
    w.set_arr_f32("x.f32s", {0.5f, -2.0f});
    EXPECT_TRUE(w.add_tensor("m.weight", {64, 3}, TensorType::F32, from(a, 64)).is_ok());
    EXPECT_TRUE(w.add_tensor("h.weight", {64, 3}, TensorType::F16, from(a, 64)).is_ok());
    EXPECT_TRUE(w.add_tensor("q.weight", {64, 3}, TensorType::Q8_0, from(a, 64)).is_ok());
    EXPECT_TRUE(w.add_tensor("q4.weight", {64, 3}, TensorType::Q4_0, from(a, 64)).is_ok());
    EXPECT_TRUE(w.add_tensor("e.weight", {8, 2, 5}, TensorType::F32, from(b, 8)).is_ok());
    return w;
}

std::string slurp(const std::string &p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

void spit(const std::string &p, const std::string &s) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(s.data(), (std::streamsize)s.size());
}

}  // namespace

TEST(Gguf, WrittenFileReadsBackKeyByKeyAndTensorByTensor) {
    TempDir t;
    const auto a = ramp(64 * 3, 3.0f), b = ramp(8 * 2 * 5, 1.0f);
    Writer w = sample(a, b);
    const std::string path = t.file("m.gguf");
    ASSERT_TRUE(w.write(path).is_ok());
    EXPECT_EQ(fs::file_size(path), w.file_bytes());
    Reader r;
    Status st = r.open(path);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(r.version(), 3u);
    std::string s;
    ASSERT_TRUE(r.get_str("general.architecture", &s).is_ok());
    EXPECT_EQ(s, "kimi-linear");
    int64_t i = 0;
    ASSERT_TRUE(r.get_int("kimi-linear.block_count", &i).is_ok());
    EXPECT_EQ(i, 4);
    ASSERT_TRUE(r.get_int("x.i32", &i).is_ok());
    EXPECT_EQ(i, -7);
    double f = 0;
    ASSERT_TRUE(r.get_float("kimi-linear.attention.layer_norm_rms_epsilon", &f).is_ok());
    EXPECT_EQ((float)f, 1e-5f);
    bool flag = false;
    ASSERT_TRUE(r.get_bool("x.flag", &flag).is_ok());
    EXPECT_TRUE(flag);
    std::vector<int64_t> kv;
    ASSERT_TRUE(r.get_int_array("kimi-linear.attention.head_count_kv", &kv).is_ok());
    EXPECT_EQ(kv, (std::vector<int64_t>{0, 0, 0, 1}));
    const Value *tok = r.find("tokenizer.ggml.tokens");
    ASSERT_NE(tok, nullptr);
    EXPECT_EQ(tok->strs, (std::vector<std::string>{"a", "", "\xc4\xa0the"}));
    // Metadata errors name the file and the key.
    st = r.get_str("kimi-linear.block_count", &s);
    EXPECT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("kimi-linear.block_count"), std::string::npos);
    EXPECT_NE(st.message().find(path), std::string::npos);
    EXPECT_FALSE(r.get_int("absent.key", &i).is_ok());

    ASSERT_EQ(r.tensors().size(), 5u);
    std::vector<float> got(64 * 3);
    const TensorInfo *m = r.tensor("m.weight");
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->dims, (std::vector<int64_t>{64, 3}));
    ASSERT_TRUE(r.read_rows_f32(*m, 0, 3, got.data()).is_ok());
    EXPECT_EQ(got, a);  // f32: bit for bit
    double max_h = 0, max_q = 0;
    ASSERT_TRUE(r.read_rows_f32(*r.tensor("h.weight"), 0, 3, got.data()).is_ok());
    for (size_t k = 0; k < a.size(); k++) max_h = std::max(max_h, (double)std::fabs(got[k] - a[k]));
    ASSERT_TRUE(r.read_rows_f32(*r.tensor("q.weight"), 0, 3, got.data()).is_ok());
    for (size_t k = 0; k < a.size(); k++) max_q = std::max(max_q, (double)std::fabs(got[k] - a[k]));
    double max_q4 = 0;
    ASSERT_TRUE(r.read_rows_f32(*r.tensor("q4.weight"), 0, 3, got.data()).is_ok());
    for (size_t k = 0; k < a.size(); k++) max_q4 = std::max(max_q4, (double)std::fabs(got[k] - a[k]));
    // q4_0: the signed extreme maps to code 0 (-8 steps), the other sign
    // reaches only +7 steps, so a block holding both extremes clamps one step.
    EXPECT_LE(max_q4, 3.0 / 8 + 1e-3);
    EXPECT_LE(max_h, 3.0 / 2048);  // f16: half an ulp at |x| <= 3
    EXPECT_LE(max_q, 3.0 / 127);   // q8_0: one step of amax/127 (amax <= 3), f16 scale included
    EXPECT_GT(max_q, 0.0);
    std::vector<float> e(8 * 2 * 5);
    const TensorInfo *et = r.tensor("e.weight");
    ASSERT_NE(et, nullptr);
    EXPECT_EQ(et->rows(), 10);
    ASSERT_TRUE(r.read_rows_f32(*et, 0, 10, e.data()).is_ok());
    EXPECT_EQ(e, b);
    EXPECT_FALSE(r.read_rows_f32(*et, 8, 3, e.data()).is_ok());  // rows past the tensor
}

TEST(Gguf, SameCallsGiveTheSameBytes) {
    TempDir t;
    const auto a = ramp(64 * 3, 3.0f), b = ramp(80, 1.0f);
    ASSERT_TRUE(sample(a, b).write(t.file("1.gguf")).is_ok());
    ASSERT_TRUE(sample(a, b).write(t.file("2.gguf")).is_ok());
    EXPECT_EQ(slurp(t.file("1.gguf")), slurp(t.file("2.gguf")));
}

TEST(Gguf, WriterRefusesWhatAReaderWouldMisreadAndLeavesNoFile) {
    TempDir t;
    const std::vector<float> v(33 * 2, 1.0f);
    {
        Writer w;
        EXPECT_FALSE(w.add_tensor("q.weight", {33, 2}, TensorType::Q8_0, from(v, 33)).is_ok());  // 33 % 32
        EXPECT_FALSE(w.add_tensor(std::string(64, 'n'), {33, 2}, TensorType::F32, from(v, 33)).is_ok());
        EXPECT_FALSE(w.add_tensor("five", {1, 1, 1, 1, 66}, TensorType::F32, from(v, 1)).is_ok());
        EXPECT_FALSE(w.add_tensor("zero", {0, 2}, TensorType::F32, from(v, 1)).is_ok());
        ASSERT_TRUE(w.add_tensor("ok", {33, 2}, TensorType::F32, from(v, 33)).is_ok());
        EXPECT_FALSE(w.add_tensor("ok", {33, 2}, TensorType::F32, from(v, 33)).is_ok());
    }
    {
        Writer w;
        w.set_u32("k", 1);
        w.set_u32("k", 2);
        Status st = w.write(t.file("dup.gguf"));
        EXPECT_FALSE(st.is_ok());
        EXPECT_NE(st.message().find("k"), std::string::npos);
        EXPECT_FALSE(fs::exists(t.file("dup.gguf")));
    }
    {
        // A value that is not finite, and a source that fails half way:
        // an error naming the tensor, and neither the file nor its temporary left.
        std::vector<float> bad(64, 1.0f);
        bad[40] = NAN;
        Writer w;
        ASSERT_TRUE(w.add_tensor("nan.weight", {64}, TensorType::F32, from(bad, 64)).is_ok());
        Status st = w.write(t.file("nan.gguf"));
        EXPECT_FALSE(st.is_ok());
        EXPECT_NE(st.message().find("nan.weight"), std::string::npos);
        Writer w2;
        ASSERT_TRUE(w2.add_tensor("fails.weight", {8, 2}, TensorType::F32,
                                  [](int64_t, int64_t, float *) { return io_error("bank read failed"); })
                        .is_ok());
        st = w2.write(t.file("fail.gguf"));
        EXPECT_NE(st.message().find("fails.weight"), std::string::npos);
        EXPECT_NE(st.message().find("bank read failed"), std::string::npos);
        for (const auto &ent : fs::directory_iterator(t.p)) ADD_FAILURE() << "left behind: " << ent.path();
    }
}

TEST(Gguf, ReaderRefusesEveryTruncationOfARealHeader) {
    TempDir t;
    const auto a = ramp(64 * 3, 3.0f), b = ramp(80, 1.0f);
    ASSERT_TRUE(sample(a, b).write(t.file("m.gguf")).is_ok());
    const std::string whole = slurp(t.file("m.gguf"));
    const std::string cut = t.file("cut.gguf");
    for (size_t n = 0; n < whole.size(); n += (n < 600 ? 1 : 97)) {
        spit(cut, whole.substr(0, n));
        Reader r;
        Status st = r.open(cut);
        EXPECT_FALSE(st.is_ok()) << n << " bytes opened";
        if (!st.is_ok()) {
            EXPECT_NE(st.message().find(cut), std::string::npos) << st.message();
        }
    }
}

TEST(Gguf, ReaderBoundsCountsLengthsAndOffsets) {
    TempDir t;
    auto header = [](uint32_t magic, uint32_t version, uint64_t nt, uint64_t nkv) {
        std::string s(24, '\0');
        std::memcpy(&s[0], &magic, 4);
        std::memcpy(&s[4], &version, 4);
        std::memcpy(&s[8], &nt, 8);
        std::memcpy(&s[16], &nkv, 8);
        return s;
    };
    auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char *>(&v), 8); };
    auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char *>(&v), 4); };
    auto str = [&](const std::string &s) { return u64(s.size()) + s; };
    struct Case {
        const char *what;
        std::string bytes;
        const char *expect;  // in the message
    };
    std::vector<Case> cases = {
        {"magic", header(0x12345678, 3, 0, 0), "not a GGUF"},
        {"version", header(kMagic, 1, 0, 0), "version 1"},
        {"counts", header(kMagic, 3, 1ull << 40, 0), "more than"},
        {"string length", header(kMagic, 3, 0, 1) + u64(1ull << 60), "runs past"},
        {"array count", header(kMagic, 3, 0, 1) + str("a") + u32(9) + u32(4) + u64(1ull << 62), "runs past"},
        {"nested array", header(kMagic, 3, 0, 1) + str("a") + u32(9) + u32(9) + u64(1), "array of arrays"},
        {"value type", header(kMagic, 3, 0, 1) + str("a") + u32(77), "value type 77"},
        {"duplicate key", header(kMagic, 3, 0, 2) + str("a") + u32(4) + u32(1) + str("a") + u32(4) + u32(1), "twice"},
        {"alignment", header(kMagic, 3, 0, 1) + str("general.alignment") + u32(4) + u32(48), "power of two"},
        {"dims", header(kMagic, 3, 1, 0) + str("t") + u32(5), "5 dims"},
        {"dim size", header(kMagic, 3, 1, 0) + str("t") + u32(2) + u64(1ull << 41) + u64(1), "out of range"},
        {"offset", header(kMagic, 3, 1, 0) + str("t") + u32(1) + u64(8) + u32(0) + u64(1ull << 40), "past the end"},
        {"misaligned", header(kMagic, 3, 1, 0) + str("t") + u32(1) + u64(8) + u32(0) + u64(4), "not aligned"},
    };
    for (const auto &c : cases) {
        const std::string p = t.file("bad.gguf");
        spit(p, c.bytes + std::string(64, '\0'));
        Reader r;
        Status st = r.open(p);
        ASSERT_FALSE(st.is_ok()) << c.what;
        EXPECT_NE(st.message().find(c.expect), std::string::npos) << c.what << ": " << st.message();
    }
    // A tensor of a type sluice does not read opens (llama.cpp files mix
    // types) and is refused by name when read.
    const std::string p = t.file("iq2.gguf");
    spit(p, header(kMagic, 3, 1, 0) + str("blk.0.ffn_down.weight") + u32(2) + u64(256) + u64(1) + u32(16) + u64(0) +
                std::string(256, '\0'));
    Reader r;
    ASSERT_TRUE(r.open(p).is_ok());
    std::vector<float> out(256);
    Status st = r.read_rows_f32(r.tensors()[0], 0, 1, out.data());
    ASSERT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("blk.0.ffn_down.weight"), std::string::npos);
    EXPECT_NE(st.message().find("type 16"), std::string::npos);
}

// The read-only types, from blocks built by hand from ggml's layouts (the
// values worked out here, not by the decoder); tests/llamacpp's
// kquant_dequant.py compares every type with ggml's own decoder.
TEST(Gguf, KQuantBlocksDecodeAsTheirLayoutSays) {
    {
        // Q4_K: d 1.0, dmin 0.5; 6-bit scale/min pairs: sub-block 0 (2, 3),
        // 1 (5, 1), 4 (1, 2) (its low bits in byte 8, high bits from bytes 0 and 4).
        std::vector<uint8_t> b(144, 0);
        b[0] = 0x00, b[1] = 0x3C, b[2] = 0x00, b[3] = 0x38;
        uint8_t *sc = b.data() + 4, *qs = b.data() + 16;
        sc[0] = 2, sc[4] = 3, sc[1] = 5, sc[5] = 1, sc[8] = 0x21;
        qs[0] = 0x7A;   // value 0: 10 (sub-block 0), value 32: 7 (sub-block 1)
        qs[64] = 0x03;  // value 128: 3 (sub-block 4)
        std::vector<float> y(256);
        dequant_row(TensorType::Q4_K, b.data(), 256, y.data());
        EXPECT_EQ(y[0], 1.0f * 2 * 10 - 0.5f * 3);
        EXPECT_EQ(y[32], 1.0f * 5 * 7 - 0.5f * 1);
        EXPECT_EQ(y[128], 1.0f * 1 * 3 - 0.5f * 2);
        EXPECT_EQ(y[1], -0.5f * 3);  // a zero code leaves minus the min
    }
    {
        // Q6_K: d 1.0 (last two bytes), scale 0 = -2: value 0 is
        // (low 5 | high 2 << 4) - 32 = 5, times -2.
        std::vector<uint8_t> b(210, 0);
        b[208] = 0x00, b[209] = 0x3C;
        b[192] = (uint8_t)(int8_t)-2;
        b[0] = 0x05, b[128] = 0x02;
        std::vector<float> y(256);
        dequant_row(TensorType::Q6_K, b.data(), 256, y.data());
        EXPECT_EQ(y[0], -10.0f);
        EXPECT_EQ(y[1], -2.0f * -32);  // all-zero bits: -32 times the scale
    }
    {
        // Q5_0: d 2.0, fifth bit of value 0 set: (3 | 16) - 16 = 3, times 2.
        std::vector<uint8_t> b(22, 0);
        b[0] = 0x00, b[1] = 0x40;
        b[2] = 0x01;  // qh bit 0
        b[6] = 0x03;
        std::vector<float> y(32);
        dequant_row(TensorType::Q5_0, b.data(), 32, y.data());
        EXPECT_EQ(y[0], 6.0f);
        EXPECT_EQ(y[16], -32.0f);  // value 16: code 0, no fifth bit: -16 x 2
    }
    {
        // MXFP4: exponent 127 (an MX scale of 1), E2M1 codes 7 (6.0) and 9
        // (-0.5); exponent 0 is the subnormal 2^-128 times ggml's doubled codes.
        std::vector<uint8_t> b(34, 0);
        b[0] = 127, b[1] = 0x97;
        b[17] = 0, b[18] = 0x07;
        std::vector<float> y(64);
        dequant_row(TensorType::MXFP4, b.data(), 64, y.data());
        EXPECT_EQ(y[0], 6.0f);
        EXPECT_EQ(y[16], -0.5f);
        EXPECT_EQ(y[32], 12.0f * std::ldexp(1.0f, -128));
    }
    // Block sizes, and the writer refuses what it only reads.
    EXPECT_EQ(row_bytes(TensorType::Q2_K, 512), 2u * 84);
    EXPECT_EQ(row_bytes(TensorType::Q3_K, 256), 110u);
    EXPECT_EQ(row_bytes(TensorType::Q5_K, 256), 176u);
    EXPECT_EQ(row_bytes(TensorType::Q4_K, 128), 0u);
    EXPECT_EQ(row_bytes(TensorType::IQ4_NL, 64), 36u);
    EXPECT_EQ(row_bytes(TensorType::IQ4_XS, 512), 2u * 136);
    EXPECT_EQ(row_bytes(TensorType::MXFP4, 64), 34u);
    Writer w;
    std::vector<float> v(256, 0.0f);
    const Status st = w.add_tensor("k.weight", {256, 1}, TensorType::Q4_K, from(v, 256));
    EXPECT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("reads q4_k but does not write it"), std::string::npos) << st.message();
}
