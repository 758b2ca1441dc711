// The one safetensors reader and writer (format/safetensors.h), tested once
// for the converter and the KLD suite: every §2.4 refusal of
// ../shared/spec/KLD.md with the file and tensor named, the sharded index,
// reads by pread, and the deterministic atomic writer (§2.5).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "format/safetensors.h"

using namespace sluice;
using namespace sluice::st;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    std::string path;
    TempDir() {
        std::string t = (fs::temp_directory_path() / "sluice-st-test-XXXXXX").string();
        path = ::mkdtemp(t.data());
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string sub(const std::string& n) const { return path + "/" + n; }
};

std::string slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void spit(const std::string& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

std::string le64(uint64_t n) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[size_t(i)] = char(n >> (8 * i));
    return s;
}

// A file: the length word, this exact header text, `data` zero bytes.
std::string file_bytes(const std::string& header, size_t data) { return le64(header.size()) + header + std::string(data, '\0'); }

std::string one(const std::string& dtype, const std::string& shape, const std::string& offsets, const std::string& name = "x") {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

bool has(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

}  // namespace

TEST(Safetensors, RefusesEveryBrokenRuleNamingFileAndTensor) {
    TempDir d;
    struct Case {
        const char* rule;
        std::string bytes;
        std::string expect;
        bool names_tensor;
    };
    const std::string ok_x = one("F32", "[1]", "[0,4]");
    const std::vector<Case> cases = {
        {"1: under 8 bytes", std::string(5, '\0'), "no 8-byte header length", false},
        {"2: N over 1e8", le64(100000001) + "{}", "over the 100000000-byte limit", false},
        {"3: 8 + N past the file", le64(100) + "{}", "header length 100 exceeds the file (10 bytes)", false},
        {"4: not JSON", file_bytes("{{{{", 0), "not valid JSON", false},
        {"4: not UTF-8", file_bytes("{\"\xff\":1}", 0), "not valid JSON (or not UTF-8)", false},
        {"4: not an object", file_bytes("[1]", 0), "not a JSON object", false},
        {"4: text before the object", file_bytes("x{}", 0), "not a JSON object", false},
        {"4: text after the object", file_bytes("{} x", 0), "not valid JSON", false},
        {"4: a key twice", file_bytes("{" + ok_x + "," + ok_x + "}", 4), "the key 'x' twice", false},
        {"5: entry not an object", file_bytes("{\"x\":3}", 0), "entry needs dtype, shape and data_offsets", true},
        {"5: no data_offsets", file_bytes("{\"x\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4), "entry needs", true},
        {"5: dtype not a string", file_bytes("{\"x\":{\"dtype\":1,\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
         "dtype is not a string", true},
        {"5: unknown dtype", file_bytes("{" + one("Q9", "[1]", "[0,4]") + "}", 4), "unknown dtype 'Q9'", true},
        {"5: shape not an array", file_bytes("{" + one("F32", "4", "[0,4]") + "}", 4), "shape is not an array", true},
        {"5: negative dim", file_bytes("{" + one("F32", "[-1]", "[0,4]") + "}", 4), "non-integer or negative", true},
        {"5: fractional dim", file_bytes("{" + one("F32", "[1.5]", "[0,4]") + "}", 4), "non-integer or negative", true},
        {"5: dim over 2^40", file_bytes("{" + one("F32", "[0,1099511627777]", "[0,0]") + "}", 0), "is over 2^40", true},
        {"5: shape product overflows", file_bytes("{" + one("F32", "[1099511627776,1099511627776]", "[0,4]") + "}", 4),
         "shape product overflows", true},
        {"5: byte size overflows", file_bytes("{" + one("F64", "[1099511627776,8388608]", "[0,4]") + "}", 4),
         "byte size overflows", true},
        {"5: offsets not two integers", file_bytes("{" + one("F32", "[1]", "[0]") + "}", 4), "two non-negative integers", true},
        {"5: negative offset", file_bytes("{" + one("F32", "[1]", "[-4,0]") + "}", 4), "two non-negative integers", true},
        {"5: end < begin", file_bytes("{" + one("F32", "[0]", "[4,0]") + "}", 4), "end 0 < begin 4", true},
        {"5: end past the data", file_bytes("{" + one("F32", "[1024]", "[0,4096]") + "}", 64), "run past the end of the data (64 bytes)", true},
        {"5: span != shape x dtype", file_bytes("{" + one("F32", "[2]", "[0,4]") + "}", 4), "span 4 bytes, but shape x F32 needs 8", true},
        {"5: sub-byte tail", file_bytes("{" + one("F4", "[3]", "[0,1]") + "}", 1), "byte boundary", true},
        {"6: gap at the start", file_bytes("{" + one("F32", "[1]", "[4,8]") + "}", 8), "leaves a gap", true},
        {"6: overlap", file_bytes("{" + ok_x + "," + one("F32", "[1]", "[0,4]", "y") + "}", 4), "overlaps", false},
        {"6: trailing bytes", file_bytes("{" + ok_x + "}", 5), "data buffer ends at byte", false},
        {"6: no tensors, trailing bytes", file_bytes("{}", 1), "data buffer ends at byte", false},
        {"7: metadata value not a string", file_bytes("{\"__metadata__\":{\"a\":1}}", 0), "value of 'a' is not a string", false},
        {"7: metadata not an object", file_bytes("{\"__metadata__\":[]}", 0), "__metadata__ is not an object", false},
    };
    int n = 0;
    for (const Case& c : cases) {
        const std::string p = d.sub("case" + std::to_string(n++) + ".safetensors");
        spit(p, c.bytes);
        StFile f;
        const Status st = f.open(p);
        ASSERT_FALSE(st.is_ok()) << "rule " << c.rule << " accepted";
        std::printf("rule %-32s -> %s\n", c.rule, st.message().substr(d.path.size() + 1).c_str());
        EXPECT_EQ(st.code(), SLUICE_E_FORMAT) << c.rule;
        EXPECT_TRUE(has(st.message(), p + ": ")) << c.rule << ": " << st.message();
        EXPECT_TRUE(has(st.message(), c.expect)) << c.rule << ": " << st.message();
        if (c.names_tensor) {
            EXPECT_TRUE(has(st.message(), "tensor 'x'")) << c.rule << ": " << st.message();
        }
    }
    // An absent file is an I/O error naming it.
    StFile f;
    const Status st = f.open(d.sub("absent.safetensors"));
    EXPECT_EQ(st.code(), SLUICE_E_IO);
    EXPECT_TRUE(has(st.message(), "absent.safetensors: cannot open")) << st.message();
}

TEST(Safetensors, AcceptsPaddingEmptyTensorsAndEveryDtype) {
    TempDir d;
    auto opens = [&](const std::string& header, size_t data) {
        spit(d.sub("t.safetensors"), file_bytes(header, data));
        StFile f;
        const Status st = f.open(d.sub("t.safetensors"));
        EXPECT_TRUE(st.is_ok()) << header << ": " << st.message();
        return f.tensors().size();
    };
    EXPECT_EQ(opens(" \t\r\n{" + one("F32", "[1]", "[0,4]") + "}    ", 4), 1u);  // writers pad with spaces
    EXPECT_EQ(opens("{}", 0), 0u);
    EXPECT_EQ(opens("{\"__metadata__\":{}}", 0), 0u);
    // Zero-sized tensors tile at any point, even with a huge other dim.
    EXPECT_EQ(opens("{" + one("F32", "[0]", "[0,0]", "a") + "," + one("F32", "[0,1099511627776]", "[0,0]", "b") + "}", 0), 2u);
    EXPECT_EQ(opens("{" + one("F32", "[]", "[0,4]") + "}", 4), 1u);  // a scalar
    // Every §2.3 dtype name is a valid container.
    const std::vector<std::pair<std::string, int>> all = {
        {"BOOL", 8},  {"U8", 8},   {"I8", 8},   {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8},
        {"F8_E5M2FNUZ", 8}, {"I16", 16}, {"U16", 16}, {"F16", 16}, {"BF16", 16}, {"I32", 32}, {"U32", 32},
        {"F32", 32}, {"I64", 64}, {"U64", 64}, {"F64", 64}, {"C64", 64}, {"F4", 4}, {"F6_E2M3", 6}, {"F6_E3M2", 6}};
    std::string h = "{";
    uint64_t off = 0;
    for (const auto& [dt, bits] : all) {
        const uint64_t bytes = 8 * uint64_t(bits) / 8;  // shape [8]: whole bytes for every width
        h += (off ? "," : "") + one(dt, "[8]", "[" + std::to_string(off) + "," + std::to_string(off + bytes) + "]", "t_" + dt);
        off += bytes;
        EXPECT_EQ(dtype_bits(dt), size_t(bits)) << dt;
    }
    EXPECT_EQ(opens(h + "}", off), all.size());
    EXPECT_EQ(dtype_bits("Q9"), 0u);
}

TEST(Safetensors, ReadsRowsAndBytesWithinBounds) {
    TempDir d;
    const std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -INFINITY};
    const std::vector<uint16_t> bf = {0x3F80, 0xC040, 0x3F00, 0x0000};  // 1, -3, 0.5, 0
    const std::vector<uint16_t> hf = {0x3C00, 0xC000, 0x0001, 0x7C00};  // 1, -2, 2^-24, inf
    const std::vector<uint8_t> u8 = {1, 2, 3, 4};
    const std::string p = d.sub("rows.safetensors");
    ASSERT_TRUE(write_safetensors(p, {{"k", "v"}},
                                  {{"a", "F32", {3, 2}, f32.data()},
                                   {"b", "BF16", {2, 2}, bf.data()},
                                   {"h", "F16", {2, 2}, hf.data()},
                                   {"u", "U8", {2, 2}, u8.data()},
                                   {"v", "F32", {6}, f32.data()}})
                    .is_ok());
    StFile f;
    ASSERT_TRUE(f.open(p).is_ok());
    EXPECT_EQ(f.metadata().at("k"), "v");
    EXPECT_EQ(f.header_sha256(), sha256_hex(slurp(p).substr(8, f.data_start() - 8)));
    std::vector<float> o(6);
    ASSERT_TRUE(f.read_rows_f32(*f.find("a"), 1, 2, o.data()).is_ok());
    EXPECT_EQ(o[0], 3.25f);
    EXPECT_TRUE(std::isinf(o[3]));
    ASSERT_TRUE(f.read_rows_f32(*f.find("b"), 0, 2, o.data()).is_ok());
    EXPECT_EQ(o[1], -3.0f);
    EXPECT_EQ(o[2], 0.5f);
    ASSERT_TRUE(f.read_rows_f32(*f.find("h"), 0, 2, o.data()).is_ok());
    EXPECT_EQ(o[1], -2.0f);
    EXPECT_EQ(o[2], std::ldexp(1.0f, -24));
    EXPECT_TRUE(std::isinf(o[3]));  // IEEE F16, unlike the container's scales
    EXPECT_TRUE(f.read_rows_f32(*f.find("a"), 0, 0, o.data()).is_ok());
    // Refusals name the file and tensor.
    for (const auto& [st, what] : std::vector<std::pair<Status, std::string>>{
             {f.read_rows_f32(*f.find("a"), 2, 2, o.data()), "tensor 'a': rows [2, +2) are outside its 3"},
             {f.read_rows_f32(*f.find("a"), UINT64_MAX, 2, o.data()), "tensor 'a': rows"},
             {f.read_rows_f32(*f.find("v"), 0, 1, o.data()), "tensor 'v': rows are read from rank-2 tensors only"},
             {f.read_rows_f32(*f.find("u"), 0, 1, o.data()), "tensor 'u': dtype U8"},
             {f.pread_data(f.file_size(), o.data(), 1), "outside the data buffer"},
             {f.pread_file(f.file_size() - 2, o.data(), 4), "outside the file"},
             {f.pread_file(4, o.data(), UINT64_MAX), "outside the file"},
         }) {
        EXPECT_FALSE(st.is_ok()) << what;
        EXPECT_TRUE(has(st.message(), p + ": ") && has(st.message(), what)) << st.message();
    }
    uint8_t b[4];
    ASSERT_TRUE(f.pread_data(f.find("u")->begin, b, 4).is_ok());
    EXPECT_EQ(std::memcmp(b, u8.data(), 4), 0);
}

TEST(Safetensors, WriterIsDeterministicPaddedAndAtomic) {
    TempDir d;
    const std::vector<float> a = {1.f, -2.f, 3.5f, 0.f, 7.f, -INFINITY};
    const std::vector<uint8_t> u = {1, 2, 3};
    const std::vector<int32_t> w = {-1, 2};
    for (size_t align : {size_t(8), size_t(4096)}) {
        std::string bytes[2], sha[2];
        for (int rep = 0; rep < 2; ++rep) {
            const std::string p = d.sub("w" + std::to_string(align) + "-" + std::to_string(rep) + ".safetensors");
            uint64_t size = 0;
            // The same tensors listed in another order, the same metadata: the same bytes.
            std::vector<TensorOut> ts = {{"u", "U8", {3}, u.data()}, {"logits", "F32", {2, 3}, a.data()}, {"w", "I32", {2}, w.data()}};
            if (rep) std::reverse(ts.begin(), ts.end());
            ASSERT_TRUE(write_safetensors(p, {{"z", "1"}, {"a", "2"}}, ts, align, &sha[rep], &size).is_ok());
            bytes[rep] = slurp(p);
            EXPECT_EQ(size, bytes[rep].size());
            EXPECT_EQ(sha[rep], sha256_hex(bytes[rep]));
            EXPECT_FALSE(fs::exists(p + ".tmp"));
            StFile f;
            ASSERT_TRUE(f.open(p).is_ok());
            EXPECT_EQ(f.data_start() % align, 0u);
            // §2.5: metadata first with sorted keys, tensors by descending dtype width then name.
            const std::string hdr = bytes[rep].substr(8, f.data_start() - 8);
            EXPECT_EQ(hdr.rfind("{\"__metadata__\":{\"a\":\"2\",\"z\":\"1\"},\"logits\":", 0), 0u) << hdr;
            ASSERT_EQ(f.tensors().size(), 3u);
            EXPECT_EQ(f.tensors()[0].name, "logits");
            EXPECT_EQ(f.tensors()[1].name, "w");
            EXPECT_EQ(f.tensors()[2].name, "u");
            std::vector<float> back(6);
            ASSERT_TRUE(f.read_rows_f32(*f.find("logits"), 0, 2, back.data()).is_ok());
            EXPECT_EQ(std::memcmp(back.data(), a.data(), 24), 0);
        }
        EXPECT_EQ(bytes[0], bytes[1]) << "align " << align;
        EXPECT_EQ(sha[0], sha[1]);
    }
    // Refusals leave nothing behind; an existing directory is not replaced.
    const std::string p = d.sub("bad.safetensors");
    Status st = write_safetensors(p, {}, {{"x", "F32", {1}, a.data()}}, 16);
    EXPECT_EQ(st.code(), SLUICE_E_ARG) << st.message();
    st = write_safetensors(p, {}, {{"x", "Q9", {1}, a.data()}});
    EXPECT_TRUE(has(st.message(), "tensor 'x': unknown dtype 'Q9'")) << st.message();
    EXPECT_FALSE(fs::exists(p) || fs::exists(p + ".tmp"));
    fs::create_directory(d.sub("dir.safetensors"));
    st = write_safetensors(d.sub("dir.safetensors"), {}, {{"x", "F32", {1}, a.data()}});
    EXPECT_EQ(st.code(), SLUICE_E_IO);
    EXPECT_TRUE(has(st.message(), "not a regular file")) << st.message();
    EXPECT_TRUE(fs::is_directory(d.sub("dir.safetensors")));
}

TEST(Safetensors, Festr2HeaderSizes) {
    // KLD.md §1.9: the festr2 writer's header is 328 bytes for windows 0-23
    // and 336 for 24-31; ours emits the same compact JSON and padding.
    const std::string h64(64, 'a');
    auto hdr = [&](int idx, const std::string& dom) {
        std::map<std::string, std::string> m = {{"format", "kimi-k3-kld-reference-v1"}, {"window_index", std::to_string(idx)},
                                                {"domain", dom}, {"context_length", "2048"}, {"vocab_size", "163840"},
                                                {"dtype", "float32"}, {"token_ids_json_sha256", h64}};
        return safetensors_header(m, {{"logits", "F32", {2047, 163840}, nullptr}}).size();
    };
    EXPECT_EQ(hdr(7, "prose"), 328u);
    EXPECT_EQ(hdr(23, "code"), 328u);
    EXPECT_EQ(hdr(31, "instruction"), 336u);
    const uint64_t total = 24 * (8 + 328 + 1341521920ull) + 8 * (8 + 336 + 1341521920ull);
    EXPECT_EQ(total, 42928712256ull);
}

TEST(Safetensors, HalfConversions) {
    EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
    EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
    EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
    EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
    EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
    EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
    EXPECT_EQ(f32_to_bf16_rne(1.00390625f), 0x3f80);  // tie -> even
    EXPECT_EQ(f32_to_bf16_rne(1.01171875f), 0x3f82);  // tie -> even (up)
    EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16_rne(NAN))));
}

