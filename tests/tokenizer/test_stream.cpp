// The streaming detokenizer never splits a UTF-8 sequence.
#include <gtest/gtest.h>

#include "test_util.h"
#include "tokenizer/unicode.h"

using namespace sluice::tok;
using namespace sluice::tok::test;

namespace {
const Tokenizer &tok() {
    static Tokenizer t = std::move(Tokenizer::load(kimi_tok_dir()).value());
    return t;
}
}  // namespace

TEST(Stream, HoldsBackSplitSequences) {
    // The fixture has no multi-byte merges, so every non-ASCII byte is its
    // own token and each character arrives split across ids.
    const std::string text = "héllo 中文 👨‍👩‍👧 🇯🇵 e\xCC\x81 end";
    auto ids = tok().encode(text);
    StreamDecoder sd(tok());
    std::string all;
    for (Token id : ids) {
        std::string chunk;
        ASSERT_TRUE(sd.push(id, chunk).is_ok());
        EXPECT_TRUE(is_valid_utf8(chunk)) << "chunk splits a character";
        all += chunk;
    }
    sd.finish(all);
    EXPECT_EQ(all, text);
    EXPECT_EQ(sd.pending_bytes(), 0u);
}

TEST(Stream, EmojiArrivesWhole) {
    auto ids = tok().encode("\xF0\x9F\x98\x80");  // 😀: four byte tokens
    ASSERT_EQ(ids.size(), 4u);
    StreamDecoder sd(tok());
    std::string out;
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(sd.push(ids[i], out).is_ok());
        EXPECT_EQ(out, "");
        EXPECT_EQ(sd.pending_bytes(), size_t(i + 1));
    }
    ASSERT_TRUE(sd.push(ids[3], out).is_ok());
    EXPECT_EQ(out, "\xF0\x9F\x98\x80");
}

TEST(Stream, FlushOnFinish) {
    Token e2 = 0xE2, x82 = 0x82;  // byte tokens: ranks 0..255 are the bytes
    StreamDecoder raw(tok());
    std::string out;
    ASSERT_TRUE(raw.push(e2, out).is_ok());
    ASSERT_TRUE(raw.push(x82, out).is_ok());
    EXPECT_EQ(out, "");
    raw.finish(out);
    EXPECT_EQ(out, "\xE2\x82");  // raw mode: the bytes decode() would give

    StreamDecoder rep(tok(), /*replace_invalid=*/true);
    out.clear();
    ASSERT_TRUE(rep.push(e2, out).is_ok());
    ASSERT_TRUE(rep.push(x82, out).is_ok());
    rep.finish(out);
    EXPECT_EQ(out, "\xEF\xBF\xBD");
}

TEST(Stream, InvalidBytesGoOutAtOnce) {
    StreamDecoder rep(tok(), true);
    std::string out;
    ASSERT_TRUE(rep.push(0xFF, out).is_ok());
    EXPECT_EQ(out, "\xEF\xBF\xBD");
    ASSERT_TRUE(rep.push(0xE2, out).is_ok());
    ASSERT_TRUE(rep.push('A', out).is_ok());  // E2 41: the E2 can no longer complete
    EXPECT_EQ(out, "\xEF\xBF\xBD\xEF\xBF\xBD" "A");
}

TEST(Stream, ConcatenationEqualsDecode) {
    std::vector<Token> ids;
    for (Token b : std::initializer_list<Token>{0xE4, 0xB8, 0xAD, 0x80, 'a', 0xF0, 0x9F, 0xE2, 0x82, 0xAC, 305, 0xC3}) ids.push_back(b);
    for (bool replace : {false, true}) {
        StreamDecoder sd(tok(), replace);
        std::string all;
        for (Token id : ids) ASSERT_TRUE(sd.push(id, all).is_ok());
        sd.finish(all);
        std::string whole = tok().decode(ids).value();
        EXPECT_EQ(all, replace ? sanitize_utf8(whole) : whole);
    }
}

TEST(Stream, SpecialsAndUnknownIds) {
    StreamDecoder sd(tok(), false, /*skip_specials=*/true);
    std::string out;
    ASSERT_TRUE(sd.push(305, out).is_ok());  // [BOS]
    ASSERT_TRUE(sd.push('o', out).is_ok());
    EXPECT_EQ(out, "o");
    auto st = sd.push(5000, out);
    EXPECT_EQ(st.code(), SLUICE_E_RANGE);
}

TEST(Stream, OutputBound) {
    StreamDecoder sd(tok(), true);
    EXPECT_EQ(tok().max_token_bytes(), 26u);  // <|kimi_image_placeholder|>
    std::string out;
    for (Token id : {0xF0, 0x9F, 0x98}) ASSERT_TRUE(sd.push(id, out).is_ok());
    ASSERT_TRUE(sd.push(315, out).is_ok());
    EXPECT_LE(out.size(), sd.max_output_per_push());
}
