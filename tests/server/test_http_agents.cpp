// The agents' routes over HTTP on the fake model: /metrics (Prometheus
// text), /tokenize and /detokenize, the chat page at /, --alias, n > 1, a
// K3-like model's streamed reasoning and tool calls, and the test-only
// forced output. Loopback only.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "server_fixture.h"

using namespace sluice::server;
using nlohmann::json;

namespace {

class HttpAgents : public tests::ServerFixture {
protected:
    json post(const std::string &path, const std::string &body, int want = 200) {
        auto r = client().Post(path.c_str(), body, "application/json");
        EXPECT_TRUE(r);
        if (!r) return json();
        EXPECT_EQ(r->status, want) << r->body;
        return json::parse(r->body);
    }
};

}  // namespace

TEST_F(HttpAgents, MetricsAreLoggedPrometheusText) {
    start();
    post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":4})");
    post("/v1/chat/completions", R"({"messages":[{"role":"robot","content":"hi"}]})", 400);
    auto r = client().Get("/metrics");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_NE(r->get_header_value("Content-Type").find("text/plain"), std::string::npos);
    const std::string &m = r->body;
    EXPECT_NE(m.find("# TYPE sluice_requests_total counter"), std::string::npos) << m;
    EXPECT_NE(m.find("sluice_requests_total{endpoint=\"chat\",status=\"200\"} 1"), std::string::npos) << m;
    EXPECT_NE(m.find("sluice_requests_total{endpoint=\"chat\",status=\"400\"} 1"), std::string::npos) << m;
    EXPECT_NE(m.find("sluice_completion_tokens_total 4"), std::string::npos) << m;
    EXPECT_NE(m.find("sluice_queue_waiting 0"), std::string::npos) << m;
    // Every sample line is "name{labels} value" or "name value".
    std::istringstream in(m);
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        EXPECT_NE(line.rfind(' '), std::string::npos) << line;
        EXPECT_EQ(line.rfind("sluice_", 0), 0u) << line;
    }
}

TEST_F(HttpAgents, TokenizeDetokenizeAliasesAndPage) {
    ServerOptions o;
    o.aliases = {"other-name"};
    start(o);
    json t = post("/tokenize", R"({"content":"ab"})");
    EXPECT_EQ(t["tokens"], json::array({97, 98}));
    json d = post("/detokenize", R"({"tokens":[104,105]})");
    EXPECT_EQ(d["content"], "hi");
    post("/tokenize", R"({"content":5})", 400);
    post("/v1/chat/completions", R"({"model":"other-name","messages":[{"role":"user","content":"hi"}],"max_tokens":2})");
    auto models = client().Get("/v1/models");
    ASSERT_TRUE(models);
    EXPECT_EQ(json::parse(models->body)["data"].size(), 2u);
    auto page = client().Get("/");
    ASSERT_TRUE(page);
    EXPECT_EQ(page->status, 200);
    EXPECT_NE(page->body.find("<title>sluice chat</title>"), std::string::npos);
    // Self-contained: nothing fetched from elsewhere.
    EXPECT_EQ(page->body.find("http://"), std::string::npos);
    EXPECT_EQ(page->body.find("https://"), std::string::npos);
    EXPECT_EQ(page->body.find("src="), std::string::npos);
}

TEST_F(HttpAgents, SeveralChoices) {
    start();
    json r = post("/v1/chat/completions",
                  R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"n":3,"temperature":1,"seed":1})");
    ASSERT_EQ(r["choices"].size(), 3u);
    for (int i = 0; i < 3; i++) EXPECT_EQ(r["choices"][i]["index"], i);
    EXPECT_EQ(r["usage"]["completion_tokens"], 9);
}

TEST_F(HttpAgents, K3StreamWithForcedToolCall) {
    model_.xtml = true;
    ServerOptions o;
    o.forced_outputs = {"Plan.<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>"
                        "<|open|>call tool=\"f\" index=\"1\"<|sep|><|open|>argument key=\"x\" type=\"string\"<|sep|>"
                        "y<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|end_of_msg|>"};
    start(o);
    auto r = client().Post("/v1/chat/completions",
                           R"({"messages":[{"role":"user","content":"go"}],"stream":true,
                               "tools":[{"type":"function","function":{"name":"f"}}]})",
                           "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    std::string reasoning, args, name, finish;
    std::istringstream in(r->body);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("data: {", 0) != 0) continue;
        json j = json::parse(line.substr(6));
        if (j["choices"].empty()) continue;
        const json &c = j["choices"][0];
        const json &dl = c["delta"];
        if (dl.contains("reasoning_content")) reasoning += dl["reasoning_content"].get<std::string>();
        if (dl.contains("tool_calls"))
            for (const json &tc : dl["tool_calls"]) {
                if (tc["function"].contains("name")) name = tc["function"]["name"];
                args += tc["function"]["arguments"].get<std::string>();
            }
        if (c["finish_reason"].is_string()) finish = c["finish_reason"];
    }
    EXPECT_EQ(reasoning, "Plan.");
    EXPECT_EQ(name, "f");
    EXPECT_EQ(args, "{\"x\": \"y\"}");
    EXPECT_EQ(finish, "tool_calls");
    EXPECT_NE(r->body.find("\"reasoning_tokens\""), std::string::npos);
}
