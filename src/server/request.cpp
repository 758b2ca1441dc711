// OpenAI-style request parsing (see request.h).
#include "server/request.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <random>

#include "server/chat_request.h"
#include "sluice/sluice.h"

namespace sluice::server {

using nlohmann::json;

ApiError bad_request(std::string message, std::string param, std::string code) {
    ApiError e;
    e.status = 400;
    e.message = std::move(message);
    e.param = std::move(param);
    e.code = std::move(code);
    return e;
}

json error_json(const ApiError &e) {
    json o;
    o["message"] = e.message;
    o["type"] = e.type;
    o["param"] = e.param.empty() ? json(nullptr) : json(e.param);
    o["code"] = e.code.empty() ? json(nullptr) : json(e.code);
    return json{{"error", o}};
}

std::string utf8_sanitize(std::string_view s) {
    // Unicode's "maximal subpart" substitution: each maximal prefix of a
    // valid sequence that cannot be completed becomes one U+FFFD.
    static const char kRepl[] = "\xEF\xBF\xBD";
    std::string out;
    out.reserve(s.size());
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            out.push_back((char)c);
            i++;
            continue;
        }
        int len = 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        }
        if (len == 0) {
            out += kRepl;
            i++;
            continue;
        }
        size_t j = i + 1;
        bool ok = true;
        for (int k = 1; k < len; k++, j++) {
            unsigned char lim_lo = k == 1 ? lo : 0x80, lim_hi = k == 1 ? hi : 0xBF;
            if (j >= n || p[j] < lim_lo || p[j] > lim_hi) {
                ok = false;
                break;
            }
        }
        if (ok) out.append(s.substr(i, (size_t)len));
        else out += kRepl;
        i = j;
    }
    return out;
}

namespace {

// Nesting depth of arrays/objects outside strings; stops counting past limit.
int json_depth(std::string_view s, int limit) {
    int depth = 0, max_depth = 0;
    bool in_str = false, esc = false;
    for (char c : s) {
        if (in_str) {
            if (esc) esc = false;
            else if (c == '\\') esc = true;
            else if (c == '"') in_str = false;
            continue;
        }
        if (c == '"') in_str = true;
        else if (c == '[' || c == '{') {
            if (++depth > max_depth) max_depth = depth;
            if (max_depth > limit) return max_depth;
        } else if (c == ']' || c == '}') depth--;
    }
    return max_depth;
}

const char *type_name(const json &v) {
    switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number";
    default: return "an integer";
    }
}

ApiError wrong_type(const std::string &param, const char *expected, const json &v) {
    return bad_request("'" + param + "' must be " + expected + ", not " + type_name(v), param);
}

// Each getter: absent or null leaves *out unchanged; a present value of the
// wrong type or out of range is an error.
bool get_bool(const json &o, const char *k, bool *out, ApiError *err) {
    auto it = o.find(k);
    if (it == o.end() || it->is_null()) return true;
    if (!it->is_boolean()) return *err = wrong_type(k, "a boolean", *it), false;
    *out = it->get<bool>();
    return true;
}

bool get_int(const json &o, const char *k, int64_t lo, int64_t hi, int64_t *out, ApiError *err) {
    auto it = o.find(k);
    if (it == o.end() || it->is_null()) return true;
    if (!it->is_number_integer()) return *err = wrong_type(k, "an integer", *it), false;
    if (it->is_number_unsigned() && it->get<uint64_t>() > (uint64_t)std::numeric_limits<int64_t>::max())
        return *err = bad_request("'" + std::string(k) + "' is out of range", k), false;
    int64_t v = it->get<int64_t>();
    if (v < lo || v > hi)
        return *err = bad_request("'" + std::string(k) + "' must be between " + std::to_string(lo) + " and " +
                                      std::to_string(hi) + ", got " + std::to_string(v),
                                  k),
               false;
    *out = v;
    return true;
}

