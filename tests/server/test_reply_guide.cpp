// The reply guide (src/server/reply_guide.h) on the fake model: the
// thinking budget (reasoning tokens never past it, the think channel's end
// forced), structured answers under thinking that always parse within
// max_tokens (response_format, forced tool calls), and the 400s for what
// cannot be honoured.
#include <gtest/gtest.h>

#include "fake_model.h"
#include "server/generate.h"
#include "server/request.h"

using namespace sluice::server;
using nlohmann::json;

namespace {

const auto kNoDeadline = std::chrono::steady_clock::time_point::max();

struct Collect : GenObserver {
    std::string text, reasoning;
    std::vector<int32_t> ids;
    void on_prompt(PromptInfo) override {}
    void on_delta(Delta d) override {
        text += d.text;
        reasoning += d.reasoning;
        for (const auto &t : d.tokens) ids.push_back(t.id);
    }
    bool cancelled() override { return false; }
};

GenRequest parse(const json &body) {
    GenRequest r;
    ApiError e;
    EXPECT_TRUE(parse_request(Endpoint::chat, body.dump(), &r, &e)) << body.dump() << ": " << e.message;
    return r;
}

// A K3-like fake whose script never closes the think channel: the
// defect's shape (the model thinks until max_tokens).
std::unique_ptr<fake::FakeModel> endless_thinker() {
    auto m = std::make_unique<fake::FakeModel>("abcdefghijklmnopqrstuvwxyz0123456789 ", 8192);
    m->xtml = true;
    return m;
}

const json kUser = json::array({{{"role", "user"}, {"content", "go"}}});

std::string dump(const json &j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

TEST(ReplyGuide, ThinkingBudgetForcesTheEndOfThinking) {
    for (int budget : {0, 1, 5, 17}) {
        auto owner = endless_thinker();
        fake::FakeModel &m = *owner;
        GenRequest r = parse({{"messages", kUser}, {"max_tokens", 60}, {"temperature", 0}, {"logprobs", true},
                              {"thinking_budget", budget}});
        Collect c;
        GenResult res;
        ApiError err;
        ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err)) << err.message;
        EXPECT_EQ(res.reasoning_tokens, budget);
        EXPECT_EQ(c.reasoning, std::string("abcdefghijklmnopqrstuvwxyz").substr(0, (size_t)budget));
        // Right after the budget: <|close|>think<|sep|>, forced.
        ASSERT_GT(c.ids.size(), (size_t)budget + 6);
        EXPECT_EQ(c.ids[(size_t)budget], fake::kClose) << "budget " << budget;
        EXPECT_EQ(std::string(c.ids.begin() + budget + 1, c.ids.begin() + budget + 6), "think");
        EXPECT_EQ(c.ids[(size_t)budget + 6], fake::kSep);
        // The model then writes its answer outside the think channel.
        EXPECT_FALSE(c.text.empty()) << dump(res.message);
    }
}

TEST(ReplyGuide, BudgetDefaultAndAliases) {
    auto owner = endless_thinker();
    fake::FakeModel &m = *owner;
    GenRequest r = parse({{"messages", kUser}, {"max_tokens", 30}, {"temperature", 0}});
    r.default_thinking_budget = 3;  // the server's --thinking-budget
    Collect c;
    GenResult res;
    ApiError err;
    ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err)) << err.message;
    EXPECT_EQ(res.reasoning_tokens, 3);
    for (const char *k : {"reasoning_budget", "thinking_budget_tokens"}) {
        GenRequest a = parse({{"messages", kUser}, {"max_tokens", 30}, {"temperature", 0}, {k, 4}});
        Collect c2;
        GenResult r2;
        ASSERT_TRUE(generate(m, a, kNoDeadline, c2, &r2, &err)) << err.message;
        EXPECT_EQ(r2.reasoning_tokens, 4) << k;
    }
    // -1: no budget of its own (the script thinks until max_tokens).
    GenRequest u = parse({{"messages", kUser}, {"max_tokens", 30}, {"temperature", 0}, {"thinking_budget", -1}});
    Collect c3;
    GenResult r3;
    ASSERT_TRUE(generate(m, u, kNoDeadline, c3, &r3, &err)) << err.message;
    EXPECT_EQ(r3.reasoning_tokens, 30);
    GenRequest bad;
    EXPECT_FALSE(parse_request(Endpoint::chat, json{{"messages", kUser}, {"thinking_budget", -2}}.dump(), &bad, &err));
    EXPECT_EQ(err.param, "thinking_budget");
    EXPECT_FALSE(parse_request(Endpoint::chat, json{{"messages", kUser}, {"reasoning_budget", "x"}}.dump(), &bad, &err));
    EXPECT_EQ(err.param, "reasoning_budget");
}

