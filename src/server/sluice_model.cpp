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

private:
    sluice_sampler *s_;
};

class SluiceModel final : public Model {
public:
    explicit SluiceModel(sluice_ctx *ctx) : ctx_(ctx) {
        vocab_ = sluice_n_vocab(ctx_);
        sluice_memory_plan p;
        context_ = sluice_memory_plan_get(ctx_, &p) == SLUICE_OK && p.context > 0 ? p.context : 4096;
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
        sluice_status st = fill(out, bytes, [&](int32_t *o, size_t cap, size_t *n) {
            return sluice_chat_render(ctx_, cm.data(), cm.size(), 1, o, cap, n);
        });
        if (st != SLUICE_OK) return *err = describe(ctx_, st), false;
        return true;
    }

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
    sluice_ctx *ctx_;
    int32_t vocab_ = 0, context_ = 0;
    bool stop_known_ = false;
    int32_t stop_ = -1;
    std::vector<std::string> piece_;
    std::vector<bool> have_piece_;
};

}  // namespace

std::unique_ptr<Model> make_sluice_model(sluice_ctx *ctx) { return std::make_unique<SluiceModel>(ctx); }

bool sluice_model_check(Model &m, std::string *err) {
    std::vector<int32_t> ids;
    std::string e;
    if (!m.tokenize("hello", &ids, &e))
        return *err = "the container cannot tokenize text (sluice serve needs tokenizer.model): " + e, false;
    if (!m.chat_render({ChatMessage{"user", "hello"}}, &ids, &e))
        return *err = "the container has no usable chat template: " + e, false;
    return true;
}

}  // namespace sluice::server