bool get_number(const json &o, const char *k, double lo, double hi, float *out, ApiError *err) {
    auto it = o.find(k);
    if (it == o.end() || it->is_null()) return true;
    if (!it->is_number()) return *err = wrong_type(k, "a number", *it), false;
    double v = it->get<double>();
    if (!std::isfinite(v) || v < lo || v > hi) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "'%s' must be between %g and %g", k, lo, hi);
        return *err = bad_request(buf, k), false;
    }
    *out = (float)v;
    return true;
}

// OpenAI content: a string, or an array of {"type":"text","text":...} parts.
// Image parts: {"type":"image_url","image_url":{"url":...}} or
// {"type":"image_url","image_url":"..."}, and K3's {"type":"image","image":...}
// (an object's url, then path, then data field). VISION.md §9.
bool get_image_ref(const json &part, const std::string &pp, std::string *url, ApiError *err) {
    const bool openai = part["type"] == "image_url";
    auto v = part.find(openai ? "image_url" : "image");
    std::string ref;
    if (v != part.end() && v->is_string()) ref = v->get<std::string>();
    if (v != part.end() && v->is_object())
        for (const char *k : {"url", "path", "data"})
            if (auto f = v->find(k); f != v->end() && f->is_string() && ref.empty()) ref = f->get<std::string>();
    if (ref.empty()) return *err = bad_request("'" + pp + "' is an image with no url", "image_url"), false;
    *url = std::move(ref);
    return true;
}

bool get_content(const json &v, const std::string &param, std::string *out, ApiError *err,
                 std::vector<ContentPart> *parts = nullptr) {
    if (v.is_null()) return out->clear(), true;
    if (v.is_string()) return *out = v.get<std::string>(), true;
    if (!v.is_array()) return *err = wrong_type(param, "a string or an array of content parts", v), false;
    out->clear();
    std::vector<ContentPart> ps;
    bool any_image = false;
    for (size_t i = 0; i < v.size(); i++) {
        const json &part = v[i];
        std::string pp = param + "[" + std::to_string(i) + "]";
        if (!part.is_object()) return *err = wrong_type(pp, "an object", part), false;
        auto t = part.find("type");
        if (t == part.end() || !t->is_string())
            return *err = bad_request("'" + pp + ".type' must be a string", pp + ".type"), false;
        if (parts && (*t == "image_url" || *t == "image")) {
            ContentPart cp;
            cp.image = true;
            if (!get_image_ref(part, pp, &cp.url, err)) return false;
            ps.push_back(std::move(cp));
            any_image = true;
            continue;
        }
        if (*t != "text")
            return *err = bad_request("content part type '" + t->get<std::string>() +
                                          "' is not supported (this model takes text only)",
                                      pp + ".type"),
                   false;
        auto x = part.find("text");
        if (x == part.end() || !x->is_string())
            return *err = bad_request("'" + pp + ".text' must be a string", pp + ".text"), false;
        *out += x->get<std::string>();
        ps.push_back(ContentPart{false, x->get<std::string>(), {}, {}});
    }
    if (parts && any_image) *parts = std::move(ps);
    return true;
}

bool parse_messages(const nlohmann::ordered_json &body, GenRequest *r, ApiError *err) {
    // The shape checks K3's server makes (CHAT_K3.md §8), tools, thinking,
    // tool_choice and response_format; then each message's text for the
    // chat.json formats.
    if (!parse_chat_fields(body, &r->chat, err)) return false;
    const auto &ms = r->chat.messages;
    for (size_t i = 0; i < ms.size(); i++) {
        const auto &m = ms[i];
        std::string p = "messages[" + std::to_string(i) + "]";
        ChatMessage cm;
        cm.role = m["role"].get<std::string>();
        if (!m.contains("content") && cm.role != "assistant")
            return *err = bad_request("'" + p + ".content' is required", p + ".content"), false;
        if (m.contains("content")) {
            const json content = json::parse(m["content"].dump());
            // Image parts (issue 21) land in cm.parts, text and images in
            // order; the K3 renderer reads the same parts from r->chat.
            if (!get_content(content, p + ".content", &cm.content, err, &cm.parts)) return false;
        }
        r->messages.push_back(std::move(cm));
    }
    return true;
}

