// Plumbing: the token hash, Python-identical JSON text, window lists.
#include "kld_test_util.h"

using namespace kt;

TEST(KldBasics, TokenHash) {
    // §1.5 example array, hashed without its trailing newline (SHA-256
    // itself: tests/unit/sha256_test.cpp).
    EXPECT_EQ(token_ids_hash({163584, 12, 0, 99}), sha256_hex("[163584,12,0,99]"));
}

TEST(KldBasics, PythonJsonText) {
    json j;
    j["b"] = 1;
    j["a"] = json::array({0.1, 1e-05, 0.0001, 2.0, 1e16, 1e15, -3.5e-7, 123456.789});
    j["c"] = "h\u00e9";
    j["d"] = json::object();
    j["e"] = json::array();
    const std::string want =
        "{\n  \"a\": [\n    0.1,\n    1e-05,\n    0.0001,\n    2.0,\n    1e+16,\n    1000000000000000.0,\n"
        "    -3.5e-07,\n    123456.789\n  ],\n  \"b\": 1,\n  \"c\": \"h\\u00e9\",\n  \"d\": {},\n  \"e\": []\n}\n";
    EXPECT_EQ(dump_py(j), want);
    if (!have_numpy()) GTEST_SKIP() << "python3 not usable for the cross-check";
    const std::string d = tmpdir("pyjson");
    write_text(d + "/x.json", j.dump());
    const std::string cmd = "/usr/bin/python3 -c \"import json,sys; sys.stdout.write(json.dumps(json.load(open('" + d +
                            "/x.json')), indent=2, sort_keys=True)+'\\n')\" > " + d + "/py.txt";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    EXPECT_EQ(read_text(d + "/py.txt"), dump_py(j));
}

TEST(KldBasics, SafetensorsRoundTripAndPadding) {
    const std::string d = tmpdir("st");
    std::vector<float> a = {1.f, -2.f, 3.5f, 0.f, 7.f, -INFINITY};
    std::vector<uint8_t> u = {1, 2, 3};
    for (size_t align : {size_t(8), size_t(4096)}) {
        const std::string p = d + "/t" + std::to_string(align) + ".safetensors";
        std::string sha;
        uint64_t size = 0;
        ASSERT_TRUE(write_safetensors(p, {{"z", "1"}, {"a", "2"}}, {{"logits", "F32", {2, 3}, a.data()}, {"u", "U8", {3}, u.data()}},
                                      align, &sha, &size).is_ok());
        StFile f;
        Status st = f.open(p);
        ASSERT_TRUE(st.is_ok()) << st.message();
        EXPECT_EQ(f.data_start() % align, 0u);
        EXPECT_EQ(f.metadata().at("a"), "2");
        const TensorInfo* t = f.find("logits");
        ASSERT_NE(t, nullptr);
        std::vector<float> back(6);
        ASSERT_TRUE(f.read_rows_f32(*t, 0, 2, back.data()).is_ok());
        EXPECT_EQ(std::memcmp(back.data(), a.data(), 24), 0);
        std::string h2;
        ASSERT_TRUE(sha256_file(p, &h2).is_ok());
        EXPECT_EQ(sha, h2);
        EXPECT_FALSE(file_exists(p + ".tmp"));
    }
}

TEST(KldBasics, SafetensorsReaderRefusals) {
    const std::string d = tmpdir("st-bad");
    auto make = [&](const std::string& name, const std::string& header, size_t data) {
        std::string s(8, '\0');
        uint64_t n = header.size();
        std::memcpy(s.data(), &n, 8);
        s += header;
        s.append(data, '\0');
        write_text(d + "/" + name, s);
        StFile f;
        return f.open(d + "/" + name);
    };
    EXPECT_EQ(code_of(make("short", "", 0)), Code::format);
    EXPECT_EQ(code_of(make("notobj", "[1]", 0)), Code::format);
    EXPECT_EQ(code_of(make("baddtype", R"({"x":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}})", 4)), Code::format);
    EXPECT_EQ(code_of(make("badsize", R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4)), Code::format);
    EXPECT_EQ(code_of(make("gap", R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)), Code::format);
    EXPECT_EQ(code_of(make("trail", R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 5)), Code::format);
    EXPECT_EQ(code_of(make("dup", R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4)), Code::format);
    EXPECT_EQ(code_of(make("meta", R"({"__metadata__":{"a":1}})", 0)), Code::format);
    Status ok = make("ok", R"(  {"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}   )", 4);
    EXPECT_TRUE(ok.is_ok()) << ok.message();
}

TEST(KldBasics, HalfConversions) {
    EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
    EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
    EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
    EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
    EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
    EXPECT_EQ(f32_to_bf16_rne(1.00390625f), 0x3f80);  // tie → even
    EXPECT_EQ(f32_to_bf16_rne(1.01171875f), 0x3f82);  // tie → even (up)
}

TEST(KldBasics, WindowLists) {
    std::vector<int> w;
    ASSERT_TRUE(parse_window_list("0-3,16,24-25,2", 32, &w).is_ok());
    EXPECT_EQ(w, (std::vector<int>{0, 1, 2, 3, 16, 24, 25}));
    EXPECT_EQ(code_of(parse_window_list("40", 32, &w)), Code::usage);
    EXPECT_EQ(code_of(parse_window_list("3-1", 32, &w)), Code::usage);
    EXPECT_EQ(code_of(parse_window_list("a", 32, &w)), Code::usage);
}
