// Constrained decoding (src/grammar): the matcher against hand-written
// JSON, the token mask against a brute-force check of every token, schema
// refusals, and random-logit generations that must all parse.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "grammar/constraint.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"

using namespace sluice::grammar;

namespace {

Grammar compile(const std::string &schema, Limits lim = {}) {
    Grammar g;
    std::string err;
    EXPECT_TRUE(compile_json_schema(schema, lim, &g, &err)) << schema << ": " << err;
    return g;
}

bool matches(const Grammar &g, const std::string &text) {
    Matcher m(&g);
    return m.step_bytes(text) && m.accepting();
}

// A vocabulary: every byte, plus multi-byte pieces like a BPE's (JSON
// punctuation runs, words, digits, UTF-8 characters and fragments).
std::vector<std::string> test_vocab(size_t extra, uint64_t seed) {
    std::vector<std::string> v;
    for (int b = 0; b < 256; b++) v.push_back(std::string(1, (char)b));
    const char *pieces[] = {"{\"", "\":", "\",\"", "\"}", "},{", "[{", "}]", "\":\"", "true", "false", "null", "12",
                            "3.5", "e+", "-", "\\n", "\\\"", "\\u00e9", "\xC3\xA9", "\xE4\xB8\xAD", "\xE4",
                            "\xB8\xAD", " the", "name", "age", "\"name\":", "[]", "{}", ",\"", "0.", "\"\"", ":["};
    for (const char *p : pieces) v.push_back(p);
    std::mt19937_64 rng(seed);
    const std::string alpha = "abcdefghijklmnopqrstuvwxyz \"{}[],:0123456789.-e\\";
    while (v.size() < 256 + std::size(pieces) + extra) {
        size_t len = 2 + rng() % 6;
        std::string t;
        for (size_t i = 0; i < len; i++) t.push_back(alpha[rng() % alpha.size()]);
        v.push_back(t);
    }
    return v;
}

// Sampling that draws from the whole distribution (no top-k/top-p/min-p cut),
// so only the grammar's mask limits what is drawn.
sluice::sample::Params unfiltered(uint64_t seed) {
    sluice::sample::Params p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

}  // namespace

TEST(Grammar, MatcherAcceptsAndRefuses) {
    Grammar g = compile(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
        "tags":{"type":"array","items":{"enum":["a","b"]}},"pet":{"anyOf":[{"type":"null"},
        {"type":"object","properties":{"kind":{"type":"string"}},"required":["kind"]}]}},
        "required":["name","age","tags","pet"],"additionalProperties":false})");
    EXPECT_TRUE(matches(g, R"({"name":"Ann","age":-3,"tags":["a","b"],"pet":null})"));
    EXPECT_TRUE(matches(g, R"({"name":"\u00e9\n","age":0,"tags":[],"pet":{"kind":"cat"}})"));
    EXPECT_FALSE(matches(g, R"({"name":"Ann","age":1.5,"tags":[],"pet":null})"));   // integer
    EXPECT_FALSE(matches(g, R"({"age":1,"name":"Ann","tags":[],"pet":null})"));     // order
    EXPECT_FALSE(matches(g, R"({"name":"Ann","age":01,"tags":[],"pet":null})"));    // leading zero
    EXPECT_FALSE(matches(g, R"({"name":"Ann","age":1,"tags":["c"],"pet":null})"));  // enum
    EXPECT_FALSE(matches(g, "{\"name\":\"a\x01\",\"age\":1,\"tags\":[],\"pet\":null}"));  // control byte
    EXPECT_FALSE(matches(g, "{\"name\":\"\xC3\",\"age\":1,\"tags\":[],\"pet\":null}"));    // cut UTF-8
    EXPECT_FALSE(matches(g, R"({"name":"Ann","age":1,"tags":[],"pet":null)"));      // incomplete
    Grammar num = compile(R"({"type":"number"})");
    for (const char *ok : {"0", "-0", "1.25", "1e5", "-2.5E-3", "10"}) EXPECT_TRUE(matches(num, ok)) << ok;
    for (const char *bad : {"-", "1.", ".5", "1e", "+1", "01"}) EXPECT_FALSE(matches(num, bad)) << bad;
    Grammar capped = compile(R"({"type":"string","maxLength":3})");
    EXPECT_TRUE(matches(capped, "\"abc\""));
    EXPECT_FALSE(matches(capped, "\"abcd\""));
    EXPECT_FALSE(matches(capped, "\"ab\xC3\xA9\""));  // 4 bytes: over the byte cap
    Grammar two = compile(R"({"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":3})");
    EXPECT_FALSE(matches(two, "[true]"));  // found by ajv in grammar_ajv
    EXPECT_TRUE(matches(two, "[true,false]"));
    EXPECT_FALSE(matches(two, "[true,false,true,true]"));
}

