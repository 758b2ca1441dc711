// The server's Model on the public C API (see sluice_model.h).
#include "server/sluice_model.h"

#include <algorithm>
#include <vector>

namespace sluice::server {

namespace {

std::string describe(sluice_ctx *ctx, sluice_status st) {
    return std::string(sluice_status_name(st)) + ": " + sluice_last_error(ctx);
}

// The C API's fill-or-report-size convention: call with a guess, and again
// with the size it asked for if the guess was short.
template <class T, class Fn>
sluice_status fill(std::vector<T> *out, size_t guess, Fn fn) {
    out->resize(std::max<size_t>(guess, 1));
    size_t n = 0;
    sluice_status st = fn(out->data(), out->size(), &n);
    if (st == SLUICE_E_RANGE && n > out->size()) {
        out->resize(n);
        st = fn(out->data(), out->size(), &n);
    }
    out->resize(st == SLUICE_OK ? n : 0);
    return st;
}

class CDetok final : public Detokenizer {
public:
    explicit CDetok(sluice_detok *d) : d_(d) {}
    ~CDetok() override { sluice_detok_free(d_); }
    std::string push(int32_t id) override {
        return run([&](char *b, size_t cap, size_t *n) { return sluice_detok_push(d_, id, b, cap, n); });
    }
    std::string flush() override {
        return run([&](char *b, size_t cap, size_t *n) { return sluice_detok_flush(d_, b, cap, n); });
    }

private:
    template <class Fn>
    std::string run(Fn fn) {
        std::vector<char> buf;
        // A short buffer leaves the detokenizer as it was (sluice.h), so the
        // retry sees the same state.
        if (fill(&buf, 64, fn) != SLUICE_OK) return {};
        return std::string(buf.begin(), buf.end());
    }
    sluice_detok *d_;
};

class CSampler final : public Sampler {
public:
    explicit CSampler(sluice_sampler *s) : s_(s) {}
    ~CSampler() override { sluice_sampler_free(s_); }
    int32_t sample(const float *logits, int32_t n_vocab, const std::vector<int32_t> &history) override {
        return sluice_sampler_sample(s_, logits, n_vocab, history.data(), history.size());
    }
    void set_draw_limit(int32_t draws) override { sluice_sampler_set_draw_limit(s_, draws); }
    int32_t draws_to_finish() const override { return sluice_sampler_draws_to_finish(s_); }

private:
    sluice_sampler *s_;
};

// A session kept aside (sluice_session_save), for the shelf.
struct KeptSluiceSession final : Keeper::Kept {
    sluice_session *s = nullptr;
    ~KeptSluiceSession() override { sluice_session_free(s); }
};

class SluiceModel final : public Model, public Keeper {
public:
    SluiceModel(sluice_ctx *ctx, bool vision) : ctx_(ctx), vision_(vision) {
        vocab_ = sluice_n_vocab(ctx_);
        sluice_memory_plan p;
        const bool planned = sluice_memory_plan_get(ctx_, &p) == SLUICE_OK;
        context_ = planned && p.context > 0 ? p.context : 4096;
        keeps_ = planned && p.sessions > 0;
        piece_.resize((size_t)std::max(vocab_, 0));
        have_piece_.assign((size_t)std::max(vocab_, 0), false);
    }
    ~SluiceModel() override { sluice_close(ctx_); }

    int32_t vocab() const override { return vocab_; }
    int32_t context() const override { return context_; }
    int32_t eos() const override { return sluice_token_eos(ctx_); }
    int32_t bos() const override { return sluice_token_bos(ctx_); }
    bool is_control(int32_t id) const override { return sluice_token_is_control(ctx_, id) != 0; }

    int32_t chat_stop_token() override {
        if (!stop_known_) stop_ = sluice_chat_stop_token(ctx_), stop_known_ = true;
        return stop_;
    }

    bool tokenize(std::string_view text, std::vector<int32_t> *out, std::string *err) override {
        sluice_status st = fill(out, text.size() + 16, [&](int32_t *o, size_t cap, size_t *n) {
            return sluice_tokenize(ctx_, text.data(), text.size(), o, cap, n);
        });
        if (st != SLUICE_OK) return *err = describe(ctx_, st), false;
        return true;
    }

    bool tokenize_markup(std::string_view text, std::vector<int32_t> *out, std::string *err) override {
        sluice_status st = fill(out, text.size() + 16, [&](int32_t *o, size_t cap, size_t *n) {
            return sluice_tokenize_markup(ctx_, text.data(), text.size(), o, cap, n);
        });
        if (st != SLUICE_OK) return *err = describe(ctx_, st), false;
        return true;
    }

