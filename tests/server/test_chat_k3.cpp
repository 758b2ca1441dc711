// Every case of ../shared/fixtures/chat_k3 (K3's conversation markup, the
// request mapping and the reply parser, as warp's server and K3's release
// encoder produce them; CHAT_K3.md §12, §14): renderings compared segment by
// segment (text and markup flag), requests to the same segments or the same
// error, replies (whole, one byte at a time and at every two-way split) to
// the same message. SKIP when ../shared is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "server/chat_request.h"
#include "server/pyjson.h"
#include "server/xtml_reply.h"
#include "tokenizer/chat.h"

using namespace sluice::server;
using nlohmann::ordered_json;

namespace {

std::string fixture(const std::string &name) { return std::string(SLUICE_FIXTURES_DIR) + "/chat_k3/" + name; }

bool load(const std::string &name, ordered_json *out) {
    std::ifstream f(fixture(name));
    if (!f) return false;
    std::stringstream ss;
    ss << f.rdbuf();
    *out = ordered_json::parse(ss.str());
    return true;
}

#define LOAD_OR_SKIP(name, var)                                                                       \
    ordered_json var;                                                                                 \
    if (!load(name, &var)) GTEST_SKIP() << "fixture " << fixture(name) << " is missing (../shared absent)"

std::vector<XSegment> segs_of(const ordered_json &a) {
    std::vector<XSegment> v;
    for (const auto &s : a) v.push_back({s[0].get<std::string>(), s[1].get<bool>()});
    return v;
}

std::string show(const std::vector<XSegment> &v) {
    std::string s;
    for (const auto &x : v) s.append(x.markup ? "M" : "T").append(py_quote(x.text)).append(" ");
    return s;
}

// First differing segment, for a readable failure.
std::string first_diff(const std::vector<XSegment> &a, const std::vector<XSegment> &b) {
    for (size_t i = 0; i < std::max(a.size(), b.size()); i++) {
        if (i >= a.size() || i >= b.size() || !(a[i] == b[i]))
            return "segment " + std::to_string(i) + ": got " +
                   (i < a.size() ? show({a[i]}) : std::string("<none>")) + " want " +
                   (i < b.size() ? show({b[i]}) : std::string("<none>"));
    }
    return "";
}

}  // namespace

TEST(ChatK3Fixtures, RenderCases) {
    LOAD_OR_SKIP("render_cases.json", d);
    int n = 0;
    for (const auto &c : d["cases"]) {
        const ordered_json &kw = c["kwargs"];
        XtmlInput in;
        in.messages = kw["messages"];
        if (kw.contains("tools")) in.tools = kw["tools"];
        if (kw.contains("thinking")) in.thinking = kw["thinking"].get<bool>();
        if (kw.contains("add_generation_prompt")) in.add_generation_prompt = kw["add_generation_prompt"].get<bool>();
        if (kw.contains("image_prompts")) in.image_prompts = kw["image_prompts"].get<std::vector<std::string>>();
        if (kw.contains("thinking_effort")) in.thinking_effort = kw["thinking_effort"].get<std::string>();
        if (kw.contains("tool_choice")) in.tool_choice = kw["tool_choice"].get<std::string>();
        if (kw.contains("response_format")) in.response_format = kw["response_format"];
        std::vector<XSegment> got;
        std::string err;
        ASSERT_TRUE(xtml_render(in, &got, &err)) << c["name"] << ": " << err;
        const auto want = segs_of(c["segments"]);
        EXPECT_EQ(got, want) << c["name"] << ": " << first_diff(got, want);
        EXPECT_EQ(xtml_join(got), c["rendered"].get<std::string>()) << c["name"];
        n++;
    }
    for (const auto &c : d["errors"]) {
        const ordered_json &kw = c["kwargs"];
        XtmlInput in;
        in.messages = kw["messages"];
        if (kw.contains("image_prompts")) in.image_prompts = kw["image_prompts"].get<std::vector<std::string>>();
        if (kw.contains("thinking_effort")) in.thinking_effort = kw["thinking_effort"].get<std::string>();
        std::vector<XSegment> got;
        std::string err;
        EXPECT_FALSE(xtml_render(in, &got, &err)) << c["name"];
        EXPECT_EQ(err, c["error"].get<std::string>()) << c["name"];
        n++;
    }
    std::printf("render cases checked: %d (38 renderings + 6 refusals expected)\n", n);
    EXPECT_EQ(n, 44);
}

