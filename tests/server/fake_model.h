// A small scripted Model for the server tests: byte tokens, a few control
// tokens with Kimi-style chat markup, and logits that make the model "say"
// a script. It records what it was fed, so tests can check the prompt ids,
// and can be slowed down to exercise the queue.
#pragma once
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "grammar/constraint.h"
#include "grammar/json_schema.h"
#include "sample/sample.h"
#include "server/model.h"

namespace fake {

using namespace sluice::server;

enum : int32_t {
    kBos = 256,
    kEos = 257,
    kImEnd = 258,
    kImUser = 259,
    kImAssistant = 260,
    kImSystem = 261,
    kImMiddle = 262,
    // K3's XTML markers: markup only when the fake speaks XTML (xtml = true).
    kOpen = 263,
    kClose = 264,
    kSep = 265,
    kEndMsg = 266,
    kVocab = 267,
};

inline const char *special_text(int32_t id) {
    switch (id) {
    case kBos: return "<|bos|>";
    case kEos: return "<|eos|>";
    case kImEnd: return "<|im_end|>";
    case kImUser: return "<|im_user|>";
    case kImAssistant: return "<|im_assistant|>";
    case kImSystem: return "<|im_system|>";
    case kImMiddle: return "<|im_middle|>";
    case kOpen: return "<|open|>";
    case kClose: return "<|close|>";
    case kSep: return "<|sep|>";
    case kEndMsg: return "<|end_of_msg|>";
    default: return "";
    }
}

class FakeDetok final : public Detokenizer {
public:
    std::string push(int32_t id) override {
        if (id >= 256) return special_text(id);
        held_.push_back((char)id);
        // Release the longest prefix that ends on a character boundary.
        size_t cut = held_.size();
        for (size_t back = 1; back <= std::min<size_t>(3, held_.size()); back++) {
            unsigned char c = (unsigned char)held_[held_.size() - back];
            if ((c & 0xC0) == 0x80) continue;
            size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            if (need > back) cut = held_.size() - back;
            break;
        }
        std::string out = held_.substr(0, cut);
        held_.erase(0, cut);
        return out;
    }
    std::string flush() override {
        std::string out;
        out.swap(held_);
        return out;
    }

private:
    std::string held_;
};

class FakeSampler final : public Sampler {
public:
    explicit FakeSampler(const SamplingParams &p) : p_(p), rng_(p.seed) {}
    int32_t sample(const float *logits, int32_t n, const std::vector<int32_t> &) override {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (logits[i] > logits[best]) best = i;
        if (p_.temperature <= 0.0f) return best;
        std::vector<double> w((size_t)n);
        for (int32_t i = 0; i < n; i++) w[(size_t)i] = std::exp((logits[i] - logits[best]) / p_.temperature);
        return (int32_t)std::discrete_distribution<int32_t>(w.begin(), w.end())(rng_);
    }

private:
    SamplingParams p_;
    std::mt19937_64 rng_;
};

// Constrained decoding on the fake's vocabulary (a token per byte, control
// tokens never in the grammar), through src/grammar as the engine's C API
// does it, so the generation loop's structured answers run end to end.
class FakeConstrainedSampler final : public Sampler {
public:
    FakeConstrainedSampler(const SamplingParams &p, std::shared_ptr<sluice::grammar::GrammarConstraint> c)
        : s_(params(p)), c_(std::move(c)) {
        s_.set_constraint(c_);
    }
    int32_t sample(const float *logits, int32_t n, const std::vector<int32_t> &history) override {
        return s_.sample(std::span<const float>(logits, (size_t)n), history);
    }
    void set_draw_limit(int32_t draws) override { c_->set_draw_limit(draws); }
    int32_t draws_to_finish() const override { return c_->draws_to_finish(); }

private:
    static sluice::sample::Params params(const SamplingParams &p) {
        sluice::sample::Params q;
        q.temperature = p.temperature;
        q.top_k = p.top_k;
        q.top_p = p.top_p;
        q.min_p = p.min_p;
        q.seed = p.seed;
        return q;
    }
    sluice::sample::Sampler s_;
    std::shared_ptr<sluice::grammar::GrammarConstraint> c_;
};

class FakeModel final : public Model {
public:
    // script: what the model says after any prompt, token by token, cycling.
    explicit FakeModel(std::string script = "Hello, world! ", int32_t context = 512) : context_(context) {
        set_script(script);
    }
    void set_script(const std::string &s, bool end_with_eos = false) {
        std::lock_guard<std::mutex> lk(mu_);
        script_.clear();
        for (unsigned char c : s) script_.push_back(c);
        if (end_with_eos) script_.push_back(kEos);
    }
    // The script as token ids (markers included).
    void set_script_ids(const std::vector<int32_t> &ids) {
        std::lock_guard<std::mutex> lk(mu_);
        script_ = ids;
    }
    std::atomic<int> delay_ms{0};  // per eval call
    bool xtml = false;             // the XTML markers are special tokens (a K3-like model)
    std::atomic<int> evals{0};

    std::vector<int32_t> last_prompt() {
        std::lock_guard<std::mutex> lk(mu_);
        return last_prompt_;
    }

