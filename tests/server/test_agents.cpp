// The generation loop for agents, on the fake model: K3's XTML path (the
// prompt's marker ids, the reply parsed into reasoning, content and tool
// calls, streamed deltas, reasoning tokens, stop strings on content only),
// chat.json refusals, the sampling knobs, /tokenize and /detokenize.
#include <gtest/gtest.h>

#include "fake_model.h"
#include "server/generate.h"
#include "server/request.h"

using namespace sluice::server;

namespace {

const auto kNoDeadline = std::chrono::steady_clock::time_point::max();

struct Collect : GenObserver {
    std::string text, reasoning;
    std::vector<CallStart> calls;
    int deltas = 0;
    void on_prompt(PromptInfo) override {}
    void on_delta(Delta d) override {
        deltas++;
        text += d.text;
        reasoning += d.reasoning;
        for (auto &c : d.calls) calls.push_back(c);
    }
    bool cancelled() override { return false; }
};

GenRequest parse(Endpoint k, const std::string &body) {
    GenRequest r;
    ApiError e;
    EXPECT_TRUE(parse_request(k, body, &r, &e)) << body << ": " << e.message;
    return r;
}

std::vector<int32_t> ids_of(fake::FakeModel &m, const std::string &markup) {
    std::vector<int32_t> ids;
    std::string e;
    m.tokenize_markup(markup, &ids, &e);
    return ids;
}

}  // namespace

TEST(Agents, K3PromptCarriesMarkerIdsAndContentNever) {
    fake::FakeModel m;
    m.xtml = true;
    m.set_script_ids(ids_of(m, "ok<|close|>response<|sep|><|end_of_msg|>"));
    GenRequest r = parse(Endpoint::chat, R"({"messages":[{"role":"user","content":"<|open|>x"}],"reasoning_effort":"none","temperature":0})");
    Collect c;
    GenResult res;
    ApiError err;
    ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err)) << err.message;
    auto p = m.last_prompt();
    // <|open|>message role="user"<|sep|> then the content as bytes.
    ASSERT_GE(p.size(), 3u);
    EXPECT_EQ(p[0], fake::kOpen);
    int opens = 0;
    for (int32_t id : p) opens += id == fake::kOpen;
    EXPECT_EQ(opens, 3);  // user message, assistant message, response channel: not the one in the content
    EXPECT_EQ(p.back(), fake::kSep);
    EXPECT_EQ(res.message.value("content", ""), "ok")
        << res.message.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    EXPECT_EQ(res.finish_reason, "stop");
    EXPECT_EQ(res.reasoning_tokens, 0);
}

TEST(Agents, K3ReasoningContentAndToolCallsStreamed) {
    fake::FakeModel m;
    m.xtml = true;
    m.set_script_ids(ids_of(m,
                            "Think.<|close|>think<|sep|><|open|>response<|sep|>Hi<|close|>response<|sep|>"
                            "<|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|>"
                            "<|open|>argument key=\"a\" type=\"number\"<|sep|>1<|close|>argument<|sep|>"
                            "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>"));
    GenRequest r = parse(Endpoint::chat, R"({"messages":[{"role":"user","content":"go"}],"stream":true,"temperature":0,
        "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]})");
    Collect c;
    GenResult res;
    ApiError err;
    ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err)) << err.message;
    EXPECT_EQ(c.reasoning, "Think.");
    EXPECT_EQ(c.text, "Hi") << res.message.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    ASSERT_EQ(c.calls.size(), 1u);
    EXPECT_EQ(c.calls[0].name, "f");
    EXPECT_EQ(c.calls[0].id, "call_1");
    EXPECT_EQ(res.finish_reason, "tool_calls");
    EXPECT_EQ(res.message["tool_calls"][0]["function"]["arguments"], "{\"a\": 1}");
    EXPECT_EQ(res.message["reasoning_content"], "Think.");
    EXPECT_EQ(res.reasoning_tokens, 6)  // "Think." (the <|close|> that ends it is not reasoning)
        << res.message.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    EXPECT_GT(res.completion_tokens, res.reasoning_tokens);
    EXPECT_GT(c.deltas, 3);
}

TEST(Agents, K3StopStringsCutContentNotReasoning) {
    fake::FakeModel m;
    m.xtml = true;
    m.set_script_ids(ids_of(m, "a STOP b<|close|>think<|sep|><|open|>response<|sep|>x STOP y<|end_of_msg|>"));
    GenRequest r = parse(Endpoint::chat, R"({"messages":[{"role":"user","content":"go"}],"stop":"STOP","temperature":0})");
    Collect c;
    GenResult res;
    ApiError err;
    ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err)) << err.message;
    EXPECT_EQ(res.message["reasoning_content"], "a STOP b");
    EXPECT_EQ(res.message["content"], "x ");
    EXPECT_EQ(c.text, "x ");
    EXPECT_EQ(res.finish_reason, "stop");
}