// response_format: text, json_object, or json_schema (its schema checked
// now, so a schema the constrained decoder refuses never takes a slot).
bool parse_response_format(const nlohmann::ordered_json &rf, GenRequest *r, ApiError *err) {
    if (!rf.is_object()) return true;
    auto t = rf.find("type");
    if (t == rf.end() || !t->is_string())
        return *err = bad_request("'response_format.type' must be 'text', 'json_object' or 'json_schema'",
                                  "response_format.type"),
               false;
    const std::string type = t->get<std::string>();
    if (type == "text") return true;
    if (type == "json_object") return r->response_format = type, true;
    if (type != "json_schema")
        return *err = bad_request("'response_format.type' must be 'text', 'json_object' or 'json_schema', got '" +
                                      type + "'",
                                  "response_format.type"),
               false;
    auto js = rf.find("json_schema");
    if (js == rf.end() || !js->is_object())
        return *err = bad_request("'response_format.json_schema' must be an object", "response_format.json_schema"),
               false;
    // The schema under "schema" (OpenAI), else the object itself (as warp reads it).
    const nlohmann::ordered_json &schema = js->contains("schema") ? (*js)["schema"] : *js;
    r->response_format = type;
    r->json_schema = schema.dump();
    char why[512];
    if (sluice_json_schema_check(r->json_schema.data(), r->json_schema.size(), why, sizeof why) != SLUICE_OK)
        return *err = bad_request(std::string("'response_format.json_schema.schema' cannot be enforced: ") + why,
                                  "response_format.json_schema.schema"),
               false;
    return true;
}

// tools[i].function.strict: the parameters schema is checked now, like
// response_format's, so a strict tool the constrained decoder cannot
// enforce is refused before it takes a slot.
bool parse_strict_tools(const nlohmann::ordered_json &tools, GenRequest *r, ApiError *err) {
    if (!tools.is_array()) return true;
    for (size_t i = 0; i < tools.size(); i++) {
        const auto &t = tools[i];
        if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) continue;
        const auto &f = t["function"];
        const std::string p = "tools[" + std::to_string(i) + "].function";
        if (!f.contains("strict") || f["strict"].is_null()) continue;
        if (!f["strict"].is_boolean()) return *err = bad_request("'" + p + ".strict' must be a boolean", p + ".strict"), false;
        if (!f["strict"].get<bool>()) continue;
        if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
            return *err = bad_request("'" + p + ".name' must be a non-empty string", p + ".name"), false;
        // No parameters: the function takes an empty object.
        const nlohmann::ordered_json none = {{"type", "object"}, {"properties", nlohmann::ordered_json::object()},
                                             {"additionalProperties", false}};
        const nlohmann::ordered_json &schema = f.contains("parameters") && !f["parameters"].is_null() ? f["parameters"] : none;
        if (!schema.is_object())
            return *err = bad_request("'" + p + ".parameters' must be an object", p + ".parameters"), false;
        if (!schema.contains("type") || schema["type"] != "object")
            return *err = bad_request("'" + p + ".parameters' must be a schema of type 'object' under strict: true",
                                      p + ".parameters"),
                   false;
        const std::string text = schema.dump();
        char why[512];
        if (sluice_json_schema_check(text.data(), text.size(), why, sizeof why) != SLUICE_OK)
            return *err = bad_request("'" + p + ".parameters' cannot be enforced under strict: true: " + why,
                                      p + ".parameters"),
                   false;
        const std::string name = f["name"].get<std::string>();
        bool seen = false;
        for (const auto &st : r->strict_tools) seen |= st.first == name;
        if (!seen) r->strict_tools.emplace_back(name, text);
    }
    return true;
}

// A name the forced call's header can carry as it is: the header's
// attribute value is read back unescaped (CHAT_K3.md §9.3), and OpenAI's own
// rule for function names is [a-zA-Z0-9_-]{1,64}.
bool plain_tool_name(const std::string &n) {
    if (n.empty() || n.size() > 64) return false;
    for (unsigned char c : n)
        if (!std::isalnum(c) && c != '_' && c != '-' && c != '.' && c != ':') return false;
    return true;
}

