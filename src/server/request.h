// OpenAI-style requests: parsing, type checks and error objects.
//
// Everything that can be checked without the model is checked here, on the
// HTTP thread, so a malformed request never takes a queue slot. What needs
// the model (tokenizing, token ids in range, the context limit) is checked
// by the worker when the request's turn comes (generate.cpp).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "server/chat_fields.h"
#include "server/model.h"

namespace sluice::server {

// An OpenAI error object: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
    int status = 400;
    std::string type = "invalid_request_error";
    std::string message;
    std::string param;  // empty: null
    std::string code;   // empty: null
};
ApiError bad_request(std::string message, std::string param = {}, std::string code = {});
nlohmann::json error_json(const ApiError &e);

enum class Endpoint { chat, completion, tokenize, detokenize };

struct GenRequest {
    Endpoint kind = Endpoint::chat;
    std::string model;  // empty: not given
    std::vector<ChatMessage> messages;  // chat, for chat.json formats
    ChatFields chat;                    // chat: the whole conversation and its options
    bool default_thinking = true;       // the server's default (--no-thinking)
    // The think channel's budget in tokens (thinking_budget, or its aliases
    // reasoning_budget and thinking_budget_tokens): kBudgetUnset when the
    // request gives none (then default_thinking_budget, --thinking-budget),
    // -1 for no budget of its own. Structured answers cap it further
    // (reply_guide.h).
    static constexpr int64_t kBudgetUnset = -2;
    int64_t thinking_budget = kBudgetUnset;
    int64_t default_thinking_budget = 4096;
    // response_format: "" (text), "json_object" or "json_schema" (then
    // json_schema holds the schema's JSON text): enforced by constrained decoding.
    std::string response_format;
    std::string json_schema;
    // Tools declared with "strict": true (name, parameters schema as JSON
    // text): a call to one of them writes its arguments under the schema
    // by constrained decoding (K3 markup, generate.cpp).
    std::vector<std::pair<std::string, std::string>> strict_tools;
    // tool_choice that forces a call ("required", or a named function):
    // the candidates (one for a named choice), each with the schema its
    // arguments are written under (a strict tool's parameters; empty: any
    // JSON object). Empty: the model chooses.
    std::vector<std::pair<std::string, std::string>> forced_calls;
    // Test only (sluice serve --test-forced-output): the reply's tokens are
    // this text's (markup mode) instead of the model's choices.
    std::string forced_output;
    bool forced_then_sample = false;  // after the forced text, the model samples on
    // completion: the prompt as text, or as token ids
    bool prompt_is_ids = false;
    std::string prompt_text;
    std::vector<int64_t> prompt_ids;  // range-checked against the vocabulary later
    int64_t max_tokens = -1;          // -1: not given (chat: fill the context; completion: 16)
    SamplingParams sampling;
    std::vector<std::string> stop;
    bool logprobs = false;
    int top_logprobs = 0;  // alternatives per position, 0..20
    bool echo = false;     // completion: the prompt is part of the output
    bool stream = false;
    // llama-server's cache_prompt: reuse the prefix the session shares with
    // this prompt (on by default; false evaluates the whole prompt).
    bool cache_prompt = true;
    int n = 1;  // choices (not streamed)
    bool include_usage = false;  // stream_options.include_usage
    bool with_pieces = false;    // tokenize: each id with its text
    bool markup = false;         // tokenize: special-token strings become their ids (llama-server's parse_special)
};

// Deepest nesting of arrays and objects accepted in a request body: parsing
// is cheap, but a body of a million '[' should not reach the JSON library.
constexpr int kMaxJsonDepth = 64;
constexpr size_t kMaxStops = 4;
constexpr int kMaxTopLogprobs = 20;
constexpr int kMaxChoices = 16;

// Parses body as the named endpoint's request. On failure fills *err.
bool parse_request(Endpoint kind, std::string_view body, GenRequest *out, ApiError *err);

// Replaces every ill-formed UTF-8 subsequence with U+FFFD, so token pieces
// (which may split a character) can go into JSON strings.
std::string utf8_sanitize(std::string_view s);

}  // namespace sluice::server