// The defect: strict json_schema under thinking, temperature 1. Every
// output parses and has the schema's shape, within max_tokens, whatever
// max_tokens holds a valid answer (47 is the least here: 17 tokens of
// markup, {"name":"","age":0,"tags":[]} and the stop token).
TEST(ReplyGuide, JsonAnswerUnderThinkingAlwaysParses) {
    const json schema = {{"type", "object"},
                         {"properties",
                          {{"name", {{"type", "string"}, {"maxLength", 10}}},
                           {"age", {{"type", "integer"}}},
                           {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
                         {"required", {"name", "age", "tags"}},
                         {"additionalProperties", false}};
    int runs = 0;
    for (int max_tokens : {47, 60, 120, 400}) {
        for (uint64_t seed = 1; seed <= 6; seed++) {
            for (bool object : {false, true}) {
                auto owner = endless_thinker();
                fake::FakeModel &m = *owner;
                json rf = object ? json{{"type", "json_object"}}
                                 : json{{"type", "json_schema"},
                                        {"json_schema", {{"name", "p"}, {"strict", true}, {"schema", schema}}}};
                GenRequest r = parse({{"messages", kUser}, {"max_tokens", max_tokens}, {"temperature", 1},
                                      {"seed", seed}, {"response_format", rf}});
                Collect c;
                GenResult res;
                ApiError err;
                ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err)) << err.message;
                SCOPED_TRACE("max_tokens " + std::to_string(max_tokens) + " seed " + std::to_string(seed) +
                             (object ? " json_object" : " json_schema") + ": " + dump(res.message));
                EXPECT_EQ(res.finish_reason, "stop");
                EXPECT_LE(res.completion_tokens, max_tokens);
                // The server's default budget, capped so the answer keeps
                // half of max_tokens.
                EXPECT_LE(res.reasoning_tokens, max_tokens - (max_tokens + 1) / 2);
                ASSERT_TRUE(res.message["content"].is_string());
                json v = json::parse(res.message["content"].get<std::string>(), nullptr, false);
                ASSERT_FALSE(v.is_discarded());
                ASSERT_TRUE(v.is_object());
                if (!object) {
                    EXPECT_TRUE(v["name"].is_string() && v["name"].get<std::string>().size() <= 10);
                    EXPECT_TRUE(v["age"].is_number_integer());
                    EXPECT_TRUE(v["tags"].is_array());
                    EXPECT_EQ(v.size(), 3u);
                }
                runs++;
            }
        }
    }
    EXPECT_EQ(runs, 48);
}

TEST(ReplyGuide, MaxTokensTooSmallForAnyAnswerIs400) {
    auto owner = endless_thinker();
    fake::FakeModel &m = *owner;
    const json rf = {{"type", "json_schema"},
                     {"json_schema", {{"schema", {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}},
                                                  {"required", {"a"}}}}}}};
    // <|close|>think<|sep|><|open|>response<|sep|> (7 + 10 tokens on the
    // fake, whose text tokens are bytes), {"a":0} (7) and the stop token: 25.
    GenRequest r = parse({{"messages", kUser}, {"max_tokens", 24}, {"response_format", rf}});
    Collect c;
    GenResult res;
    ApiError err;
    EXPECT_FALSE(generate(m, r, kNoDeadline, c, &res, &err));
    EXPECT_EQ(err.status, 400);
    EXPECT_EQ(err.param, "max_tokens");
    EXPECT_EQ(err.code, "max_tokens_too_small");
    EXPECT_NE(err.message.find("takes 25 tokens"), std::string::npos) << err.message;
    r = parse({{"messages", kUser}, {"max_tokens", 25}, {"response_format", rf}, {"temperature", 1}});
    ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err)) << err.message;
    EXPECT_EQ(res.reasoning_tokens, 0);
    EXPECT_EQ(json::parse(res.message["content"].get<std::string>()).size(), 1u) << dump(res.message);
    // Without thinking the answer needs only its own 8 tokens.
    r = parse({{"messages", kUser}, {"max_tokens", 8}, {"response_format", rf}, {"reasoning_effort", "none"}});
    res = GenResult{};
    ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err)) << err.message;
    EXPECT_TRUE(json::parse(res.message["content"].get<std::string>()).contains("a"));
}