TEST(Grammar, RefusesWhatItCannotEnforce) {
    Grammar g;
    std::string err;
    EXPECT_FALSE(compile_json_schema(R"({"type":"string","pattern":"^a"})", {}, &g, &err));
    EXPECT_NE(err.find("/pattern"), std::string::npos) << err;
    EXPECT_FALSE(compile_json_schema(R"({"type":"object","properties":{"a":{"type":"integer","minimum":3}}})", {}, &g,
                                     &err));
    EXPECT_NE(err.find("/properties/a/minimum"), std::string::npos) << err;
    EXPECT_FALSE(compile_json_schema(R"({"type":"object","properties":{},"required":["x"]})", {}, &g, &err));
    EXPECT_NE(err.find("/required"), std::string::npos) << err;
    EXPECT_FALSE(compile_json_schema(R"({"$ref":"#/$defs/a"})", {}, &g, &err));
    EXPECT_FALSE(compile_json_schema("{", {}, &g, &err));
    EXPECT_NE(err.find("not valid JSON"), std::string::npos);
    EXPECT_FALSE(compile_json_schema(R"({"type":"color"})", {}, &g, &err));
}

// The mask (sorted walk with prefix skipping, and the string fast path)
// must equal stepping every token on its own, in every state a generation
// passes through.
TEST(Grammar, MaskEqualsBruteForce) {
    const auto vocab = test_vocab(3000, 7);
    TokenTable table(vocab, std::vector<bool>(vocab.size(), true));
    const char *schemas[] = {
        R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"n":{"type":"number"},
            "xs":{"type":"array","items":{"type":"integer"},"maxItems":4}},"required":["name","n","xs"]})",
        R"({"anyOf":[{"type":"string","maxLength":5},{"type":"array","items":{"type":"boolean"},"maxItems":3},
            {"enum":["red",1,null]}]})",
        ""};
    std::mt19937_64 rng(11);
    size_t states = 0, disagreements = 0;
    for (const char *s : schemas) {
        Limits lim;
        lim.max_string_bytes = 10;
        lim.max_items = 3;
        lim.max_any_depth = 3;
        auto g = std::make_shared<Grammar>(*s ? compile(s, lim) : any_json_object(lim));
        for (int run = 0; run < 8; run++) {
            Matcher m(g.get());
            for (int step = 0; step < 200 && !m.finished(); step++) {
                std::vector<uint8_t> fast;
                table.mask(m, &fast);
                std::vector<int32_t> ok;
                for (size_t id = 0; id < vocab.size(); id++) {
                    Matcher c = m;
                    bool brute = c.step_bytes(vocab[id]);
                    if (brute != (fast[id] != 0)) disagreements++;
                    if (brute) ok.push_back((int32_t)id);
                }
                states++;
                if (ok.empty()) break;
                ASSERT_TRUE(m.step_bytes(vocab[(size_t)ok[rng() % ok.size()]]));
            }
        }
    }
    std::printf("mask vs brute force: %zu states x %zu tokens, %zu disagreements\n", states, vocab.size(),
                disagreements);
    EXPECT_GT(states, 100u);
    EXPECT_EQ(disagreements, 0u);
}

// Random logits, constrained: every output is complete JSON that parses,
// and ends with the end token.
TEST(Grammar, RandomLogitGenerationsParse) {
    auto vocab = test_vocab(2000, 3);
    vocab.push_back("<end>");  // a control token: only ever allowed as the end
    std::vector<bool> usable(vocab.size(), true);
    usable.back() = false;
    auto table = std::make_shared<TokenTable>(vocab, usable);
    const int32_t kEnd = (int32_t)vocab.size() - 1;
    int outputs = 0;
    for (const char *s : {R"({"type":"object","properties":{"a":{"type":"string","maxLength":8},
                            "b":{"type":"array","items":{"type":"number"},"maxItems":3}},"required":["a","b"]})",
                          R"({"type":"array","items":{"anyOf":[{"type":"integer"},{"type":"null"}]},"maxItems":5})",
                          ""}) {
        Limits lim;
        lim.max_string_bytes = 8;
        lim.max_items = 3;
        lim.max_any_depth = 3;
        auto g = std::make_shared<Grammar>(*s ? compile(s, lim) : any_json_object(lim));
        for (uint64_t seed = 1; seed <= 30; seed++) {
            sluice::sample::Sampler smp(unfiltered(seed));
            auto c = std::make_shared<GrammarConstraint>(g, table, std::vector<int32_t>{kEnd});
            smp.set_constraint(c);
            std::mt19937_64 rng(seed * 977);
            std::normal_distribution<float> nd(0.0f, 3.0f);
            std::vector<float> logits(vocab.size());
            std::string out;
            bool ended = false;
            for (int i = 0; i < 2000; i++) {
                for (float &x : logits) x = nd(rng);
                int32_t id = smp.sample(logits, {});
                ASSERT_GE(id, 0);
                if (id == kEnd) {
                    ended = true;
                    break;
                }
                out += vocab[(size_t)id];
            }
            EXPECT_TRUE(ended) << out;
            EXPECT_TRUE(nlohmann::json::accept(out)) << out;
            outputs++;
        }
    }
    EXPECT_EQ(outputs, 90);
}

