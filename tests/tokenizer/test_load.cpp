// Loading the rank file and the specials: fixtures load, and every kind of
// damage is refused with an error naming the file, line and problem.
#include <gtest/gtest.h>

#include "test_util.h"

using namespace sluice::tok;
using namespace sluice::tok::test;

TEST(Load, KimiLinearTokFixture) {
    auto t = Tokenizer::load(kimi_tok_dir());
    ASSERT_TRUE(t) << t.error();
    EXPECT_EQ(t->n_ranks(), 305u);
    EXPECT_EQ(t->specials().size(), 11u);
    EXPECT_EQ(t->n_vocab(), 316);  // the fixture's "vocab"
    EXPECT_EQ(t->bos(), 305);      // n_ranks: [BOS]
    EXPECT_EQ(t->eos(), 307);      // n_ranks + 2: <|end_of_msg|>
    EXPECT_EQ(t->special_id("[BOS]"), 305);
    EXPECT_EQ(t->special_id("<|end_of_msg|>"), 307);
    EXPECT_FALSE(t->special_id("<|im_end|>"));
    EXPECT_EQ(t->pattern(), Pattern::kimi);
}

TEST(Load, EosOverride) {
    auto t = Tokenizer::load(kimi_tok_dir(), "", LoadOptions{Pattern::kimi, 306});
    ASSERT_TRUE(t) << t.error();
    EXPECT_EQ(t->eos(), 306);
    EXPECT_EQ(t->bos(), 305);
}

TEST(Load, HuggingFaceSourceWithTokenizerConfig) {
    auto t = Tokenizer::load(hf_dir());  // tiktoken.model + tokenizer_config.json
    ASSERT_TRUE(t) << t.error();
    EXPECT_EQ(t->n_ranks(), 262u);
    EXPECT_EQ(t->special_id("<|im_end|>"), 498);
    EXPECT_EQ(t->special_id("[BOS]"), 496);
}

TEST(Load, ConvertedContainerMatchesItsSource) {
    auto a = Tokenizer::load(hf_dir());
    auto b = Tokenizer::load(converted_dir());
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->encode("hello world, hello!"), b->encode("hello world, hello!"));
    ASSERT_EQ(a->specials().size(), b->specials().size());
    for (size_t i = 0; i < a->specials().size(); ++i) {
        EXPECT_EQ(a->specials()[i].id, b->specials()[i].id);
        EXPECT_EQ(a->specials()[i].text, b->specials()[i].text);
    }
}

TEST(Load, RankFileAsPath) {
    auto t = Tokenizer::load(kimi_tok_dir() + "/tokenizer.model");
    ASSERT_TRUE(t) << t.error();
    EXPECT_TRUE(t->specials().empty());  // a file path brings no specials by itself
}

namespace {
void expect_error(const std::string &ranks, const std::string &specials, sluice_status code,
                  const std::vector<std::string> &needles) {
    auto t = Tokenizer::from_text(ranks, specials, {}, "test.model");
    ASSERT_FALSE(t);
    EXPECT_EQ(t.status().code(), code);
    for (const auto &n : needles) EXPECT_NE(t.error().find(n), std::string::npos) << t.error();
}
}  // namespace

TEST(LoadErrors, BadBase64) {
    std::string r = rank_text({}) + "a$b= 256\n";
    expect_error(r, "", SLUICE_E_FORMAT, {"test.model:257:", "base64", "'$'", "column 2"});
    expect_error(rank_text({}) + "abcde 256\n", "", SLUICE_E_FORMAT, {":257:", "multiple of 4"});
    expect_error(rank_text({}) + "==== 256\n", "", SLUICE_E_FORMAT, {":257:", "base64"});
}

TEST(LoadErrors, MissingSpace) {
    expect_error(rank_text({}) + "aGk=256\n", "", SLUICE_E_FORMAT, {"test.model:257:", "missing the space"});
}

TEST(LoadErrors, NonNumericRank) {
    expect_error(rank_text({}) + "aGk= 2x6\n", "", SLUICE_E_FORMAT, {":257:", "rank '2x6'", "decimal"});
    expect_error(rank_text({}) + "aGk= -1\n", "", SLUICE_E_FORMAT, {":257:", "rank '-1'"});
    expect_error(rank_text({}) + "aGk= \n", "", SLUICE_E_FORMAT, {":257:", "rank ''"});
    expect_error(rank_text({}) + "aGk= 99999999999\n", "", SLUICE_E_FORMAT, {":257:"});
}

