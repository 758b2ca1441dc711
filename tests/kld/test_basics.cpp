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

// The safetensors reader and writer, and the half conversions: tested
// once for every user in tests/unit/safetensors_test.cpp.

TEST(KldBasics, WindowLists) {
    std::vector<int> w;
    ASSERT_TRUE(parse_window_list("0-3,16,24-25,2", 32, &w).ok());
    EXPECT_EQ(w, (std::vector<int>{0, 1, 2, 3, 16, 24, 25}));
    EXPECT_EQ(parse_window_list("40", 32, &w).code, Code::usage);
    EXPECT_EQ(parse_window_list("3-1", 32, &w).code, Code::usage);
    EXPECT_EQ(parse_window_list("a", 32, &w).code, Code::usage);
}