TEST(ChatK3Fixtures, RequestCases) {
    LOAD_OR_SKIP("request_cases.json", d);
    int n = 0;
    for (const auto &c : d["cases"]) {
        ChatFields f;
        ApiError err;
        std::vector<XSegment> segs;
        std::string starts;
        bool ok = parse_chat_fields(c["body"], &f, &err) &&
                  k3_render(f, c["server_default_thinking"].get<bool>(), &segs, &starts, &err);
        if (c.contains("error")) {
            ASSERT_FALSE(ok) << c["name"];
            EXPECT_EQ(err.status, c["error"]["status"].get<int>()) << c["name"];
            // The exact error JSON, as warp sends it.
            nlohmann::json want = nlohmann::json::parse(c["error"]["body"].dump());
            EXPECT_EQ(error_json(err), want) << c["name"];
        } else {
            ASSERT_TRUE(ok) << c["name"] << ": " << err.message;
            const auto want = segs_of(c["segments"]);
            EXPECT_EQ(segs, want) << c["name"] << ": " << first_diff(segs, want);
            EXPECT_EQ(starts, c["parser_starts_in"].get<std::string>()) << c["name"];
            EXPECT_EQ(starts == "think", c["thinking"].get<bool>()) << c["name"];
        }
        n++;
    }
    std::printf("request cases checked: %d (30 expected)\n", n);
    EXPECT_EQ(n, 30);
}

namespace {

void expect_message(const XtmlReply &r, const ordered_json &want, const std::string &what) {
    EXPECT_EQ(r.message().dump(), want.dump()) << what;
}

}  // namespace

// Issue 18: "arguments are valid JSON, or an error the client can see". The
// fixture's broken json block stays verbatim (warp's message, byte for
// byte), and the server marks that call, and only that call.
TEST(ChatK3Fixtures, InvalidArgumentsAreMarkedNotHidden) {
    LOAD_OR_SKIP("parse_cases.json", d);
    bool seen = false;
    for (const auto &c : d["cases"]) {
        if (c["name"] != "two_calls_json_block") continue;
        seen = true;
        XtmlReply r(c["prompt_left_open"].get<std::string>());
        r.feed_scan(c["output_text"].get<std::string>());
        r.finish();
        ordered_json m = r.message();
        EXPECT_EQ(m.dump(), c["message"].dump()) << "the parse itself stays warp's";
        EXPECT_EQ(mark_invalid_arguments(&m), 1);
        ASSERT_EQ(m["tool_calls"].size(), 2u);
        ASSERT_TRUE(m["tool_calls"][0].contains("error"));
        EXPECT_EQ(m["tool_calls"][0]["error"]["type"], "invalid_arguments");
        const std::string msg = m["tool_calls"][0]["error"]["message"].get<std::string>();
        EXPECT_NE(msg.find("tool call 0 (search)"), std::string::npos) << msg;
        EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], c["message"]["tool_calls"][0]["function"]["arguments"]);
        EXPECT_FALSE(m["tool_calls"][1].contains("error")) << "call 2's arguments parse";
    }
    ASSERT_TRUE(seen) << "parse_cases.json lost its two_calls_json_block case";
    // Valid arguments, typed or raw, are never marked.
    ordered_json ok = {{"role", "assistant"},
                       {"tool_calls", {{{"id", "c"}, {"type", "function"},
                                        {"function", {{"name", "f"}, {"arguments", "{\"a\": [1, 2]}"}}}}}}};
    EXPECT_EQ(mark_invalid_arguments(&ok), 0);
    EXPECT_FALSE(ok["tool_calls"][0].contains("error"));
}

