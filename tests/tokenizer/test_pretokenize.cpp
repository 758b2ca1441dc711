// Pre-tokenizer pieces on hand-picked cases; the expected pieces are what
// Python's `regex` returns for the same pattern (split_check.py checks the
// full corpus the same way).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"

using namespace sluice::tok;
using V = std::vector<std::string>;

namespace {
V split(const std::string &s, Pattern p) {
    std::vector<Piece> pieces;
    pretokenize(s, p, pieces);
    V out;
    size_t at = 0;
    for (auto &pc : pieces) {
        EXPECT_EQ(pc.begin, at);  // pieces tile the text
        at += pc.size;
        out.push_back(s.substr(pc.begin, pc.size));
    }
    EXPECT_EQ(at, s.size());
    return out;
}
}  // namespace

TEST(Pretokenize, O200k) {
    auto P = Pattern::o200k;
    EXPECT_EQ(split("Hello world", P), (V{"Hello", " world"}));
    EXPECT_EQ(split("I'm  fine\n\n  ok", P), (V{"I'm", " ", " fine", "\n\n", " ", " ok"}));
    EXPECT_EQ(split("   x", P), (V{"  ", " x"}));
    EXPECT_EQ(split("HELLOworld's", P), (V{"HELLOworld's"}));
    EXPECT_EQ(split("ABC DEF", P), (V{"ABC", " DEF"}));
    EXPECT_EQ(split("1234567", P), (V{"123", "456", "7"}));
    EXPECT_EQ(split("a//b\n/c", P), (V{"a", "//", "b", "\n", "/c"}));
    EXPECT_EQ(split("中文abc", P), (V{"中文abc"}));
    EXPECT_EQ(split("you're WE'LL it'ſ", P), (V{"you're", " WE'LL", " it'ſ"}));
    EXPECT_EQ(split("x \t\n\n  y", P), (V{"x", " \t\n\n", " ", " y"}));
    EXPECT_EQ(split("\xCC\x81" "abc", P), (V{"\xCC\x81" "abc"}));
    EXPECT_EQ(split(" 123", P), (V{" ", "123"}));
    EXPECT_EQ(split("foo  ", P), (V{"foo", "  "}));
    EXPECT_EQ(split("(中)", P), (V{"(中", ")"}));
    EXPECT_EQ(split("\r\n\r\nx", P), (V{"\r\n\r\n", "x"}));
    EXPECT_EQ(split("", P), V{});
}

TEST(Pretokenize, Cl100k) {
    auto P = Pattern::cl100k;
    EXPECT_EQ(split("I'm  fine\n\n  ok", P), (V{"I", "'m", " ", " fine", "\n\n", " ", " ok"}));
    EXPECT_EQ(split("HELLOworld's", P), (V{"HELLOworld", "'s"}));
    EXPECT_EQ(split("you're WE'LL it'ſ", P), (V{"you", "'re", " WE", "'LL", " it", "'ſ"}));
    EXPECT_EQ(split("e\xCC\x81te\xCC\x81", P), (V{"e", "\xCC\x81te", "\xCC\x81"}));
    EXPECT_EQ(split("a//b\n/c", P), (V{"a", "//", "b", "\n", "/c"}));
}

TEST(Pretokenize, Kimi) {
    auto P = Pattern::kimi;
    EXPECT_EQ(split("中文abc", P), (V{"中文", "abc"}));
    EXPECT_EQ(split("Hello世界！", P), (V{"Hello", "世界", "！"}));
    EXPECT_EQ(split("(中)", P), (V{"(", "中", ")"}));
    EXPECT_EQ(split("한국어 テスト 日本々", P), (V{"한국어", " テスト", " ", "日本々"}));
    EXPECT_EQ(split("you're WE'LL it'ſ", P), (V{"you're", " WE'LL", " it'ſ"}));
    EXPECT_EQ(split("I'm  fine\n\n  ok", P), (V{"I'm", " ", " fine", "\n\n", " ", " ok"}));
}

TEST(Pretokenize, KimiRegexIsTokenizerMd) {
    // The regex documented by pattern_regex(kimi) is TOKENIZER.md's, joined.
    std::ifstream f(std::string(SLUICE_SHARED_DIR) + "/spec/TOKENIZER.md");
    if (!f) GTEST_SKIP() << "spec/TOKENIZER.md not found under " << SLUICE_SHARED_DIR;
    std::stringstream ss;
    ss << f.rdbuf();
    std::string md = ss.str();
    size_t a = md.find("Kimi (Kimi-Linear, K2, K3)");
    ASSERT_NE(a, std::string::npos);
    a = md.find("```\n", a) + 4;
    size_t b = md.find("```", a);
    std::string block = md.substr(a, b - a), joined;
    std::istringstream lines(block);
    for (std::string l; std::getline(lines, l);)
        if (!l.empty()) joined += (joined.empty() ? "" : "|") + l;
    EXPECT_EQ(joined, pattern_regex(Pattern::kimi));
}

TEST(Pretokenize, LongRunsAreLinear) {
    // Pathological inputs stay fast and tile: long space, letter and mark runs.
    std::string s(200000, ' ');
    s += "x";
    for (int i = 0; i < 50000; ++i) s += "\xCC\x81";  // marks
    s += std::string(100000, 'A') + "\n";
    for (Pattern p : {Pattern::kimi, Pattern::o200k, Pattern::cl100k}) {
        auto v = split(s, p);
        EXPECT_LT(v.size(), 10u);
    }
}
