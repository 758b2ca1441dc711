// One request's generation on a Model: prompt, context check, decoding
// loop, stop conditions and log-probabilities. Runs on the worker thread.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/model.h"
#include "server/request.h"

namespace sluice::server {

struct TopLogprob {
    int32_t id = 0;
    std::string bytes;  // the token's bytes (may be part of a UTF-8 sequence)
    float logprob = 0.0f;
};

struct TokenLogprob {
    int32_t id = 0;
    std::string bytes;
    float logprob = 0.0f;
    bool has_logprob = true;  // false for the first prompt token (nothing predicts it)
    std::vector<TopLogprob> top;
};

// What the worker knows once the prompt is accepted.
struct PromptInfo {
    int prompt_tokens = 0;
    std::string text;                    // echo: the prompt as text
    std::vector<TokenLogprob> logprobs;  // echo with logprobs: one per prompt token
};

// A piece of output: text that became final, and the tokens decoded since
// the last delta (with log-probabilities when asked for).
// A tool call whose header the model finished writing (K3): announced to
// streaming clients before its arguments are complete.
struct CallStart {
    int index = 0;  // 0-based position in tool_calls
    std::string id, name;
};

struct Delta {
    int choice = 0;         // n > 1: which choice
    std::string text;       // content
    std::string reasoning;  // K3's think channel
    std::vector<CallStart> calls;
    std::vector<TokenLogprob> tokens;
};

struct GenResult {
    std::string finish_reason;  // "stop", "length" or "tool_calls"
    int prompt_tokens = 0;
    int cached_tokens = 0;  // prompt tokens the session held and did not evaluate again
    int completion_tokens = 0;
    int reasoning_tokens = -1;  // K3: tokens generated in the think channel; -1: not reported
    // K3 chat: the whole OpenAI message (content, reasoning_content,
    // tool_calls), null otherwise.
    nlohmann::ordered_json message;
    // /tokenize and /detokenize; completions: the generated ids.
    std::vector<int32_t> tokens;
    bool no_tokenizer = false;  // completions then carry token_ids, not text
    std::vector<std::string> pieces;
    std::string text;
    // The engine's counters after the request (have_engine: the model has them).
    bool have_engine = false;
    EngineStats engine;
    // n > 1: every choice's result (this one's usage sums them; the prompt
    // counts once).
    std::vector<GenResult> choices;
};

class GenObserver {
public:
    virtual ~GenObserver() = default;
    virtual void on_prompt(PromptInfo info) = 0;
    virtual void on_delta(Delta d) = 0;
    // Polled once per token: true stops the generation (client went away).
    virtual bool cancelled() = 0;
};

// Runs req on model. Returns false with *err when the request cannot run
// (a bad token id, a prompt over the context, an engine failure), or when it
// was cancelled (then err->status is 499, which is never sent).
bool generate(Model &model, const GenRequest &req, std::chrono::steady_clock::time_point deadline,
              GenObserver &obs, GenResult *res, ApiError *err);

// Log-softmax of logits into lp (n values); returns nothing on empty input.
void log_softmax(const float *logits, int32_t n, std::vector<float> *lp);

// The longest suffix of text that is a proper prefix of some stop string:
// that much text must be held back, since the next token may complete it.
size_t stop_holdback(std::string_view text, const std::vector<std::string> &stops);

}  // namespace sluice::server
