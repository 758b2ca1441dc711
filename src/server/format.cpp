// OpenAI response objects (see format.h).
#include "server/format.h"

#include <cmath>
#include <random>

#include "server/request.h"

namespace sluice::server {

using nlohmann::json;

std::string dump(const json &j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse(const json &j) { return "data: " + dump(j) + "\n\n"; }

std::string random_id(const char *prefix) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::string s = prefix;
    for (int i = 0; i < 24; i++) s.push_back(digits[rng() % (sizeof digits - 1)]);
    return s;
}

json usage_json(int prompt_tokens, int completion_tokens, int reasoning_tokens, int cached_tokens) {
    json u{{"prompt_tokens", prompt_tokens},
           {"completion_tokens", completion_tokens},
           {"total_tokens", prompt_tokens + completion_tokens}};
    if (cached_tokens >= 0) u["prompt_tokens_details"] = json{{"cached_tokens", cached_tokens}};
    if (reasoning_tokens >= 0) u["completion_tokens_details"] = json{{"reasoning_tokens", reasoning_tokens}};
    return u;
}

json chat_delta_json(const Delta &d) {
    json delta = json::object();
    if (!d.reasoning.empty()) delta["reasoning_content"] = utf8_sanitize(d.reasoning);
    if (!d.text.empty() || (d.reasoning.empty() && d.calls.empty())) delta["content"] = utf8_sanitize(d.text);
    if (!d.calls.empty()) {
        json calls = json::array();
        for (const CallStart &c : d.calls)
            calls.push_back(json{{"index", c.index},
                                 {"id", utf8_sanitize(c.id)},
                                 {"type", "function"},
                                 {"function", json{{"name", utf8_sanitize(c.name)}, {"arguments", ""}}}});
        delta["tool_calls"] = calls;
    }
    return delta;
}

namespace {

json bytes_array(const std::string &b) {
    json a = json::array();
    for (unsigned char c : b) a.push_back((int)c);
    return a;
}

// A logprob of -inf (a token the model rules out) is not JSON: clamp it.
double finite(float x) { return std::isfinite(x) ? (double)x : -9999.0; }

}  // namespace

json chat_logprobs_json(const std::vector<TokenLogprob> &tokens) {
    json content = json::array();
    for (const TokenLogprob &t : tokens) {
        json top = json::array();
        for (const TopLogprob &a : t.top)
            top.push_back({{"token", utf8_sanitize(a.bytes)}, {"logprob", finite(a.logprob)}, {"bytes", bytes_array(a.bytes)}});
        content.push_back({{"token", utf8_sanitize(t.bytes)},
                           {"logprob", finite(t.logprob)},
                           {"bytes", bytes_array(t.bytes)},
                           {"top_logprobs", top}});
    }
    return json{{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs_json(const std::vector<TokenLogprob> &tokens, bool with_top, size_t offset0,
                              size_t *offset_end) {
    json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
    size_t off = offset0;
    for (const TokenLogprob &t : tokens) {
        toks.push_back(utf8_sanitize(t.bytes));
        lps.push_back(t.has_logprob ? json(finite(t.logprob)) : json(nullptr));
        if (with_top) {
            if (!t.has_logprob) {
                tops.push_back(nullptr);
            } else {
                json m = json::object();
                // Two ids may share a sanitized spelling; the first (likelier) wins.
                for (const TopLogprob &a : t.top) {
                    std::string k = utf8_sanitize(a.bytes);
                    if (!m.contains(k)) m[k] = finite(a.logprob);
                }
                tops.push_back(m);
            }
        }
        offs.push_back(off);
        off += t.bytes.size();
    }
    if (offset_end) *offset_end = off;
    return json{{"tokens", toks},
                {"token_logprobs", lps},
                {"top_logprobs", with_top ? tops : json(nullptr)},
                {"text_offset", offs}};
}

json chat_choice(int index, const std::string &text, const std::vector<TokenLogprob> *lps, const GenResult &r) {
    json message = {{"role", "assistant"}, {"content", utf8_sanitize(text)}, {"refusal", nullptr}};
    if (!r.message.is_null()) {
        // K3: content (null when empty), reasoning_content, tool_calls.
        message = json::parse(r.message.dump(-1, ' ', false, json::error_handler_t::replace));
        message["refusal"] = nullptr;
    }
    return json{{"index", index},
                {"message", message},
                {"logprobs", lps ? chat_logprobs_json(*lps) : json(nullptr)},
                {"finish_reason", r.finish_reason}};
}

json chat_response(const ResponseHead &h, const std::string &text, const std::vector<TokenLogprob> *lps,
                   const GenResult &r) {
    json choice = chat_choice(0, text, lps, r);
    return json{{"id", h.id},
                {"object", "chat.completion"},
                {"created", h.created},
                {"model", h.model},
                {"choices", json::array({choice})},
                {"usage", usage_json(r.prompt_tokens, r.completion_tokens, r.reasoning_tokens, r.cached_tokens)},
                {"system_fingerprint", nullptr}};
}

json completion_choice(int index, const std::string &text, const json &logprobs, const GenResult &r) {
    json choice = {{"index", index}, {"text", utf8_sanitize(text)}, {"logprobs", logprobs}, {"finish_reason", r.finish_reason}};
    if (r.no_tokenizer) choice["token_ids"] = r.tokens;  // no text without a tokenizer
    return choice;
}

json completion_response(const ResponseHead &h, const std::string &text, const json &logprobs, const GenResult &r) {
    json choice = completion_choice(0, text, logprobs, r);
    return json{{"id", h.id},
                {"object", "text_completion"},
                {"created", h.created},
                {"model", h.model},
                {"choices", json::array({choice})},
                {"usage", usage_json(r.prompt_tokens, r.completion_tokens, -1, r.cached_tokens)},
                {"system_fingerprint", nullptr}};
}

json chat_chunk(const ResponseHead &h, const json &delta, const json &logprobs, const std::string &finish) {
    json choice = {{"index", 0},
                   {"delta", delta},
                   {"logprobs", logprobs},
                   {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}};
    return json{{"id", h.id},
                {"object", "chat.completion.chunk"},
                {"created", h.created},
                {"model", h.model},
                {"choices", json::array({choice})},
                {"system_fingerprint", nullptr}};
}

json completion_chunk(const ResponseHead &h, const std::string &text, const json &logprobs, const std::string &finish) {
    json choice = {{"index", 0},
                   {"text", text},
                   {"logprobs", logprobs},
                   {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}};
    return json{{"id", h.id},
                {"object", "text_completion"},
                {"created", h.created},
                {"model", h.model},
                {"choices", json::array({choice})},
                {"system_fingerprint", nullptr}};
}

json usage_chunk(const ResponseHead &h, bool chat, int prompt_tokens, int cached_tokens, int completion_tokens,
                 int reasoning_tokens) {
    return json{{"id", h.id},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", h.created},
                {"model", h.model},
                {"choices", json::array()},
                {"usage", usage_json(prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens)},
                {"system_fingerprint", nullptr}};
}

}  // namespace sluice::server