// Finish-now: with a draw limit (the tokens a generation has left), every
// output ends, end token included, within the limit and parses, for random
// logits, from the tightest limit (the shortest valid output) up.
TEST(Grammar, FinishNowEndsWithinTheLimit) {
    auto vocab = test_vocab(2000, 5);
    vocab.push_back("<end>");
    std::vector<bool> usable(vocab.size(), true);
    usable.back() = false;
    auto table = std::make_shared<TokenTable>(vocab, usable);
    ASSERT_TRUE(table->has_all_bytes());
    const int32_t kEnd = (int32_t)vocab.size() - 1;
    int outputs = 0, tight = 0;
    for (const char *s : {R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
                            "tags":{"type":"array","items":{"type":"string"},"minItems":2},
                            "pet":{"anyOf":[{"type":"null"},{"type":"object","properties":{"kind":{"enum":["cat","dog"]}},
                            "required":["kind"]}]}},"required":["name","age","tags","pet"]})",
                          R"({"type":"array","items":{"type":"number"},"minItems":3})", ""}) {
        auto g = std::make_shared<Grammar>(*s ? compile(s) : any_json_object(Limits{}));
        const int32_t shortest = GrammarConstraint(g, table, {kEnd}).draws_to_finish();
        ASSERT_GT(shortest, 1);
        for (int32_t slack : {0, 1, 3, 10, 60}) {
            const int32_t limit = shortest + slack;
            for (uint64_t seed = 1; seed <= 12; seed++) {
                sluice::sample::Sampler smp(unfiltered(seed));
                auto c = std::make_shared<GrammarConstraint>(g, table, std::vector<int32_t>{kEnd});
                smp.set_constraint(c);
                std::mt19937_64 rng(seed * 131 + (uint64_t)slack);
                std::normal_distribution<float> nd(0.0f, 3.0f);
                std::vector<float> logits(vocab.size());
                std::string out;
                int32_t draws = 0;
                bool ended = false;
                while (draws < limit) {
                    c->set_draw_limit(limit - draws);
                    for (float &x : logits) x = nd(rng);
                    const int32_t id = smp.sample(logits, {});
                    ASSERT_GE(id, 0);
                    draws++;
                    if (id == kEnd) {
                        ended = true;
                        break;
                    }
                    out += vocab[(size_t)id];
                }
                EXPECT_TRUE(ended) << "limit " << limit << ": " << out;
                EXPECT_TRUE(nlohmann::json::accept(out)) << "limit " << limit << ": " << out;
                outputs++;
                tight += draws == limit;
            }
        }
    }
    std::printf("finish-now: %d outputs, %d used every draw of their limit\n", outputs, tight);
    EXPECT_EQ(outputs, 3 * 5 * 12);
    EXPECT_GT(tight, 0);
}

// The shortest completion the matcher reports is one that exists: writing
// its bytes greedily (any byte that lowers it by one) reaches a complete
// value in exactly that many bytes, from states along random outputs.
TEST(Grammar, MinBytesToAcceptIsExact) {
    Grammar g = compile(R"({"type":"object","properties":{"s":{"type":"string","maxLength":4},
        "n":{"type":"number"},"xs":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":4},
        "e":{"enum":["long-value",false]}},"required":["s","n","xs","e"]})");
    std::mt19937_64 rng(5);
    int checked = 0;
    for (int run = 0; run < 40; run++) {
        Matcher m(&g);
        for (int step = 0; step < 80 && !m.finished(); step++) {
            Matcher walk = m;
            uint32_t left = walk.min_bytes_to_accept();
            const uint32_t start = left;
            while (left > 0) {
                bool moved = false;
                for (int b = 0; b < 256 && !moved; b++) {
                    Matcher t = walk;
                    if (t.step((uint8_t)b) && t.min_bytes_to_accept() == left - 1) walk = t, moved = true;
                }
                ASSERT_TRUE(moved) << "stuck with " << left << " bytes to go";
                left--;
            }
            EXPECT_TRUE(walk.accepting());
            checked += start > 0;
            std::vector<int> ok;
            for (int b = 0; b < 256; b++) {
                Matcher t = m;
                if (t.step((uint8_t)b)) ok.push_back(b);
            }
            if (ok.empty()) break;
            m.step((uint8_t)ok[rng() % ok.size()]);
        }
    }
    EXPECT_GT(checked, 500);
}
