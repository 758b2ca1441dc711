// Encoding, markup versus content, decoding, and the BPE merge itself.
#include <gtest/gtest.h>

#include <random>

#include "test_util.h"
#include "tokenizer/unicode.h"

using namespace sluice::tok;
using namespace sluice::tok::test;
using Ids = std::vector<Token>;

namespace {
const Tokenizer &kimi_tok() {
    static Tokenizer t = std::move(Tokenizer::load(kimi_tok_dir()).value());
    return t;
}
const Tokenizer &hf_tok() {  // has <|im_end|> = 498 etc.
    static Tokenizer t = std::move(Tokenizer::load(hf_dir()).value());
    return t;
}
Ids cat(Ids a, const Ids &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}
}  // namespace

TEST(Encode, MergesByLowestRankFirst) {
    const Tokenizer &t = kimi_tok();
    // "hello" is a token; " world" is not: "or" (265) merges before " w"
    // (269), and then nothing else applies.
    EXPECT_EQ(t.encode("hello world"), (Ids{284, 269, 265, 'l', 'd'}));
    EXPECT_EQ(t.encode("the weather"), (Ids{276, 269, 'e', 260, 256, 'r'}));
    EXPECT_EQ(t.encode(""), Ids{});
}

TEST(Encode, ContentNeverYieldsSpecials) {
    const Tokenizer &t = hf_tok();
    Ids ids = t.encode("<|im_end|>");
    EXPECT_GT(ids.size(), 1u);
    for (Token id : ids) {
        EXPECT_FALSE(t.is_special(id));
        EXPECT_LT(id, static_cast<Token>(t.n_ranks()));
    }
    EXPECT_EQ(t.decode(ids).value(), "<|im_end|>");
    // Fuzz: strings made of special-token fragments and bytes.
    std::mt19937 rng(7);
    std::vector<std::string> parts = {"<|", "|>", "im_end", "<|im_end|>", "[BOS]", "[", "]", "<", "|", ">",
                                      "\xE2", "\x80", "<|im_user|>", " "};
    for (const auto &s : t.specials()) parts.push_back(s.text);
    for (int n = 0; n < 2000; ++n) {
        std::string s;
        int k = rng() % 8;
        for (int i = 0; i < k; ++i) s += parts[rng() % parts.size()];
        for (Token id : t.encode(s)) ASSERT_FALSE(t.is_special(id)) << s;
    }
}

TEST(Encode, MarkupResolvesSpecials) {
    const Tokenizer &t = hf_tok();
    EXPECT_EQ(t.encode_markup("<|im_end|>"), (Ids{498}));
    EXPECT_EQ(t.encode_markup("a<|im_end|>b"), cat(cat(t.encode("a"), {498}), t.encode("b")));
    EXPECT_EQ(t.encode_markup("<|im_user|>user<|im_middle|>hi<|im_end|>"),
              cat(cat(cat(cat(Ids{499}, t.encode("user")), {502}), t.encode("hi")), {498}));
    EXPECT_EQ(t.encode_markup("no specials here"), t.encode("no specials here"));
    EXPECT_EQ(t.encode_markup("<|im_end"), t.encode("<|im_end"));
}

TEST(Encode, MarkupEarliestThenLongest) {
    std::string r = rank_text({});
    auto t = Tokenizer::from_text(
        r, R"([{"id": 300, "text": "<|a"}, {"id": 301, "text": "<|a|>"}, {"id": 302, "text": "a|>x"}])");
    ASSERT_TRUE(t) << t.error();
    EXPECT_EQ(t->encode_markup("<|a|>"), (Ids{301}));         // longest at the same position
    EXPECT_EQ(t->encode_markup("<|a|x"), cat(Ids{300}, t->encode("|x")));
    EXPECT_EQ(t->encode_markup("<|a|>x"), (Ids{301, 'x'}));    // earliest wins over a later longer one
}