    bool chat_render(const std::vector<ChatMessage> &msgs, std::vector<int32_t> *out, std::string *err) override {
        std::vector<sluice_chat_message> cm;
        size_t bytes = 64;
        for (const ChatMessage &m : msgs) {
            cm.push_back(sluice_chat_message{m.role.c_str(), m.content.c_str()});
            bytes += m.content.size() + 16;
        }
        // Content with a NUL byte would be cut short by the C strings.
        for (const ChatMessage &m : msgs)
            if (m.content.find('\0') != std::string::npos)
                return *err = "message content contains a NUL character", false;
        // A text request never inherits images an earlier request left queued.
        sluice_image_clear(ctx_);
        sluice_status st = fill(out, bytes, [&](int32_t *o, size_t cap, size_t *n) {
            return sluice_chat_render(ctx_, cm.data(), cm.size(), 1, o, cap, n);
        });
        if (st != SLUICE_OK) return *err = describe(ctx_, st), false;
        return true;
    }

    bool chat_render_images(const std::vector<ChatMessage> &msgs, std::vector<int32_t> *out, std::string *err,
                            std::string *code) override {
        sluice_image_clear(ctx_);
        if (!vision_ready(err, code)) return false;
        bool ok = render_images(msgs, out, err, code);
        if (!ok) sluice_image_clear(ctx_);  // nothing stays queued
        return ok;
    }

    bool encode_images(const std::vector<ChatMessage> &msgs, std::vector<std::string> *blocks, std::string *err,
                       std::string *code) override {
        sluice_image_clear(ctx_);
        blocks->clear();
        if (!vision_ready(err, code)) return false;
        bool ok = encode_all(msgs, blocks, err, code);
        if (!ok) sluice_image_clear(ctx_);  // nothing stays queued
        return ok;
    }

    bool expand_images(const std::vector<int32_t> &in, std::vector<int32_t> *out, std::string *err) override {
        sluice_status st = fill(out, in.size() + 1024, [&](int32_t *o, size_t cap, size_t *n) {
            return sluice_image_expand(ctx_, in.data(), in.size(), o, cap, n);
        });
        if (st != SLUICE_OK) return *err = describe(ctx_, st), false;
        return true;
    }

    void clear_images() override { sluice_image_clear(ctx_); }

    std::string token_bytes(int32_t id) override {
        if (id < 0 || id >= vocab_) return {};
        if (!have_piece_[(size_t)id]) {
            std::vector<char> buf;
            fill(&buf, 32, [&](char *o, size_t cap, size_t *n) { return sluice_detokenize(ctx_, &id, 1, o, cap, n); });
            piece_[(size_t)id].assign(buf.begin(), buf.end());
            have_piece_[(size_t)id] = true;
        }
        return piece_[(size_t)id];
    }

    std::unique_ptr<Detokenizer> new_detokenizer() override {
        sluice_detok *d = sluice_detok_new(ctx_);
        return d ? std::make_unique<CDetok>(d) : nullptr;
    }

    std::unique_ptr<Sampler> new_sampler(const SamplingParams &p, std::string *err) override {
        sluice_sampling sp;
        sluice_sampling_default(&sp);
        sp.temperature = p.temperature;
        sp.top_p = p.top_p;
        sp.top_k = p.top_k;
        sp.min_p = p.min_p;
        sp.repeat_penalty = p.repeat_penalty;
        sp.repeat_last_n = p.repeat_last_n;
        sp.seed = p.seed;
        sluice_sampler *s = sluice_sampler_new(&sp);
        if (!s) return *err = "invalid sampling parameters", nullptr;
        if (p.constrained) {
            sluice_status st = sluice_sampler_set_json_schema(s, ctx_, p.json_schema.data(), p.json_schema.size(),
                                                              p.end_tokens.data(), p.end_tokens.size());
            if (st != SLUICE_OK) {
                *err = describe(ctx_, st);
                sluice_sampler_free(s);
                return nullptr;
            }
        }
        return std::make_unique<CSampler>(s);
    }