namespace {

// One shard of a checkpoint: F32 [4] tensors of these names.
void shard(const std::string& path, const std::vector<std::string>& names) {
    std::vector<float> v(4, 1.0f);
    std::vector<TensorOut> ts;
    for (const std::string& n : names) ts.push_back({n, "F32", {4}, v.data()});
    ASSERT_TRUE(write_safetensors(path, {{"format", "pt"}}, ts).is_ok());
}

Status open_dir(const std::string& dir, Checkpoint* ck) { return ck->open(dir); }

}  // namespace

TEST(SafetensorsCheckpoint, ShardedIndexListsAndFindsTensors) {
    TempDir d;
    shard(d.sub("model-1.safetensors"), {"a", "b"});
    shard(d.sub("model-2.safetensors"), {"c", "hidden"});
    spit(d.sub("model.safetensors.index.json"),
         R"({"metadata":{},"weight_map":{"a":"model-1.safetensors","b":"model-1.safetensors","c":"model-2.safetensors"}})");
    Checkpoint ck;
    const Status st = open_dir(d.path, &ck);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(ck.index_file(), "model.safetensors.index.json");
    EXPECT_EQ(ck.names(), (std::vector<std::string>{"a", "b", "c"}));  // the index is the list
    ASSERT_EQ(ck.shards().size(), 2u);
    EXPECT_EQ(ck.shards()[1].file, "model-2.safetensors");
    EXPECT_EQ(ck.shards()[0].dtype_tensors.at("F32"), 2u);
    EXPECT_EQ(ck.shards()[0].dtype_bytes.at("F32"), 32u);
    EXPECT_EQ(ck.shards()[0].header_sha256.size(), 64u);
    const TensorInfo* c = ck.find("c");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->shard, 1);
    EXPECT_EQ(ck.where(*c), "model-2.safetensors: tensor 'c'");
    float v[4];
    ASSERT_TRUE(ck.read_raw(*c, 4, 12, v).is_ok());
    EXPECT_EQ(v[0], 1.0f);
    Status bad = ck.read_raw(*c, 8, 12, v);
    EXPECT_TRUE(has(bad.message(), "model-2.safetensors: tensor 'c': read outside the tensor")) << bad.message();
    // A shard cut short after opening (into c, before "hidden"): the read
    // fails naming shard and tensor.
    fs::resize_file(d.sub("model-2.safetensors"), fs::file_size(d.sub("model-2.safetensors")) - 24);
    bad = ck.read_raw(*c, 0, 16, v);
    EXPECT_EQ(bad.code(), SLUICE_E_IO);
    EXPECT_TRUE(has(bad.message(), "tensor 'c'") && has(bad.message(), "file changed or truncated")) << bad.message();
}