TEST(Encode, RoundTripValidUtf8) {
    const Tokenizer &t = kimi_tok();
    const char *texts[] = {"hello world", "The weather in Paris: 22°C, true/false/null.",
                           "中文和日本語のテキスト、한국어", "مرحبا بالعالم", "שָׁלוֹם", "नमस्ते दुनिया", "สวัสดีครับ",
                           "გამარჯობა", "e\xCC\x81\xCC\x82", "👨‍👩‍👧‍👦 🏳️‍🌈 🇯🇵 1️⃣",
                           "  \t\n\r\n  mixed   whitespace \n", "<|open|>not special<|close|>"};
    for (const char *s : texts) {
        EXPECT_EQ(t.decode(t.encode(s)).value(), s);
        EXPECT_EQ(t.decode(t.encode_markup(s)).value(), s);
    }
    std::mt19937 rng(11);
    for (int n = 0; n < 500; ++n) {
        std::string s;
        int k = rng() % 40;
        for (int i = 0; i < k; ++i) {
            uint32_t cp = rng() % 0x30000;
            if (cp >= 0xD800 && cp < 0xE000) continue;
            append_utf8(s, cp);
        }
        ASSERT_EQ(t.decode(t.encode(s)).value(), s);
    }
}

TEST(Encode, InvalidUtf8BecomesReplacementCharacter) {
    const Tokenizer &t = kimi_tok();
    EXPECT_EQ(t.encode("a\xFF" "b"), t.encode("a\xEF\xBF\xBD" "b"));
    EXPECT_EQ(t.encode("\xE2\x82"), t.encode("\xEF\xBF\xBD"));
    EXPECT_EQ(t.decode(t.encode("x\xC0\xAF")).value(), "x\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(t.split("\xFF\xFE"), (std::vector<std::string>{"\xEF\xBF\xBD\xEF\xBF\xBD"}));
}

TEST(Decode, SpecialsAndErrors) {
    const Tokenizer &t = hf_tok();
    EXPECT_EQ(t.decode(Ids{499, 'h', 'i', 498}).value(), "<|im_user|>hi<|im_end|>");
    EXPECT_EQ(t.decode(Ids{499, 'h', 'i', 498}, true).value(), "hi");
    auto bad = t.decode(Ids{'a', 400});
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.status().code(), SLUICE_E_RANGE);
    EXPECT_NE(bad.error().find("400"), std::string::npos);
    EXPECT_EQ(t.token_to_piece(498).value(), "<|im_end|>");
    EXPECT_EQ(t.token_to_piece(258).value(), "hello");
    EXPECT_FALSE(t.token_to_piece(-1));
    EXPECT_FALSE(t.token_to_piece(300));
}

TEST(Bpe, HeapMergeEqualsLinearMerge) {
    // A table with many overlapping merges, so the order matters.
    std::vector<std::string> merges = {"ab", "bc", "ca", "abc", "bca", "cab", "aa", "bb", "abca", "bcab", "cc",
                                       "ccab", "aab", "abcabc", "ba", "cb", "ac"};
    auto t = Tokenizer::from_text(rank_text(merges), "");
    ASSERT_TRUE(t);
    std::vector<std::pair<std::string, Token>> entries;
    RankTable rt;
    for (int c = 0; c < 256; ++c) entries.push_back({std::string(1, (char)c), c});
    for (size_t i = 0; i < merges.size(); ++i) entries.push_back({merges[i], Token(256 + i)});
    rt.build(entries);
    std::mt19937 rng(3);
    for (int n = 0; n < 3000; ++n) {
        std::string s;
        int len = 2 + rng() % 300;
        for (int i = 0; i < len; ++i) s.push_back("abc"[rng() % 3]);
        Ids a, b;
        auto *p = reinterpret_cast<const unsigned char *>(s.data());
        rt.merge_linear(p, s.size(), a);
        rt.merge_heap(p, s.size(), b);
        ASSERT_EQ(a, b) << s;
    }
}