    bool engine_stats(EngineStats *out) override {
        sluice_stats s{};
        if (sluice_stats_get(ctx_, &s) != SLUICE_OK) return false;
        out->tokens_evaluated = s.tokens_evaluated;
        out->rewind_tokens_reevaluated = s.rewind_tokens_reevaluated;
        out->rewind_tokens_replayed = s.rewind_tokens_replayed;
        out->sessions = shelf_.stats();
        out->expert_cache_hits = s.expert_cache_hits;
        out->expert_cache_misses = s.expert_cache_misses;
        out->expert_reads = s.expert_reads;
        out->expert_bytes_read = s.expert_bytes_read;
        out->seconds_eval = s.seconds_eval;
        out->seconds_read = s.seconds_read;
        return true;
    }

    bool reset(std::string *err) override {
        sluice_status st = sluice_reset(ctx_);
        if (st != SLUICE_OK) return *err = describe(ctx_, st), false;
        return true;
    }
    bool session_tokens(std::vector<int32_t> *out) override {
        const sluice_status st = fill(out, (size_t)std::max(sluice_n_past(ctx_), 1),
                                      [&](int32_t *o, size_t cap, size_t *n) {
                                          return sluice_session_tokens(ctx_, o, cap, n);
                                      });
        return st == SLUICE_OK;
    }
    bool rewind(size_t n, size_t *again, std::string *err) override {
        sluice_stats before{}, after{};
        *again = 0;
        const bool counted = sluice_stats_get(ctx_, &before) == SLUICE_OK;
        sluice_status st = sluice_rewind(ctx_, (int32_t)n);
        if (st != SLUICE_OK) return *err = describe(ctx_, st), false;
        if (counted && sluice_stats_get(ctx_, &after) == SLUICE_OK)
            *again = (size_t)(after.rewind_tokens_reevaluated - before.rewind_tokens_reevaluated);
        return true;
    }
    void checkpoint_at(size_t pos) override { sluice_checkpoint_at(ctx_, (int32_t)pos); }
    Keeper *keeper() override { return keeps_ ? this : nullptr; }
    SessionShelf *shelf() override { return keeps_ ? &shelf_ : nullptr; }
    std::unique_ptr<Kept> keep(bool *full) override {
        auto k = std::make_unique<KeptSluiceSession>();
        const sluice_status st = sluice_session_save(ctx_, &k->s);
        *full = st == SLUICE_E_NOMEM;
        if (st != SLUICE_OK) return nullptr;
        size_t n = 0;
        k->tokens.resize((size_t)std::max(sluice_n_past(ctx_), 0));
        if (sluice_session_saved_tokens(k->s, k->tokens.data(), k->tokens.size(), &n) != SLUICE_OK) return nullptr;
        k->tokens.resize(n);
        k->bytes = sluice_session_bytes(k->s);
        return k;
    }
    bool resume(const Kept &k) override {
        return sluice_session_restore(ctx_, static_cast<const KeptSluiceSession &>(k).s) == SLUICE_OK;
    }
    bool eval(const int32_t *ids, size_t n, float *logits, std::string *err) override {
        sluice_status st = sluice_eval(ctx_, ids, n, logits);
        if (st != SLUICE_OK) return *err = describe(ctx_, st), false;
        return true;
    }
    bool eval_all(const int32_t *ids, size_t n, float *logits, std::string *err) override {
        sluice_status st = sluice_eval_all(ctx_, ids, n, logits);
        if (st != SLUICE_OK) return *err = describe(ctx_, st), false;
        return true;
    }

private:
    // Queues one image part's picture (encoded now) and gives its source
    // dimensions, which its media block names (VISION.md §6.1).
    bool add_image(const ContentPart &p, size_t msg, int k, int32_t *w, int32_t *h, std::string *err,
                   std::string *code) {
        const std::string name = "messages[" + std::to_string(msg) + "] image " + std::to_string(k);
        int32_t n = 0;
        sluice_status st = sluice_image_add_memory(ctx_, p.bytes.data(), p.bytes.size(), name.c_str(), &n);
        if (st == SLUICE_OK) st = sluice_image_dimensions_memory(p.bytes.data(), p.bytes.size(), w, h);
        if (st != SLUICE_OK) {
            *code = st == SLUICE_E_IO ? "invalid_image" : st == SLUICE_E_ARG ? "too_many_images" : "vision_error";
            return *err = describe(ctx_, st), false;
        }
        return true;
    }

    // The refusals both image paths share: no --vision, no tower.
    bool vision_ready(std::string *err, std::string *code) {
        if (!vision_)
            return *code = "vision_disabled",
                   *err = "this server was started without the vision tower; restart it with --vision to accept "
                          "images",
                   false;
        sluice_memory_plan plan;
        if (sluice_memory_plan_get(ctx_, &plan) != SLUICE_OK || plan.vision == 0)
            return *code = "vision_unsupported", *err = "this model has no vision tower", false;
        return true;
    }