// tool_choice "required" or {"type":"function","function":{"name":...}}:
// the server writes the call (reply_guide.h), so the tools it may name are
// collected here, and a choice no declared tool can satisfy is a 400.
bool parse_forced_call(const ChatFields &f, GenRequest *r, ApiError *err) {
    const auto &tc = f.tool_choice;
    std::string named;
    if (tc.is_string()) {
        if (tc.get<std::string>() != "required") return true;
    } else if (tc.is_object()) {
        if (tc.contains("function") && tc["function"].is_object() && tc["function"].contains("name") &&
            tc["function"]["name"].is_string())
            named = tc["function"]["name"].get<std::string>();
    } else {
        return true;
    }
    if (!f.tools.is_array() || f.tools.empty())
        return *err = bad_request("'tool_choice' asks for a tool call, but no 'tools' are declared", "tool_choice"),
               false;
    for (size_t i = 0; i < f.tools.size(); i++) {
        const auto &t = f.tools[i];
        if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) continue;
        const auto &fn = t["function"];
        if (!fn.contains("name") || !fn["name"].is_string()) continue;
        const std::string name = fn["name"].get<std::string>();
        if (!named.empty() && name != named) continue;
        const std::string p = "tools[" + std::to_string(i) + "].function.name";
        if (!plain_tool_name(name))
            return *err = bad_request("'" + p + "' is '" + name +
                                          "': a call the server writes for tool_choice needs a name of letters, "
                                          "digits, '_', '-', '.' or ':' (at most 64)",
                                      p),
                   false;
        std::string schema;
        for (const auto &st : r->strict_tools)
            if (st.first == name) schema = st.second;
        bool seen = false;
        for (const auto &fc : r->forced_calls) seen |= fc.first == name;
        if (!seen) r->forced_calls.emplace_back(name, schema);
    }
    if (r->forced_calls.empty())
        return *err = bad_request(named.empty() ? std::string("'tool_choice' asks for a tool call, but no entry of "
                                                              "'tools' declares a function with a name")
                                                : "'tool_choice' names the function '" + named +
                                                      "', which is not among 'tools'",
                                  "tool_choice"),
               false;
    return true;
}

bool parse_prompt(const json &o, GenRequest *r, ApiError *err) {
    auto it = o.find("prompt");
    if (it == o.end() || it->is_null()) return *err = bad_request("'prompt' is required", "prompt"), false;
    const json *p = &*it;
    // A batch of one prompt is accepted; a batch of several is not.
    if (p->is_array() && !p->empty() && ((*p)[0].is_string() || (*p)[0].is_array())) {
        if (p->size() != 1)
            return *err = bad_request("only one prompt per request is supported", "prompt"), false;
        p = &(*p)[0];
    }
    if (p->is_string()) {
        r->prompt_text = p->get<std::string>();
        return true;
    }
    if (!p->is_array()) return *err = wrong_type("prompt", "a string or an array of token ids", *p), false;
    r->prompt_is_ids = true;
    for (size_t i = 0; i < p->size(); i++) {
        const json &t = (*p)[i];
        if (!t.is_number_integer())
            return *err = bad_request("'prompt[" + std::to_string(i) + "]' must be a token id (an integer), not " +
                                          type_name(t),
                                      "prompt"),
                   false;
        if (t.is_number_unsigned() && t.get<uint64_t>() > (uint64_t)std::numeric_limits<int64_t>::max())
            r->prompt_ids.push_back(std::numeric_limits<int64_t>::max());
        else r->prompt_ids.push_back(t.get<int64_t>());
    }
    return true;
}

bool parse_stop(const json &o, GenRequest *r, ApiError *err) {
    auto it = o.find("stop");
    if (it == o.end() || it->is_null()) return true;
    if (it->is_string()) {
        if (!it->get<std::string>().empty()) r->stop.push_back(it->get<std::string>());
        return true;
    }
    if (!it->is_array()) return *err = wrong_type("stop", "a string or an array of strings", *it), false;
    if (it->size() > kMaxStops)
        return *err = bad_request("'stop' takes at most " + std::to_string(kMaxStops) + " sequences", "stop"), false;
    for (const json &s : *it) {
        if (!s.is_string()) return *err = wrong_type("stop", "a string or an array of strings", s), false;
        if (!s.get<std::string>().empty()) r->stop.push_back(s.get<std::string>());
    }
    return true;
}

}  // namespace