    int32_t vocab() const override { return kVocab; }
    int32_t context() const override { return context_; }
    int32_t eos() const override { return kEos; }
    int32_t bos() const override { return kBos; }
    bool is_control(int32_t id) const override { return id >= 256 && id < kVocab; }
    int32_t chat_stop_token() override { return xtml ? kEndMsg : kImEnd; }

    bool tokenize(std::string_view text, std::vector<int32_t> *out, std::string *) override {
        out->clear();
        for (unsigned char c : text) out->push_back(c);
        return true;
    }
    bool tokenize_markup(std::string_view text, std::vector<int32_t> *out, std::string *) override {
        out->clear();
        for (size_t i = 0; i < text.size();) {
            int32_t hit = -1;
            for (int32_t id = 256; id < kVocab && hit < 0; id++) {
                if (!xtml && id >= kOpen) break;
                std::string_view sp = special_text(id);
                if (!sp.empty() && text.substr(i, sp.size()) == sp) hit = id;
            }
            if (hit >= 0) {
                out->push_back(hit);
                i += std::string_view(special_text(hit)).size();
            } else {
                out->push_back((unsigned char)text[i++]);
            }
        }
        return true;
    }
    bool chat_render(const std::vector<ChatMessage> &msgs, std::vector<int32_t> *out, std::string *err) override {
        out->clear();
        auto bytes = [&](const std::string &s) {
            for (unsigned char c : s) out->push_back(c);
        };
        for (const ChatMessage &m : msgs) {
            out->push_back(m.role == "user" ? kImUser : m.role == "system" ? kImSystem : kImAssistant);
            bytes(m.role);
            out->push_back(kImMiddle);
            bytes(m.content);  // content mode: bytes only, never a control id
            out->push_back(kImEnd);
        }
        out->push_back(kImAssistant);
        bytes("assistant");
        out->push_back(kImMiddle);
        return true;
    }
    std::string token_bytes(int32_t id) override {
        if (id < 0 || id >= kVocab) return {};
        return id < 256 ? std::string(1, (char)id) : std::string(special_text(id));
    }
    std::unique_ptr<Detokenizer> new_detokenizer() override { return std::make_unique<FakeDetok>(); }
    std::unique_ptr<Sampler> new_sampler(const SamplingParams &p, std::string *err) override {
        (p.constrained ? last_constrained : last_sampling) = p;
        if (!p.constrained) return std::make_unique<FakeSampler>(p);
        using namespace sluice::grammar;
        auto g = std::make_shared<Grammar>();
        if (p.json_schema.empty()) *g = any_json_object(Limits{});
        else if (!compile_json_schema(p.json_schema, Limits{}, g.get(), err)) return nullptr;
        std::vector<std::string> bytes((size_t)kVocab);
        std::vector<bool> usable((size_t)kVocab, false);
        for (int32_t i = 0; i < 256; i++) bytes[(size_t)i] = std::string(1, (char)i), usable[(size_t)i] = true;
        auto table = std::make_shared<TokenTable>(std::move(bytes), usable);
        std::vector<int32_t> end = p.end_tokens;
        if (end.empty()) end.push_back(kEos);
        return std::make_unique<FakeConstrainedSampler>(
            p, std::make_shared<GrammarConstraint>(std::move(g), std::move(table), std::move(end)));
    }
    SamplingParams last_sampling;     // what the last request asked for
    SamplingParams last_constrained;  // the last constrained sampler's (response_format, tool arguments)

    bool reset(std::string *) override {
        std::lock_guard<std::mutex> lk(mu_);
        fed_.clear();
        prompt_end_ = -1;
        return true;
    }
    bool eval(const int32_t *ids, size_t n, float *logits, std::string *err) override {
        if (!feed(ids, n, err)) return false;
        std::lock_guard<std::mutex> lk(mu_);
        if (prompt_end_ < 0) {
            prompt_end_ = (int)fed_.size();
            last_prompt_ = fed_;
        }
        fill_logits(logits);
        return true;
    }
    bool eval_all(const int32_t *ids, size_t n, float *logits, std::string *err) override {
        if (!feed(ids, n, err)) return false;
        std::lock_guard<std::mutex> lk(mu_);
        // Scoring a prompt: every row prefers the next script token, except
        // the last, which starts the script (as after a prompt).
        prompt_end_ = (int)fed_.size();
        last_prompt_ = fed_;
        for (size_t r = 0; r < n; r++) fill_row(logits + r * kVocab, 0);
        return true;
    }

private:
    bool feed(const int32_t *ids, size_t n, std::string *err) {
        evals++;
        if (int d = delay_ms.load()) std::this_thread::sleep_for(std::chrono::milliseconds(d));
        std::lock_guard<std::mutex> lk(mu_);
        if ((int)(fed_.size() + n) > context_) return *err = "past the context", false;
        fed_.insert(fed_.end(), ids, ids + n);
        return true;
    }
    void fill_row(float *row, size_t k) {
        for (int32_t i = 0; i < kVocab; i++) row[i] = 0.0f;
        row[int{' '}] = 2.0f;  // a second choice, for top_logprobs
        row[script_[k % script_.size()]] = 10.0f;
    }
    void fill_logits(float *logits) { fill_row(logits, (size_t)((int)fed_.size() - prompt_end_)); }

    std::mutex mu_;
    int32_t context_;
    std::vector<int32_t> script_, fed_, last_prompt_;
    int prompt_end_ = -1;
};

}  // namespace fake
