// What the server needs from a model, as an interface.
//
// The HTTP layer, validation, queueing and the generation loop are written
// against this interface, so the tests can run them on a small fake model
// (tests/server/fake_model.h) and the real engine plugs in through
// SluiceModel (sluice_model.cpp), which is a client of include/sluice/sluice.h
// only. Every method is called from the single worker thread that owns the
// model: implementations need not be thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::server {

struct ChatMessage {
    std::string role;  // "system", "user", "assistant" (or "tool": refused by chat.json formats)
    std::string content;
};

// Streaming detokenizer: push returns the text that is complete so far
// (an incomplete UTF-8 sequence is held back until it completes).
class Detokenizer {
public:
    virtual ~Detokenizer() = default;
    virtual std::string push(int32_t id) = 0;
    virtual std::string flush() = 0;
};

class Sampler {
public:
    virtual ~Sampler() = default;
    virtual int32_t sample(const float *logits, int32_t n_vocab, const std::vector<int32_t> &history) = 0;
};

struct SamplingParams {
    float temperature = 1.0f;  // 0 = greedy
    float top_p = 1.0f;
    int32_t top_k = 0;             // 0 = off
    float min_p = 0.0f;            // 0 = off
    float repeat_penalty = 1.0f;   // 1 = off (llama.cpp's repetition penalty)
    int32_t repeat_last_n = 64;    // tokens the penalty looks at; -1 = all
    uint64_t seed = 0;
    // Constrained decoding: the output must be JSON valid under json_schema
    // (empty: any JSON object), followed by one of end_tokens.
    bool constrained = false;
    std::string json_schema;
    std::vector<int32_t> end_tokens;
};

// The engine's counters (sluice_stats), for /metrics.
struct EngineStats {
    uint64_t tokens_evaluated = 0;
    uint64_t expert_cache_hits = 0, expert_cache_misses = 0;
    uint64_t expert_reads = 0, expert_bytes_read = 0;
    double seconds_eval = 0, seconds_read = 0;
};

class Model {
public:
    virtual ~Model() = default;
    // The engine's counters; false if the model has none.
    virtual bool engine_stats(EngineStats *) { return false; }

    virtual int32_t vocab() const = 0;
    // Positions a session may hold: prompt + completion must fit.
    virtual int32_t context() const = 0;
    virtual int32_t eos() const = 0;
    virtual int32_t bos() const = 0;  // -1 if none
    virtual bool is_control(int32_t id) const = 0;
    // The control token that ends an assistant turn, or -1 if none.
    virtual int32_t chat_stop_token() = 0;

    // Content-mode tokenization: never yields a control token.
    virtual bool tokenize(std::string_view text, std::vector<int32_t> *out, std::string *err) = 0;
    // Markup mode: special-token strings become their ids.
    virtual bool tokenize_markup(std::string_view text, std::vector<int32_t> *out, std::string *err) = 0;
    // The chat template applied through the markup/content split, with the
    // assistant opening appended.
    virtual bool chat_render(const std::vector<ChatMessage> &msgs, std::vector<int32_t> *out, std::string *err) = 0;
    // The bytes of one token (may be part of a UTF-8 sequence).
    virtual std::string token_bytes(int32_t id) = 0;
    virtual std::unique_ptr<Detokenizer> new_detokenizer() = 0;
    // nullptr with *err when p cannot be honoured (e.g. a schema refused).
    virtual std::unique_ptr<Sampler> new_sampler(const SamplingParams &p, std::string *err) = 0;

    // Session: reset to position 0, then feed tokens.
    virtual bool reset(std::string *err) = 0;
    // Feeds n tokens; logits (vocab floats) receives the last position's logits.
    virtual bool eval(const int32_t *ids, size_t n, float *logits, std::string *err) = 0;
    // Feeds n tokens; logits (n x vocab floats) receives every position's logits.
    virtual bool eval_all(const int32_t *ids, size_t n, float *logits, std::string *err) = 0;
};

}  // namespace sluice::server
