// OpenAI response objects: chat.completion, chat.completion.chunk and
// text_completion, with usage and log-probabilities.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/generate.h"

namespace sluice::server {

// What every object of one response shares.
struct ResponseHead {
    std::string id;       // "chatcmpl-..." or "cmpl-..."
    int64_t created = 0;  // Unix seconds
    std::string model;
};

// reasoning_tokens >= 0 adds completion_tokens_details.reasoning_tokens.
// cached_tokens >= 0: usage.prompt_tokens_details.cached_tokens (OpenAI's
// field for prompt tokens served from the prompt cache).
nlohmann::json usage_json(int prompt_tokens, int completion_tokens, int reasoning_tokens = -1, int cached_tokens = -1);
// A chat stream delta: content, reasoning_content and announced tool calls.
nlohmann::json chat_delta_json(const Delta &d);

// Chat: {"content": [{token, logprob, bytes, top_logprobs}], "refusal": null}.
nlohmann::json chat_logprobs_json(const std::vector<TokenLogprob> &tokens);
// Completions: {tokens, token_logprobs, top_logprobs, text_offset}; offsets
// count bytes from `offset0`, and advance *offset_end.
nlohmann::json completion_logprobs_json(const std::vector<TokenLogprob> &tokens, bool with_top, size_t offset0,
                                        size_t *offset_end);

// One choice of a whole response (n > 1 has several).
nlohmann::json chat_choice(int index, const std::string &text, const std::vector<TokenLogprob> *lps,
                           const GenResult &r);
nlohmann::json completion_choice(int index, const std::string &text, const nlohmann::json &logprobs,
                                 const GenResult &r);
// Whole (non-streamed) responses.
nlohmann::json chat_response(const ResponseHead &h, const std::string &text, const std::vector<TokenLogprob> *lps,
                             const GenResult &r);
nlohmann::json completion_response(const ResponseHead &h, const std::string &text, const nlohmann::json &logprobs,
                                   const GenResult &r);

// Stream chunks. `delta` is the chat delta object; finish may be empty (null).
nlohmann::json chat_chunk(const ResponseHead &h, const nlohmann::json &delta, const nlohmann::json &logprobs,
                          const std::string &finish);
nlohmann::json completion_chunk(const ResponseHead &h, const std::string &text, const nlohmann::json &logprobs,
                                const std::string &finish);
// The include_usage chunk: no choices, only usage.
nlohmann::json usage_chunk(const ResponseHead &h, bool chat, int prompt_tokens, int cached_tokens, int completion_tokens,
                           int reasoning_tokens = -1);

// JSON text that never throws on bad UTF-8 (invalid bytes become U+FFFD).
std::string dump(const nlohmann::json &j);
// One Server-Sent Events message.
std::string sse(const nlohmann::json &j);

std::string random_id(const char *prefix);

}  // namespace sluice::server