TEST(Agents, ChatJsonRefusesToolsAndThinkingByName) {
    fake::FakeModel m;  // <|im_*|> markup: a chat.json format
    ApiError err;
    GenResult res;
    Collect c;
    GenRequest r = parse(Endpoint::chat, R"({"messages":[{"role":"user","content":"go"}],
        "tools":[{"type":"function","function":{"name":"f"}}]})");
    EXPECT_FALSE(generate(m, r, kNoDeadline, c, &res, &err));
    EXPECT_EQ(err.param, "tools");
    r = parse(Endpoint::chat, R"({"messages":[{"role":"user","content":"go"}],"reasoning_effort":"high"})");
    EXPECT_FALSE(generate(m, r, kNoDeadline, c, &res, &err));
    EXPECT_EQ(err.param, "reasoning_effort");
    r = parse(Endpoint::chat, R"({"messages":[{"role":"tool","content":"r","tool_call_id":"a"}]})");
    EXPECT_FALSE(generate(m, r, kNoDeadline, c, &res, &err));
    EXPECT_EQ(err.param, "messages[0]");
    // A plain request, and reasoning_effort "none", still work.
    r = parse(Endpoint::chat, R"({"messages":[{"role":"user","content":"go"}],"reasoning_effort":"none","max_tokens":3})");
    EXPECT_TRUE(generate(m, r, kNoDeadline, c, &res, &err)) << err.message;
}

TEST(Agents, SamplingKnobsReachTheSampler) {
    fake::FakeModel m;
    GenRequest r = parse(Endpoint::chat, R"({"messages":[{"role":"user","content":"go"}],"max_tokens":2,
        "top_k":7,"min_p":0.25,"repetition_penalty":1.3,"repeat_last_n":16,"seed":99,"temperature":0.5})");
    Collect c;
    GenResult res;
    ApiError err;
    ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err)) << err.message;
    EXPECT_EQ(m.last_sampling.top_k, 7);
    EXPECT_FLOAT_EQ(m.last_sampling.min_p, 0.25f);
    EXPECT_FLOAT_EQ(m.last_sampling.repeat_penalty, 1.3f);
    EXPECT_EQ(m.last_sampling.repeat_last_n, 16);
    EXPECT_EQ(m.last_sampling.seed, 99u);
    GenRequest bad;
    for (const char *b : {R"({"messages":[{"role":"user","content":"x"}],"top_k":-1})",
                          R"({"messages":[{"role":"user","content":"x"}],"min_p":2})",
                          R"({"messages":[{"role":"user","content":"x"}],"repetition_penalty":0})"}) {
        EXPECT_FALSE(parse_request(Endpoint::chat, b, &bad, &err)) << b;
        EXPECT_EQ(err.status, 400);
    }
}

TEST(Agents, ResponseFormatAsksForAConstrainedSampler) {
    fake::FakeModel m;
    GenRequest r = parse(Endpoint::chat, R"({"messages":[{"role":"user","content":"go"}],"max_tokens":12,
        "response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object",
        "properties":{"a":{"type":"integer"}},"required":["a"]}}}})");
    Collect c;
    GenResult res;
    ApiError err;
    ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err)) << err.message;
    // 12 tokens hold {"a":N} and the stop token: the answer is complete.
    EXPECT_TRUE(nlohmann::json::parse(c.text).contains("a")) << c.text;
    EXPECT_EQ(res.finish_reason, "stop");
    EXPECT_TRUE(m.last_constrained.constrained);
    EXPECT_EQ(nlohmann::json::parse(m.last_constrained.json_schema)["required"][0], "a");
    EXPECT_EQ(m.last_constrained.end_tokens.size(), 2u);  // the chat stop token and EOS
    GenRequest bad;
    EXPECT_FALSE(parse_request(Endpoint::chat, R"({"messages":[{"role":"user","content":"x"}],
        "response_format":{"type":"json_schema","json_schema":{"schema":{"type":"string","format":"email"}}}})",
                               &bad, &err));
    EXPECT_EQ(err.param, "response_format.json_schema.schema");
    EXPECT_NE(err.message.find("/format"), std::string::npos) << err.message;
}

TEST(Agents, TokenizeAndDetokenize) {
    fake::FakeModel m;
    GenRequest r = parse(Endpoint::tokenize, R"({"content":"hi<|im_end|>","with_pieces":true})");
    Collect c;
    GenResult res;
    ApiError err;
    ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err)) << err.message;
    EXPECT_EQ(res.tokens.size(), 2u + 10u);  // content mode: the marker stays bytes
    r = parse(Endpoint::tokenize, R"({"content":"hi<|im_end|>","parse_special":true})");
    res = GenResult{};
    ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err));
    EXPECT_EQ(res.tokens, (std::vector<int32_t>{'h', 'i', fake::kImEnd}));
    r = parse(Endpoint::detokenize, R"({"tokens":[104,105]})");
    res = GenResult{};
    ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err));
    EXPECT_EQ(res.text, "hi");
    r = parse(Endpoint::detokenize, R"({"tokens":[1000000]})");
    EXPECT_FALSE(generate(m, r, kNoDeadline, c, &res, &err));
    EXPECT_EQ(err.param, "tokens");
}

TEST(Agents, SeveralChoices) {
    fake::FakeModel m("abcdefgh");
    GenRequest r = parse(Endpoint::completion, R"({"prompt":"x","max_tokens":3,"n":3,"temperature":1,"seed":5})");
    Collect c;
    GenResult res;
    ApiError err;
    ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err)) << err.message;
    ASSERT_EQ(res.choices.size(), 3u);
    EXPECT_EQ(res.completion_tokens, 9);
    EXPECT_EQ(res.prompt_tokens, res.choices[0].prompt_tokens);  // the prompt counts once
    GenRequest bad;
    EXPECT_FALSE(parse_request(Endpoint::chat, R"({"messages":[{"role":"user","content":"x"}],"n":2,"stream":true})",
                               &bad, &err));
    EXPECT_EQ(err.param, "n");
}
