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

#include "server/session_shelf.h"

namespace sluice::server {

// One part of a content array: text, or an image (images.h resolves its
// reference to bytes before the request is queued).
struct ContentPart {
    bool image = false;
    std::string text;   // text part
    std::string url;    // image part: the reference as sent (data:, file:, a path)
    std::string bytes;  // image part: the file's bytes, once resolved
};

struct ChatMessage {
    std::string role;  // "system", "user", "assistant" (or "tool": refused by chat.json formats)
    std::string content;
    // Set only when the content array has an image part; then every part,
    // text included, is here in order (and content holds the text parts).
    std::vector<ContentPart> parts;
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
    // Constrained samplers (finish-now): the value and its end token must
    // fit in `draws` more draws, the next one included. Others ignore it.
    virtual void set_draw_limit(int32_t draws) { (void)draws; }
    // Constrained: the fewest draws that end the value, end token included;
    // -1 for an unconstrained sampler.
    virtual int32_t draws_to_finish() const { return -1; }
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
    uint64_t rewind_tokens_reevaluated = 0;  // prompt reuse: tokens a rewind evaluated again
    uint64_t rewind_tokens_replayed = 0;     // and positions it replayed from the KDA replay log instead
    uint64_t expert_cache_hits = 0, expert_cache_misses = 0;
    uint64_t expert_reads = 0, expert_bytes_read = 0;
    double seconds_eval = 0, seconds_read = 0;
    ShelfStats sessions;  // conversations kept aside (session_shelf.h)
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
    // Prompt reuse (include/sluice/sluice.h, sluice_rewind): the tokens the
    // session holds (-1: a position no prompt matches), keeping only the
    // first n of them (*again: how many of those it evaluated again, from a
    // checkpoint), and a checkpoint at the end of a prompt. A model without
    // them (false) is reset before every prompt.
    virtual bool session_tokens(std::vector<int32_t> *out) {
        out->clear();
        return false;
    }
    virtual bool rewind(size_t n, size_t *again, std::string *err) {
        (void)n;
        *again = 0;
        *err = "this model cannot rewind";
        return false;
    }
    // pos >= the session's length: taken as the coming evals pass it.
    virtual void checkpoint_at(size_t pos) { (void)pos; }
    // Prompt reuse across conversations (session_shelf.h): the sessions
    // kept aside and the policy over them; null where the model keeps none.
    virtual Keeper *keeper() { return nullptr; }
    virtual SessionShelf *shelf() { return nullptr; }
    // Feeds n tokens; logits (vocab floats) receives the last position's logits.
    virtual bool eval(const int32_t *ids, size_t n, float *logits, std::string *err) = 0;
    // Feeds n tokens; logits (n x vocab floats) receives every position's logits.
    virtual bool eval_all(const int32_t *ids, size_t n, float *logits, std::string *err) = 0;

    // A conversation with image parts (K3's vision tower, VISION.md §9):
    // encodes the images in order, renders each as its media block, and
    // expands the prompt; the next eval splices the images in. On failure
    // *code is an OpenAI error code and nothing stays queued. The default
    // is a model that takes text only.
    virtual bool chat_render_images(const std::vector<ChatMessage> &msgs, std::vector<int32_t> *out,
                                    std::string *err, std::string *code) {
        *code = "vision_unsupported";
        *err = "this model takes text only";
        return false;
    }

    // K3's XTML path (CHAT_K3.md §7): encodes the images of the conversation
    // in order, as chat_render_images does, but leaves the rendering to the
    // caller: *blocks gets each image's media block (markup text, with its
    // source dimensions) for the XTML renderer to place. Same refusals and
    // codes; on failure nothing stays queued.
    virtual bool encode_images(const std::vector<ChatMessage> &msgs, std::vector<std::string> *blocks,
                               std::string *err, std::string *code) {
        (void)msgs;
        blocks->clear();
        *code = "vision_unsupported";
        *err = "this model takes text only";
        return false;
    }
    // The tokenized prompt with each media pad replaced by its queued
    // image's run of pads (VISION.md §6.2).
    virtual bool expand_images(const std::vector<int32_t> &in, std::vector<int32_t> *out, std::string *err) {
        (void)in;
        out->clear();
        *err = "this model takes text only";
        return false;
    }
    // Drops queued images: a request never inherits another's.
    virtual void clear_images() {}
};

}  // namespace sluice::server