TEST(SafetensorsCheckpoint, RefusesBadIndexesAndShards) {
    struct Case {
        const char* what;
        std::string index;  // "" = no index file
        std::vector<std::pair<std::string, std::vector<std::string>>> shards;
        std::string expect;
    };
    const std::vector<Case> cases = {
        {"index not JSON", "{", {}, "model.safetensors.index.json: not valid JSON"},
        {"no weight_map", "{}", {}, "no weight_map object"},
        {"weight_map value not a string", R"({"weight_map":{"a":1}})", {}, "weight_map['a'] is not a string"},
        {"absolute shard path", R"({"weight_map":{"a":"/etc/passwd"}})", {}, "unsafe shard path '/etc/passwd'"},
        {"shard path up and out", R"({"weight_map":{"a":"../x.safetensors"}})", {}, "unsafe shard path"},
        {"listed tensor missing", R"({"weight_map":{"a":"s1.safetensors","zz":"s1.safetensors"}})", {{"s1.safetensors", {"a"}}},
         "tensor 'zz' is listed in s1.safetensors but that shard has no such tensor"},
        {"listed in the wrong shard", R"({"weight_map":{"a":"s2.safetensors","b":"s1.safetensors"}})",
         {{"s1.safetensors", {"a", "b"}}, {"s2.safetensors", {"c"}}}, "tensor 'a' is listed in s2.safetensors"},
        {"tensor in two shards", R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})",
         {{"s1.safetensors", {"a"}}, {"s2.safetensors", {"a", "b"}}}, "s2.safetensors: tensor 'a' is also in s1.safetensors"},
        {"missing shard", R"({"weight_map":{"a":"gone.safetensors"}})", {}, "gone.safetensors: cannot open"},
        {"no files", "", {}, "no .safetensors file"},
        {"two files, no index", "", {{"a.safetensors", {"a"}}, {"b.safetensors", {"b"}}}, "several .safetensors files"},
    };
    for (const Case& c : cases) {
        TempDir d;
        if (!c.index.empty()) spit(d.sub("model.safetensors.index.json"), c.index);
        for (const auto& [f, names] : c.shards) shard(d.sub(f), names);
        Checkpoint ck;
        const Status st = open_dir(d.path, &ck);
        ASSERT_FALSE(st.is_ok()) << c.what;
        std::printf("%-32s -> %s\n", c.what, st.message().c_str());
        EXPECT_TRUE(has(st.message(), c.expect)) << c.what << ": " << st.message();
    }
    // A broken shard is refused by the file rules, naming the shard.
    TempDir d;
    shard(d.sub("s1.safetensors"), {"a"});
    fs::resize_file(d.sub("s1.safetensors"), fs::file_size(d.sub("s1.safetensors")) - 1);
    spit(d.sub("model.safetensors.index.json"), R"({"weight_map":{"a":"s1.safetensors"}})");
    Checkpoint ck;
    const Status st = open_dir(d.path, &ck);
    EXPECT_TRUE(has(st.message(), "s1.safetensors: tensor 'a': data_offsets [0, 16] run past the end")) << st.message();
}