// llama-server's /tokenize {"content", "with_pieces", "parse_special"} and
// /detokenize {"tokens"}.
bool parse_token_request(const json &o, GenRequest *r, ApiError *err) {
    if (r->kind == Endpoint::tokenize) {
        auto it = o.find("content");
        if (it == o.end() || !it->is_string()) return *err = bad_request("'content' must be a string", "content"), false;
        r->prompt_text = it->get<std::string>();
        if (!get_bool(o, "with_pieces", &r->with_pieces, err)) return false;
        if (!get_bool(o, "parse_special", &r->markup, err)) return false;
        return true;
    }
    auto it = o.find("tokens");
    if (it == o.end() || !it->is_array()) return *err = bad_request("'tokens' must be an array of token ids", "tokens"), false;
    r->prompt_is_ids = true;
    for (const json &t : *it) {
        if (!t.is_number_integer()) return *err = bad_request("'tokens' must be an array of token ids", "tokens"), false;
        r->prompt_ids.push_back(t.is_number_unsigned() && t.get<uint64_t>() > (uint64_t)INT64_MAX ? INT64_MAX
                                                                                                  : t.get<int64_t>());
    }
    return true;
}

bool parse_request(Endpoint kind, std::string_view body, GenRequest *r, ApiError *err) {
    *r = GenRequest{};
    r->kind = kind;
    if (json_depth(body, kMaxJsonDepth) > kMaxJsonDepth)
        return *err = bad_request("the request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels"),
               false;
    json o;
    try {
        o = json::parse(body);
    } catch (const json::exception &e) {
        return *err = bad_request(std::string("the request body is not valid JSON: ") + e.what()), false;
    }
    if (!o.is_object()) return *err = bad_request("the request body must be a JSON object"), false;

    if (auto it = o.find("model"); it != o.end() && !it->is_null()) {
        if (!it->is_string()) return *err = wrong_type("model", "a string", *it), false;
        r->model = it->get<std::string>();
    }
    if (kind == Endpoint::tokenize || kind == Endpoint::detokenize) return parse_token_request(o, r, err);
    if (kind == Endpoint::chat) {
        // Ordered: tool-call arguments keep their order in the prompt.
        const auto ordered = nlohmann::ordered_json::parse(body);
        if (!parse_messages(ordered, r, err)) return false;
        if (!parse_response_format(r->chat.response_format, r, err)) return false;
        if (!parse_strict_tools(r->chat.tools, r, err)) return false;
        if (!parse_forced_call(r->chat, r, err)) return false;
    } else if (!parse_prompt(o, r, err)) {
        return false;
    }
    constexpr int64_t kBig = 1 << 30;
    // Completions take max_tokens 0: with echo and logprobs, that scores a prompt.
    if (!get_int(o, "max_tokens", kind == Endpoint::chat ? 1 : 0, kBig, &r->max_tokens, err)) return false;
    if (kind == Endpoint::chat && !get_int(o, "max_completion_tokens", 1, kBig, &r->max_tokens, err)) return false;
    if (!get_number(o, "temperature", 0.0, 2.0, &r->sampling.temperature, err)) return false;
    if (!get_number(o, "top_p", 0.0, 1.0, &r->sampling.top_p, err)) return false;
    if (r->sampling.top_p <= 0.0f) return *err = bad_request("'top_p' must be greater than 0", "top_p"), false;
    // llama-server's knobs: top_k, min_p and the repetition penalty
    // (repeat_penalty and repeat_last_n are llama.cpp's spellings).
    int64_t top_k = 0;
    if (!get_int(o, "top_k", 0, 1 << 24, &top_k, err)) return false;
    r->sampling.top_k = (int32_t)top_k;
    if (!get_number(o, "min_p", 0.0, 1.0, &r->sampling.min_p, err)) return false;
    for (const char *k : {"repetition_penalty", "repeat_penalty"})
        if (!get_number(o, k, 1e-3, 100.0, &r->sampling.repeat_penalty, err)) return false;
    int64_t last_n = r->sampling.repeat_last_n;
    if (!get_int(o, "repeat_last_n", -1, 1 << 24, &last_n, err)) return false;
    r->sampling.repeat_last_n = (int32_t)last_n;
    if (!parse_stop(o, r, err)) return false;

    // seed: given, or fresh per request (then two requests differ, as with OpenAI).
    int64_t seed = -1;
    if (!get_int(o, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &seed, err))
        return false;
    if (o.contains("seed") && !o["seed"].is_null()) r->sampling.seed = (uint64_t)seed;
    else r->sampling.seed = ((uint64_t)std::random_device{}() << 32) ^ std::random_device{}();

    // n > 1: the choices are generated one after the other (seeds seed,
    // seed + 1, ...), each from the prompt; not streamed.
    int64_t n = 1;
    if (!get_int(o, "n", 1, kMaxChoices, &n, err)) return false;
    r->n = (int)n;

    if (kind == Endpoint::chat) {
        // The think channel's budget: llama-server's and Qwen's spellings.
        for (const char *k : {"thinking_budget", "reasoning_budget", "thinking_budget_tokens"}) {
            if (!o.contains(k) || o[k].is_null()) continue;
            if (!get_int(o, k, -1, kBig, &r->thinking_budget, err)) return false;
            break;
        }
        if (!get_bool(o, "logprobs", &r->logprobs, err)) return false;
        int64_t top = 0;
        if (!get_int(o, "top_logprobs", 0, kMaxTopLogprobs, &top, err)) return false;
        if (o.contains("top_logprobs") && !o["top_logprobs"].is_null() && !r->logprobs)
            return *err = bad_request("'top_logprobs' needs 'logprobs' set to true", "top_logprobs"), false;
        r->top_logprobs = (int)top;
    } else {
        // Completions: logprobs is the number of alternatives (0 = only the chosen token's).
        int64_t lp = -1;
        if (!get_int(o, "logprobs", 0, kMaxTopLogprobs, &lp, err)) return false;
        r->logprobs = lp >= 0;
        r->top_logprobs = lp > 0 ? (int)lp : 0;
        if (!get_bool(o, "echo", &r->echo, err)) return false;
        int64_t best_of = 1;
        if (!get_int(o, "best_of", 1, kBig, &best_of, err)) return false;
        if (best_of != 1) return *err = bad_request("only best_of = 1 is supported", "best_of"), false;
        if (auto it = o.find("suffix"); it != o.end() && !it->is_null()) {
            if (!it->is_string()) return *err = wrong_type("suffix", "a string", *it), false;
            if (!it->get<std::string>().empty())
                return *err = bad_request("'suffix' is not supported", "suffix"), false;
        }
    }
    if (!get_bool(o, "stream", &r->stream, err)) return false;
    if (!get_bool(o, "cache_prompt", &r->cache_prompt, err)) return false;
    if (r->n > 1 && r->stream)
        return *err = bad_request("'n' > 1 is supported without streaming only", "n"), false;
    if (auto it = o.find("stream_options"); it != o.end() && !it->is_null()) {
        if (!it->is_object()) return *err = wrong_type("stream_options", "an object", *it), false;
        if (!r->stream)
            return *err = bad_request("'stream_options' is only allowed when 'stream' is true", "stream_options"),
                   false;
        auto iu = it->find("include_usage");
        if (iu != it->end() && !iu->is_null()) {
            if (!iu->is_boolean()) return *err = wrong_type("stream_options.include_usage", "a boolean", *iu), false;
            r->include_usage = iu->get<bool>();
        }
    }
    // Penalties change the distribution; accept only their neutral values
    // rather than silently ignoring them.
    for (const char *k : {"presence_penalty", "frequency_penalty"}) {
        float v = 0.0f;
        if (!get_number(o, k, -2.0, 2.0, &v, err)) return false;
        if (v != 0.0f) return *err = bad_request(std::string("'") + k + "' is not supported", k), false;
    }
    return true;
}

}  // namespace sluice::server