    bool encode_all(const std::vector<ChatMessage> &msgs, std::vector<std::string> *blocks, std::string *err,
                    std::string *code) {
        // The tokenizer must know the four media markers, or the blocks
        // would tokenize as text and nothing would take the image rows.
        std::vector<int32_t> probe;
        sluice_status st = fill(&probe, 16, [&](int32_t *o, size_t cap, size_t *n) {
            return sluice_image_block(ctx_, 1, 1, o, cap, n);
        });
        if (st == SLUICE_E_UNSUPPORTED)
            return *code = "images_unsupported_chat_format",
                   *err = "this model's tokenizer has no media markers: " + describe(ctx_, st), false;
        if (st != SLUICE_OK) return *code = "vision_error", *err = describe(ctx_, st), false;
        int k = 0;
        for (size_t i = 0; i < msgs.size(); i++)
            for (const ContentPart &p : msgs[i].parts) {
                if (!p.image) continue;
                int32_t w = 0, h = 0;
                if (!add_image(p, i, k++, &w, &h, err, code)) return false;
                blocks->push_back("<|media_begin|>image " + std::to_string(w) + "x" + std::to_string(h) +
                                  "<|media_content|><|media_pad|><|media_end|>");
            }
        return true;
    }

    bool render_images(const std::vector<ChatMessage> &msgs, std::vector<int32_t> *out, std::string *err,
                       std::string *code) {
        // Encode every image in conversation order, then render each as its
        // media block where its part sits (CHAT_K3.md §7).
        std::vector<std::vector<sluice_chat_part>> parts(msgs.size());
        std::vector<sluice_chat_message_parts> pm;
        int k = 0;
        for (size_t i = 0; i < msgs.size(); i++) {
            const ChatMessage &m = msgs[i];
            if (m.parts.empty()) {
                if (m.content.find('\0') != std::string::npos)
                    return *code = "invalid_request", *err = "message content contains a NUL character", false;
                parts[i].push_back({m.content.data(), m.content.size(), 0, 0});
            }
            for (const ContentPart &p : m.parts) {
                if (!p.image) {
                    parts[i].push_back({p.text.data(), p.text.size(), 0, 0});
                    continue;
                }
                int32_t w = 0, h = 0;
                if (!add_image(p, i, k++, &w, &h, err, code)) return false;
                parts[i].push_back({nullptr, 0, w, h});
            }
            pm.push_back({m.role.c_str(), parts[i].data(), parts[i].size()});
        }
        std::vector<int32_t> ids;
        sluice_status st = fill(&ids, 256, [&](int32_t *o, size_t cap, size_t *n) {
            return sluice_chat_render_parts(ctx_, pm.data(), pm.size(), 1, o, cap, n);
        });
        if (st == SLUICE_E_UNSUPPORTED)
            return *code = "images_unsupported_chat_format",
                   *err = "this model's chat format has no image markup: " + describe(ctx_, st), false;
        if (st != SLUICE_OK) return *code = "vision_error", *err = describe(ctx_, st), false;
        st = fill(out, ids.size() + 1024, [&](int32_t *o, size_t cap, size_t *n) {
            return sluice_image_expand(ctx_, ids.data(), ids.size(), o, cap, n);
        });
        if (st != SLUICE_OK) return *code = "vision_error", *err = describe(ctx_, st), false;
        return true;
    }

    sluice_ctx *ctx_;
    bool vision_ = false;
    bool keeps_ = false;  // the context may keep sessions aside (sluice_config.session_bytes)
    SessionShelf shelf_;
    int32_t vocab_ = 0, context_ = 0;
    bool stop_known_ = false;
    int32_t stop_ = -1;
    std::vector<std::string> piece_;
    std::vector<bool> have_piece_;
};

}  // namespace

std::unique_ptr<Model> make_sluice_model(sluice_ctx *ctx, bool vision) {
    return std::make_unique<SluiceModel>(ctx, vision);
}

bool sluice_model_check(Model &m, std::string *err) {
    std::vector<int32_t> ids;
    std::string e;
    if (!m.tokenize("hello", &ids, &e))
        return *err = "the container cannot tokenize text (sluice serve needs tokenizer.model): " + e, false;
    if (!m.chat_render({ChatMessage{"user", "hello", {}}}, &ids, &e))
        return *err = "the container has no usable chat template: " + e, false;
    return true;
}

}  // namespace sluice::server