TEST(ChatK3Fixtures, ParseCases) {
    LOAD_OR_SKIP("parse_cases.json", d);
    int n = 0;
    for (const auto &c : d["cases"]) {
        const std::string name = c["name"].get<std::string>();
        const std::string start = c["prompt_left_open"].get<std::string>();
        if (c.contains("output_tokens")) {
            // Token path: only K3's four marker ids are structure.
            XtmlReply r(start);
            for (const auto &t : c["output_tokens"]) {
                int id = t[0].get<int>();
                if (id == 163587) r.feed_marker(XMarker::open);
                else if (id == 163588) r.feed_marker(XMarker::close);
                else if (id == 163589) r.feed_marker(XMarker::sep);
                else if (id == 163586) r.feed_marker(XMarker::end_of_msg);
                else r.feed_text(t[1].get<std::string>());
            }
            r.finish();
            expect_message(r, c["message"], name);
            EXPECT_EQ(r.finished(), c["finished_by_end_of_msg"].get<bool>()) << name;
            n++;
            continue;
        }
        const std::string text = c["output_text"].get<std::string>();
        // Whole, byte at a time, and every two-way split: the same message.
        {
            XtmlReply r(start);
            r.feed_scan(text);
            r.finish();
            expect_message(r, c["message"], name + " (whole)");
            EXPECT_EQ(r.finished(), c["finished_by_end_of_msg"].get<bool>()) << name;
        }
        {
            XtmlReply r(start);
            for (char ch : text) r.feed_scan(std::string_view(&ch, 1));
            r.finish();
            expect_message(r, c["message"], name + " (bytewise)");
        }
        for (size_t cut = 1; cut < text.size(); cut++) {
            XtmlReply r(start);
            r.feed_scan(std::string_view(text).substr(0, cut));
            r.feed_scan(std::string_view(text).substr(cut));
            r.finish();
            if (r.message().dump() != c["message"].dump()) {
                ADD_FAILURE() << name << " split at " << cut << ": " << r.message().dump();
                break;
            }
        }
        n++;
    }
    std::printf("parse cases checked: %d (15 expected)\n", n);
    EXPECT_EQ(n, 15);
}

// A reply's tool call finishes "tool_calls"; the message round-trips
// through the renderer (CHAT_K3.md §14 "Round trip").
TEST(ChatK3Fixtures, RenderParseRoundTrip) {
    ordered_json msg = {{"role", "assistant"},
                        {"reasoning_content", "Need data."},
                        {"content", "Checking."},
                        {"tool_calls",
                         ordered_json::array({{{"id", "call_1"},
                                               {"type", "function"},
                                               {"function",
                                                {{"name", "get_weather"},
                                                 {"arguments", R"({"city": "Paris", "days": 3, "ok": true})"}}}},
                                              {{"id", "call_2"},
                                               {"type", "function"},
                                               {"function", {{"name", "raw"}, {"arguments", "{broken"}}}}})}};
    XtmlInput in;
    in.messages = ordered_json::array({msg});
    in.add_generation_prompt = false;
    std::vector<XSegment> segs;
    std::string err;
    ASSERT_TRUE(xtml_render(in, &segs, &err)) << err;
    std::string text = xtml_join(segs);
    const std::string opener = "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>";
    ASSERT_EQ(text.rfind(opener, 0), 0u);
    XtmlReply r("think");
    r.feed_scan(text.substr(opener.size()));
    r.finish();
    ordered_json got = r.message();
    EXPECT_EQ(got["content"], "Checking.");
    EXPECT_EQ(got["reasoning_content"], "Need data.");
    ASSERT_EQ(got["tool_calls"].size(), 2u);
    EXPECT_EQ(got["tool_calls"][0]["function"]["arguments"], R"({"city": "Paris", "days": 3, "ok": true})");
    EXPECT_EQ(got["tool_calls"][1]["function"]["arguments"], "{broken");
    EXPECT_TRUE(r.finished());
}