// tool_choice forcing a call, thinking on and off: one call, to a declared
// tool (the named one), whose arguments parse (a strict tool's: under its
// schema), within max_tokens.
TEST(ReplyGuide, ForcedToolCallsUnderThinking) {
    const json strict_params = {{"type", "object"},
                                {"properties", {{"city", {{"type", "string"}, {"maxLength", 12}}},
                                                {"days", {{"type", "integer"}}}}},
                                {"required", {"city", "days"}},
                                {"additionalProperties", false}};
    const json tools = json::array(
        {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"strict", true}, {"parameters", strict_params}}}},
         {{"type", "function"}, {"function", {{"name", "ping"}, {"parameters", {{"type", "object"}}}}}}});
    int runs = 0;
    for (const json &choice : {json("required"), json{{"type", "function"}, {"function", {{"name", "get_weather"}}}},
                               json{{"type", "function"}, {"function", {{"name", "ping"}}}}}) {
        for (int max_tokens : {130, 200, 400}) {
            for (uint64_t seed = 1; seed <= 4; seed++) {
                for (const char *effort : {"high", "none"}) {
                    auto owner = endless_thinker();
                fake::FakeModel &m = *owner;
                    GenRequest r = parse({{"messages", kUser}, {"max_tokens", max_tokens}, {"temperature", 1},
                                          {"seed", seed}, {"tools", tools}, {"tool_choice", choice},
                                          {"reasoning_effort", effort}});
                    Collect c;
                    GenResult res;
                    ApiError err;
                    ASSERT_TRUE(generate(m, r, kNoDeadline, c, &res, &err)) << err.message;
                    SCOPED_TRACE(choice.dump() + " max_tokens " + std::to_string(max_tokens) + " seed " +
                                 std::to_string(seed) + " effort " + effort + ": " + dump(res.message));
                    EXPECT_EQ(res.finish_reason, "tool_calls");
                    EXPECT_LE(res.completion_tokens, max_tokens);
                    ASSERT_TRUE(res.message["tool_calls"].is_array());
                    ASSERT_EQ(res.message["tool_calls"].size(), 1u);
                    const json &fn = res.message["tool_calls"][0]["function"];
                    const std::string name = fn["name"];
                    if (choice.is_object()) {
                        EXPECT_EQ(name, choice["function"]["name"]);
                    } else {
                        EXPECT_TRUE(name == "get_weather" || name == "ping");
                    }
                    EXPECT_FALSE(res.message["tool_calls"][0].contains("error"));
                    json args = json::parse(fn["arguments"].get<std::string>(), nullptr, false);
                    ASSERT_TRUE(args.is_object());
                    if (name == "get_weather") {
                        EXPECT_EQ(args.size(), 2u);
                        EXPECT_TRUE(args["city"].is_string() && args["city"].get<std::string>().size() <= 12);
                        EXPECT_TRUE(args["days"].is_number_integer());
                    }
                    if (std::string(effort) == "none") {
                        EXPECT_EQ(res.reasoning_tokens, 0);
                    }
                    runs++;
                }
            }
        }
    }
    EXPECT_EQ(runs, 72);
}

TEST(ReplyGuide, ForcedCallRefusals) {
    GenRequest r;
    ApiError err;
    const json tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
    EXPECT_FALSE(parse_request(Endpoint::chat, json{{"messages", kUser}, {"tool_choice", "required"}}.dump(), &r, &err));
    EXPECT_EQ(err.param, "tool_choice");
    EXPECT_FALSE(parse_request(Endpoint::chat,
                               json{{"messages", kUser}, {"tools", tools},
                                    {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}}
                                   .dump(),
                               &r, &err));
    EXPECT_EQ(err.param, "tool_choice");
    EXPECT_NE(err.message.find("'g'"), std::string::npos) << err.message;
    const json nameless = json::array({{{"type", "function"}, {"function", {{"description", "x"}}}}});
    EXPECT_FALSE(parse_request(Endpoint::chat,
                               json{{"messages", kUser}, {"tools", nameless}, {"tool_choice", "required"}}.dump(), &r,
                               &err));
    EXPECT_EQ(err.param, "tool_choice");
    EXPECT_NE(err.message.find("no entry"), std::string::npos) << err.message;
    const json odd = json::array({{{"type", "function"}, {"function", {{"name", "a\"b"}}}}});
    EXPECT_FALSE(parse_request(Endpoint::chat, json{{"messages", kUser}, {"tools", odd}, {"tool_choice", "required"}}.dump(),
                               &r, &err));
    EXPECT_EQ(err.param, "tools[0].function.name");
    // auto and none force nothing.
    EXPECT_TRUE(parse_request(Endpoint::chat, json{{"messages", kUser}, {"tools", odd}, {"tool_choice", "auto"}}.dump(),
                              &r, &err))
        << err.message;
    EXPECT_TRUE(r.forced_calls.empty());
    // A forced call too large for max_tokens.
    auto owner = endless_thinker();
    fake::FakeModel &m = *owner;
    r = parse({{"messages", kUser}, {"tools", tools}, {"tool_choice", "required"}, {"max_tokens", 10}});
    Collect c;
    GenResult res;
    EXPECT_FALSE(generate(m, r, kNoDeadline, c, &res, &err));
    EXPECT_EQ(err.code, "max_tokens_too_small");
}