TEST(LoadErrors, DuplicateRank) {
    expect_error(rank_text({}) + "aGk= 255\n", "", SLUICE_E_FORMAT,
                 {"test.model:257:", "duplicate rank 255", "first on line 256"});
}

TEST(LoadErrors, DuplicateToken) {
    expect_error(rank_text({"hi"}) + "aGk= 257\n", "", SLUICE_E_FORMAT,
                 {"test.model:258:", "duplicate token 'aGk='", "rank 256"});
}

TEST(LoadErrors, GapInRanks) {
    expect_error(rank_text({}) + "aGk= 300\n", "", SLUICE_E_FORMAT, {":257:", "rank 300", "gap"});
}

TEST(LoadErrors, MissingSingleByte) {
    std::string r;
    for (int c = 0; c < 255; ++c) r += b64(std::string(1, (char)c)) + " " + std::to_string(c) + "\n";
    expect_error(r, "", SLUICE_E_FORMAT, {"single byte 0xFF"});
}

TEST(LoadErrors, EmptyAndMissingFiles) {
    expect_error("", "", SLUICE_E_FORMAT, {"no tokens"});
    auto t = Tokenizer::load("/nonexistent/tokenizer.model");
    ASSERT_FALSE(t);
    EXPECT_EQ(t.status().code(), SLUICE_E_IO);
    EXPECT_NE(t.error().find("/nonexistent/tokenizer.model"), std::string::npos);
    auto d = Tokenizer::load(fixtures() + "/warp/kimi-linear-tiny.waste");  // no tokenizer
    ASSERT_FALSE(d);
    EXPECT_NE(d.error().find("no tokenizer.model"), std::string::npos);
}

TEST(LoadErrors, CrlfAndBlankLinesAreAccepted) {
    std::string r = rank_text({"hi"});
    std::string crlf;
    for (char c : r) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    auto t = Tokenizer::from_text(crlf + "\n", "", {}, "crlf");
    ASSERT_TRUE(t) << t.error();
    EXPECT_EQ(t->n_ranks(), 257u);
    EXPECT_EQ(t->encode("hi"), (std::vector<Token>{256}));
}

TEST(LoadErrors, Specials) {
    std::string r = rank_text({});
    expect_error(r, "[{\"id\": 300, \"text\": \"<|x|>\"", SLUICE_E_FORMAT, {"specials", "not valid JSON"});
    expect_error(r, "{\"id\": 300}", SLUICE_E_FORMAT, {"expected a JSON array"});
    expect_error(r, "[{\"text\": \"<|x|>\"}]", SLUICE_E_FORMAT, {"entry 0", "missing \"id\""});
    expect_error(r, "[{\"id\": \"300\", \"text\": \"<|x|>\"}]", SLUICE_E_FORMAT, {"entry 0", "not an integer"});
    expect_error(r, "[{\"id\": 300, \"text\": 5}]", SLUICE_E_FORMAT, {"\"text\" is not a string"});
    expect_error(r, "[{\"id\": -3, \"text\": \"a\"}]", SLUICE_E_FORMAT, {"out of range"});
    expect_error(r, "[{\"id\": 300, \"text\": \"<|x|>\"}, {\"id\": 301, \"text\": \"<|x|>\"}]", SLUICE_E_FORMAT,
                 {"'<|x|>'", "300", "301"});
    expect_error(r, "[{\"id\": 300, \"text\": \"<|x|>\"}, {\"id\": 300, \"text\": \"<|y|>\"}]", SLUICE_E_FORMAT,
                 {"id 300", "twice"});
    // Empty texts are skipped, as warp does.
    auto t = Tokenizer::from_text(r, "[{\"id\": 300, \"text\": \"\"}, {\"id\": 301, \"text\": \"<|y|>\"}]");
    ASSERT_TRUE(t) << t.error();
    EXPECT_EQ(t->specials().size(), 1u);
    EXPECT_EQ(t->n_vocab(), 302);
}
