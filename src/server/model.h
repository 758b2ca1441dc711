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

// One part of a content array: text, or an image (images.h resolves its
// reference to bytes before the request is queued).
struct ContentPart {
    bool image = false;
    std::string text;   // text part
    std::string url;    // image part: the reference as sent (data:, file:, a path)
    std::string bytes;  // image part: the file's bytes, once resolved
};

struct ChatMessage {
    std::string role;  // "system", "user" or "assistant"
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
};

struct SamplingParams {
    float temperature = 1.0f;  // 0 = greedy
    float top_p = 1.0f;
    uint64_t seed = 0;
};

class Model {
public:
    virtual ~Model() = default;

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
    // The chat template applied through the markup/content split, with the
    // assistant opening appended.
    virtual bool chat_render(const std::vector<ChatMessage> &msgs, std::vector<int32_t> *out, std::string *err) = 0;
    // The bytes of one token (may be part of a UTF-8 sequence).
    virtual std::string token_bytes(int32_t id) = 0;
    virtual std::unique_ptr<Detokenizer> new_detokenizer() = 0;
    virtual std::unique_ptr<Sampler> new_sampler(const SamplingParams &p) = 0;

    // Session: reset to position 0, then feed tokens.
    virtual bool reset(std::string *err) = 0;
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
};

}  // namespace sluice::server
