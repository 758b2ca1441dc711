// Chat request fields and their mapping onto a chat format (see chat_request.h).
#include "server/chat_request.h"

#include <algorithm>

namespace sluice::server {

using nlohmann::ordered_json;

namespace {

std::string idx(const std::string &base, size_t i) { return base + "[" + std::to_string(i) + "]"; }

bool check_messages(const ordered_json &body, ordered_json *out, ApiError *err) {
    if (!body.contains("messages"))
        return *err = bad_request("'messages' is a required property", "messages"), false;
    const ordered_json &ms = body["messages"];
    if (!ms.is_array() || ms.empty())
        return *err = bad_request("'messages' must be a non-empty array", "messages"), false;
    *out = ordered_json::array();
    for (size_t i = 0; i < ms.size(); i++) {
        ordered_json m = ms[i];
        const std::string p = idx("messages", i);
        if (!m.is_object()) return *err = bad_request(p + " must be an object", p), false;
        static const char *kRoles[] = {"assistant", "developer", "system", "tool", "user"};
        if (!m.contains("role") || !m["role"].is_string() ||
            std::none_of(std::begin(kRoles), std::end(kRoles), [&](const char *r) { return m["role"] == r; }))
            return *err = bad_request(p + ".role must be one of ['assistant', 'developer', 'system', 'tool', 'user']",
                                      p + ".role"),
                   false;
        if (m["role"] == "developer") m["role"] = "system";
        if (m.contains("content")) {
            const ordered_json &c = m["content"];
            if (!c.is_null() && !c.is_string() && !c.is_array())
                return *err = bad_request(p + ".content must be a string, an array, or null", p + ".content"), false;
            if (c.is_array()) {
                for (size_t j = 0; j < c.size(); j++) {
                    const std::string q = idx(p + ".content", j);
                    const ordered_json &part = c[j];
                    if (!part.is_object()) return *err = bad_request(q + " must be an object", q), false;
                    if (!part.contains("type") || !part["type"].is_string() || part["type"].get<std::string>().empty())
                        return *err = bad_request(q + ".type must be a non-empty string", q + ".type"), false;
                    const std::string t = part["type"].get<std::string>();
                    if (t != "image" && t != "image_url" && (!part.contains("text") || !part["text"].is_string()))
                        return *err = bad_request(q + ".text must be a string", q + ".text"), false;
                }
            }
        }
        if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
            const std::string q = p + ".tool_calls";
            if (m["role"] != "assistant")
                return *err = bad_request(q + " is only valid for assistant messages", q), false;
            const ordered_json &tc = m["tool_calls"];
            if (!tc.is_array()) return *err = bad_request(q + " must be an array", q), false;
            for (size_t j = 0; j < tc.size(); j++) {
                const std::string r = idx(q, j);
                if (!tc[j].is_object()) return *err = bad_request(r + " must be an object", r), false;
                if (tc[j].contains("function")) {
                    const ordered_json &fn = tc[j]["function"];
                    if (!fn.is_object()) return *err = bad_request(r + ".function must be an object", r + ".function"), false;
                    if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
                        return *err = bad_request(r + ".function.name must be a non-empty string", r + ".function.name"),
                               false;
                    if (fn.contains("arguments") && !fn["arguments"].is_null() && !fn["arguments"].is_object() &&
                        !fn["arguments"].is_string())
                        return *err = bad_request(r + ".function.arguments must be an object or JSON string",
                                                  r + ".function.arguments"),
                               false;
                }
            }
        }
        out->push_back(std::move(m));
    }
    return true;
}

bool has_image(const ordered_json &m) {
    if (!m.contains("content") || !m["content"].is_array()) return false;
    for (const auto &p : m["content"])
        if (p.is_object() && (p.value("type", "") == "image" || p.value("type", "") == "image_url")) return true;
    return false;
}

}  // namespace

bool parse_chat_fields(const ordered_json &body, ChatFields *f, ApiError *err) {
    *f = ChatFields{};
    if (!check_messages(body, &f->messages, err)) return false;
    // Effort: reasoning_effort, else thinking_effort, else reasoning.effort.
    const ordered_json *eff = nullptr;
    if (body.contains("reasoning_effort") && !body["reasoning_effort"].is_null()) eff = &body["reasoning_effort"];
    else if (body.contains("thinking_effort") && !body["thinking_effort"].is_null()) eff = &body["thinking_effort"];
    else if (body.contains("reasoning") && body["reasoning"].is_object() && body["reasoning"].contains("effort") &&
             !body["reasoning"]["effort"].is_null())
        eff = &body["reasoning"]["effort"];
    if (body.contains("thinking") && !body["thinking"].is_null()) {
        if (!body["thinking"].is_boolean()) return *err = bad_request("'thinking' must be a boolean", "thinking"), false;
        f->thinking_field = body["thinking"].get<bool>();
    }
    if (eff) {
        if (!eff->is_string())
            return *err = bad_request("'reasoning_effort' must be a string", "reasoning_effort"), false;
        std::string e = eff->get<std::string>();
        std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return (char)std::tolower(c); });
        f->effort = e;
        f->effort_given = true;
    }
    if (body.contains("tools") && !body["tools"].is_null()) {
        if (!body["tools"].is_array()) return *err = bad_request("'tools' must be an array", "tools"), false;
        f->tools = body["tools"];
    }
    if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
        const ordered_json &tc = body["tool_choice"];
        if (!tc.is_string() && !tc.is_object())
            return *err = bad_request("'tool_choice' must be a string or an object", "tool_choice"), false;
        f->tool_choice = tc;
    }
    if (body.contains("response_format") && !body["response_format"].is_null()) {
        if (!body["response_format"].is_object())
            return *err = bad_request("'response_format' must be an object", "response_format"), false;
        f->response_format = body["response_format"];
    }
    return true;
}