TEST(ChatK3Fixtures, ChatJsonCases) {
    LOAD_OR_SKIP("chatfmt_cases.json", d);
    // Rendering: the chat.json path of the tokenizer library.
    auto fmt = sluice::tok::parse_chat_json(d["chat_json"].dump());
    ASSERT_TRUE(fmt.ok()) << fmt.error();
    ChatFields f;
    ApiError err;
    ASSERT_TRUE(parse_chat_fields(ordered_json{{"messages", d["render"]["messages"]}}, &f, &err)) << err.message;
    ASSERT_TRUE(chatjson_check(f, &err)) << err.message;
    std::vector<sluice::tok::Message> msgs;
    for (const auto &m : f.messages) {
        std::string content;
        if (m["content"].is_string()) content = m["content"].get<std::string>();
        else
            for (const auto &p : m["content"]) content += p["text"].get<std::string>();
        std::string role = m["role"].get<std::string>();
        msgs.push_back({role == "system" ? sluice::tok::Role::system
                        : role == "user" ? sluice::tok::Role::user
                                         : sluice::tok::Role::assistant,
                        content});
    }
    auto segs = sluice::tok::chat_segments(fmt.value(), msgs, true);
    std::string joined;
    std::vector<XSegment> markup_got, markup_want;
    for (const auto &s : segs) {
        joined += s.text;
        if (s.markup) markup_got.push_back({s.text, true});
    }
    for (const auto &s : segs_of(d["render"]["segments"]))
        if (s.markup) markup_want.push_back(s);
    EXPECT_EQ(joined, d["render"]["rendered"].get<std::string>());
    // Markup segments match one for one; the C API's message carries one
    // content string, so two text parts are one plain segment here (warp:
    // two). Plain text never becomes control ids either way.
    EXPECT_EQ(markup_got, markup_want) << first_diff(markup_got, markup_want);

    // Refusals: the fields this format cannot express, with warp's message.
    int refusals = 0;
    const ordered_json user = ordered_json::array({{{"role", "user"}, {"content", "Hi"}}});
    for (const auto &e : d["errors"]) {
        ordered_json body = {{"messages", user}};
        std::string field = e.value("request_field", "");
        std::string kase = e.value("case", "");
        if (field == "tools") body["tools"] = ordered_json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
        else if (field == "thinking") body["reasoning_effort"] = "high";
        else if (field == "tool_choice") body["tool_choice"] = "auto";
        else if (field == "response_format") {
            // sluice diverges on purpose: it enforces response_format by
            // constrained decoding instead of refusing it (issue 18).
            body["response_format"] = {{"type", "json_object"}};
            ChatFields g;
            ASSERT_TRUE(parse_chat_fields(body, &g, &err));
            EXPECT_TRUE(chatjson_check(g, &err)) << "response_format is enforced, not refused";
            refusals++;
            continue;
        } else if (kase == "tool_turn")
            body["messages"] = ordered_json::array({{{"role", "tool"}, {"content", "r"}, {"tool_call_id", "a"}}});
        else if (kase == "image_part")
            body["messages"] = ordered_json::array(
                {{{"role", "user"}, {"content", ordered_json::array({{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}})}}});
        ChatFields g;
        ASSERT_TRUE(parse_chat_fields(body, &g, &err)) << err.message;
        ASSERT_FALSE(chatjson_check(g, &err)) << field << kase;
        EXPECT_EQ(err.message, e["message"].get<std::string>());
        EXPECT_EQ(err.param, e["param"].get<std::string>());
        refusals++;
    }
    EXPECT_EQ(refusals, 6);
}

TEST(PyJson, FloatReprMatchesPython) {
    // Python: repr(x) for these values.
    EXPECT_EQ(py_float_repr(1.5), "1.5");
    EXPECT_EQ(py_float_repr(1e20), "1e+20");
    EXPECT_EQ(py_float_repr(1e16), "1e+16");
    EXPECT_EQ(py_float_repr(1e15), "1000000000000000.0");
    EXPECT_EQ(py_float_repr(0.0001), "0.0001");
    EXPECT_EQ(py_float_repr(0.00001), "1e-05");
    EXPECT_EQ(py_float_repr(0.1), "0.1");
    EXPECT_EQ(py_float_repr(-2.0), "-2.0");
    EXPECT_EQ(py_float_repr(123456.789), "123456.789");
    EXPECT_EQ(py_dumps(ordered_json::parse(R"({"b":[1,"é",null],"a":{"k":1.0}})"), false),
              R"({"b": [1, "é", null], "a": {"k": 1.0}})");
    EXPECT_EQ(py_dumps(py_sort_keys(ordered_json::parse(R"({"b":1,"a":{"d":2,"c":3}})")), true),
              R"({"a":{"c":3,"d":2},"b":1})");
}
