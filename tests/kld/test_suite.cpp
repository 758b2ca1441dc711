// suite make / verify (§1.4-§1.7).
#include "kld_test_util.h"

using namespace kt;

TEST(KldSuite, WindowStarts) {
    std::vector<int64_t> s;
    ASSERT_TRUE(window_starts(10000, 2048, 4, &s).is_ok());
    EXPECT_EQ(s, (std::vector<int64_t>{0, 2650, 5301, 7952}));
    ASSERT_TRUE(window_starts(5000, 2048, 1, &s).is_ok());
    EXPECT_EQ(s, (std::vector<int64_t>{1476}));
    EXPECT_EQ(code_of(window_starts(8000, 2048, 4, &s)), Code::usage);  // N < C*L
}

TEST(KldSuite, MakeFromTokenFilesAndVerify) {
    const std::string d = tmpdir("suite");
    Suite s = make_synth_suite(d, 64, 1000, {"prose", "code"}, 3);
    ASSERT_EQ(s.windows.size(), 6u);
    EXPECT_EQ(s.windows[3].domain, "code");
    EXPECT_EQ(s.windows[3].domain_index, 0);
    EXPECT_EQ(s.windows[3].token_file, "tokens/window-003-code.json");
    // Token file bytes: compact array plus one newline; hash excludes it.
    const std::string tf = read_text(d + "/suite/tokens/window-003-code.json");
    EXPECT_EQ(tf.back(), '\n');
    EXPECT_EQ(sha256_hex(tf.substr(0, tf.size() - 1)), s.windows[3].token_hash);
    std::vector<std::string> hs;
    for (auto& w : s.windows) hs.push_back(w.token_hash);
    std::string joined;
    for (size_t i = 0; i < hs.size(); ++i) joined += (i ? "\n" : "") + hs[i];
    EXPECT_EQ(joined.size(), 6u * 64 + 5);
    EXPECT_EQ(s.suite_hash, sha256_hex(joined));
    // The manifest is Python's json.dumps(indent=2, sort_keys=True) + "\n".
    const std::string mt = read_text(d + "/suite/suite-manifest.json");
    json m = json::parse(mt);
    EXPECT_EQ(dump_py(m), mt);
    EXPECT_EQ(m["domain_counts"], (json{{"code", 3}, {"prose", 3}}));
    EXPECT_EQ(m["total_scored_positions"], 6 * 63);
    std::string out;
    EXPECT_EQ(kld({"suite", "verify", d + "/suite", "--expect-suite-hash", s.suite_hash, "--vocab", "1000"}, &out), 0) << out;
    std::printf("%s", out.c_str());
    EXPECT_EQ(kld({"suite", "verify", d + "/suite", "--expect-suite-hash", std::string(64, '0')}), 3);
    EXPECT_EQ(kld({"suite", "verify", d + "/suite", "--vocab", "10"}), 3);
}

TEST(KldSuite, WhitespaceInTokenFileDoesNotMatterIdsDo) {
    const std::string d = tmpdir("suite-ws");
    Suite s = make_synth_suite(d, 64, 1000, {"prose"}, 2);
    const std::string p = d + "/suite/" + s.windows[1].token_file;
    json arr = json::parse(read_text(p));
    write_text(p, arr.dump(4) + "\n");  // re-indented: same ids
    Suite s2;
    Status st = load_suite(d + "/suite", {}, &s2);
    EXPECT_TRUE(st.is_ok()) << st.message();
    arr[5] = arr[5].get<int>() + 1;  // one id changed
    write_text(p, arr.dump() + "\n");
    st = load_suite(d + "/suite", {}, &s2);
    EXPECT_EQ(code_of(st), Code::identity);
    std::printf("tampered token file: %s\n", st.message().c_str());
    write_text(p, "[1,2,3]\n");  // wrong length
    EXPECT_EQ(code_of(load_suite(d + "/suite", {}, &s2)), Code::format);
}

TEST(KldSuite, MakeFromTextThroughTokenizerCallback) {
    const std::string d = tmpdir("suite-text");
    std::string text;
    // Appended piece by piece: "w" + std::to_string(...) draws GCC 12's
    // false -Wrestrict (PR 105329) from the inlined string insert.
    for (int i = 0; i < 600; ++i) {
        text += 'w';
        text += std::to_string(i % 97);
        text += ' ';
    }
    write_text(d + "/a.txt", text);
    MakeOptions m;
    m.out_dir = d + "/suite";
    m.context_length = 32;
    m.sources = {{"prose", d + "/a.txt", 4, false}};
    m.tokenizer_class = "FakeWordTokenizer";
    int calls = 0;
    m.tokenize = [&](const std::string& t, std::vector<int32_t>* ids) -> Status {
        ++calls;  // one whole-text tokenization per source (§1.4 step 2)
        std::istringstream is(t);
        std::string w;
        while (is >> w) ids->push_back(std::stoi(w.substr(1)));
        return {};
    };
    Suite s;
    Status st = make_suite(m, &s);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(calls, 1);
    ASSERT_EQ(s.windows.size(), 4u);
    EXPECT_EQ(s.windows[0].source_token_start, 0);
    EXPECT_EQ(s.windows[3].source_token_start, 600 - 32);
    EXPECT_EQ(s.windows[1].tokens[0], int32_t(s.windows[1].source_token_start % 97));
    EXPECT_EQ(s.manifest["datasets"][0]["source_utf8_sha256"], sha256_hex(text));
    // No tokenizer → text sources refused.
    m.tokenize = nullptr;
    EXPECT_EQ(code_of(make_suite(m, &s)), Code::usage);
}

TEST(KldSuite, QuickSelectionIsStratified) {
    const std::string d = tmpdir("suite-quick");
    Suite s = make_synth_suite(d, 8, 100, {"prose", "code", "instruction"}, 0 + 4);
    std::vector<int> pos;
    WindowSel q;
    q.quick = true;
    ASSERT_TRUE(select_windows(s, q, &pos).is_ok());
    EXPECT_EQ(pos, (std::vector<int>{0, 4, 8}));
    WindowSel sl;
    sl.stop = 2;
    ASSERT_TRUE(select_windows(s, sl, &pos).is_ok());
    EXPECT_EQ(pos, (std::vector<int>{0, 1}));
}