bool k3_prompt(const ChatFields &f, bool server_default_thinking, XtmlInput *in, std::string *starts_in,
               ApiError *err) {
    *in = XtmlInput{};
    bool thinking = server_default_thinking;
    if (!f.effort_given) {
        if (f.thinking_field) thinking = *f.thinking_field;
    } else {
        const std::string &e = *f.effort;
        if (e == "none" || e == "minimal" || e == "off") {
            thinking = false;
        } else if (e != "low" && e != "high" && e != "max") {
            return *err = bad_request("reasoning_effort='" + e +
                                          "' is not supported by this model. Kimi K3 accepts ['high', 'low', 'max'], "
                                          "or ['minimal', 'none', 'off'] to answer without reasoning. (K3's own "
                                          "encoder documents 'medium' and then rejects it.)",
                                      "reasoning_effort"),
                   false;
        } else if (f.thinking_field && !*f.thinking_field) {
            return *err = bad_request("'thinking' is false but 'reasoning_effort' asks for reasoning \u2014 pick one",
                                      "reasoning_effort"),
                   false;
        } else {
            thinking = true;
            in->thinking_effort = e;
        }
    }
    in->thinking = thinking;
    in->messages = f.messages;
    in->tools = f.tools;
    in->response_format = f.response_format;
    if (f.tool_choice.is_string()) {
        in->tool_choice = f.tool_choice.get<std::string>();
    } else if (f.tool_choice.is_object()) {
        // warp's named choice: a plain system message, then "required".
        const ordered_json &tc = f.tool_choice;
        if (tc.contains("function") && tc["function"].is_object() && tc["function"].contains("name") &&
            tc["function"]["name"].is_string() && !tc["function"]["name"].get<std::string>().empty())
            in->messages.push_back(ordered_json{
                {"role", "system"},
                {"content", "You must call the tool `" + tc["function"]["name"].get<std::string>() +
                                "` in your next message, and no other."}});
        in->tool_choice = "required";
    }
    *starts_in = thinking ? "think" : "response";
    return true;
}

bool k3_render(const ChatFields &f, bool server_default_thinking, std::vector<XSegment> *segs, std::string *starts_in,
               ApiError *err, const std::optional<std::vector<std::string>> &image_prompts) {
    XtmlInput in;
    if (!k3_prompt(f, server_default_thinking, &in, starts_in, err)) return false;
    in.image_prompts = image_prompts;
    std::string e;
    if (!xtml_render(in, segs, &e)) return *err = bad_request(e, "messages"), false;
    return true;
}

bool chatjson_check(const ChatFields &f, ApiError *err) {
    const char *kWho = "this container is served from its chat.json, which cannot express";
    if (f.tools.is_array() && !f.tools.empty())
        return *err = bad_request(std::string(kWho) +
                                      " tool definitions; drop 'tools', or use a Kimi K3 container, whose XTML format "
                                      "carries them",
                                  "tools"),
               false;
    if (!f.tool_choice.is_null()) return *err = bad_request(std::string(kWho) + " 'tool_choice'", "tool_choice"), false;
    bool thinking = false;
    if (f.effort_given) thinking = *f.effort != "none" && *f.effort != "minimal" && *f.effort != "off";
    else if (f.thinking_field) thinking = *f.thinking_field;
    if (thinking)
        return *err = bad_request("this container has no reasoning channel in its tokenizer, so it cannot think on "
                                  "request; pass reasoning_effort 'none' or thinking false",
                                  "reasoning_effort"),
               false;
    for (size_t i = 0; i < f.messages.size(); i++) {
        const ordered_json &m = f.messages[i];
        const std::string p = "messages[" + std::to_string(i) + "]";
        if (m["role"] == "tool" || (m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty()))
            return *err = bad_request(std::string(kWho) + " a tool call or its result", p), false;
        if (has_image(m))
            return *err = bad_request(p + " carries an image, and this container is served from its chat.json, which "
                                          "cannot place one",
                                      p + ".content"),
                   false;
    }
    return true;
}

}  // namespace sluice::server
