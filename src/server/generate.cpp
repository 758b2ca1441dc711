// One request's generation (see generate.h).
#include "server/generate.h"
#include "server/images.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "server/chat_request.h"
#include "server/reply_guide.h"
#include "server/xtml_reply.h"

namespace sluice::server {

void log_softmax(const float *logits, int32_t n, std::vector<float> *lp) {
    lp->resize((size_t)std::max(n, 0));
    if (n <= 0) return;
    // In double: a vocabulary of 10^5 terms summed in float loses digits
    // that the reported log-probabilities would show.
    double mx = -INFINITY;
    for (int32_t i = 0; i < n; i++) mx = std::max(mx, (double)logits[i]);
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += std::exp((double)logits[i] - mx);
    const double lse = mx + std::log(sum);
    for (int32_t i = 0; i < n; i++) (*lp)[(size_t)i] = (float)((double)logits[i] - lse);
}

size_t stop_holdback(std::string_view text, const std::vector<std::string> &stops) {
    size_t hold = 0;
    for (const std::string &s : stops) {
        size_t max_k = std::min(text.size(), s.size() - 1);
        for (size_t k = max_k; k > hold; k--)
            if (text.substr(text.size() - k) == std::string_view(s).substr(0, k)) {
                hold = k;
                break;
            }
    }
    return hold;
}

namespace {

ApiError server_error(const std::string &what) {
    ApiError e;
    e.status = 500;
    e.type = "server_error";
    e.message = what;
    return e;
}

ApiError cancelled_error() {
    ApiError e;
    e.status = 499;  // nginx's "client closed request": logged, never sent
    e.type = "cancelled";
    e.message = "the client disconnected";
    return e;
}

// The chosen token's log-probability and the top alternatives.
TokenLogprob token_logprob(Model &m, const std::vector<float> &lp, int32_t id, int top_n,
                           std::vector<int32_t> *order) {
    TokenLogprob t;
    t.id = id;
    t.bytes = m.token_bytes(id);
    t.logprob = lp[(size_t)id];
    const int32_t n = (int32_t)lp.size();
    const int k = std::min(top_n, (int)n);
    if (k > 0) {
        order->resize((size_t)n);
        std::iota(order->begin(), order->end(), 0);
        // Ties go to the lower id, so the list is deterministic.
        std::partial_sort(order->begin(), order->begin() + k, order->end(), [&](int32_t a, int32_t b) {
            return lp[(size_t)a] > lp[(size_t)b] || (lp[(size_t)a] == lp[(size_t)b] && a < b);
        });
        for (int i = 0; i < k; i++) {
            int32_t j = (*order)[(size_t)i];
            t.top.push_back(TopLogprob{j, m.token_bytes(j), lp[(size_t)j]});
        }
    }
    return t;
}

// K3's four XTML markers, when each is one token of the model (then the
// chat is rendered as XTML, CHAT_K3.md §1).
bool xtml_markers(Model &m, Markers *mk) {
    std::vector<int32_t> ids;
    std::string e;
    int32_t *dst[] = {&mk->open, &mk->close, &mk->sep, &mk->end_of_msg};
    const char *text[] = {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"};
    for (int i = 0; i < 4; i++) {
        if (!m.tokenize_markup(text[i], &ids, &e) || ids.size() != 1 || !m.is_control(ids[0])) return false;
        *dst[i] = ids[0];
    }
    return true;
}

// How a chat request's reply is read: K3's XTML parser, or plain text.
struct ChatPlan {
    bool xtml = false;
    Markers mk;
    std::string starts_in;  // "think" or "response"
};

// Builds the prompt ids; false with *err for input the model refuses.
bool build_prompt(Model &m, const GenRequest &req, std::vector<int32_t> *prompt, ChatPlan *plan, ApiError *err) {
    std::string e;
    const int32_t V = m.vocab();
    if (req.kind == Endpoint::chat) {
        if (xtml_markers(m, &plan->mk)) {
            // K3: segments, each tokenized on its own in its mode (§2).
            // Images (VISION.md §9): encoded first, in conversation order;
            // the renderer places each one's media block (a markup segment)
            // where its part sits, and the pads are expanded last.
            std::optional<std::vector<std::string>> blocks;
            if (request_has_images(req)) {
                std::vector<std::string> b;
                std::string code;
                if (!m.encode_images(req.messages, &b, &e, &code))
                    return *err = bad_request("cannot take the images: " + e, "messages", code), false;
                blocks = std::move(b);
            } else {
                m.clear_images();  // a text request never inherits queued images
            }
            // Whatever fails from here leaves no image queued.
            auto refuse = [&](ApiError a) {
                if (blocks) m.clear_images();
                *err = std::move(a);
                return false;
            };
            std::vector<XSegment> segs;
            ApiError re;
            if (!k3_render(req.chat, req.default_thinking, &segs, &plan->starts_in, &re, blocks)) return refuse(re);
            std::vector<int32_t> ids, all;
            for (const XSegment &sg : segs) {
                bool ok = sg.markup ? m.tokenize_markup(sg.text, &ids, &e) : m.tokenize(sg.text, &ids, &e);
                if (!ok) return refuse(bad_request("cannot tokenize the conversation: " + e, "messages"));
                all.insert(all.end(), ids.begin(), ids.end());
            }
            if (!blocks) {
                prompt->insert(prompt->end(), all.begin(), all.end());
            } else if (!m.expand_images(all, prompt, &e)) {
                return refuse(bad_request("cannot take the images: " + e, "messages", "vision_error"));
            }
            plan->xtml = true;
        } else {
            // chat.json formats refuse what they cannot express, images
            // included (VISION.md §9: a 400, not warp's dropped connection).
            if (!chatjson_check(req.chat, err)) return false;
            if (!m.chat_render(req.messages, prompt, &e)) {
                // A container without a chat template (or a tokenizer)
                // still serves /v1/completions with token ids.
                ApiError a = bad_request("cannot render the conversation: " + e, "messages", "unsupported_chat_format");
                return *err = a, false;
            }
        }
    } else if (req.prompt_is_ids) {
        for (size_t i = 0; i < req.prompt_ids.size(); i++) {
            int64_t id = req.prompt_ids[i];
            if (id < 0 || id >= V)
                return *err = bad_request("'prompt[" + std::to_string(i) + "]' is token id " + std::to_string(id) +
                                              ", outside the vocabulary [0, " + std::to_string(V) + ")",
                                          "prompt"),
                       false;
            prompt->push_back((int32_t)id);
        }
    } else if (!m.tokenize(req.prompt_text, prompt, &e)) {
        return *err = bad_request("cannot tokenize the prompt: " + e, "prompt"), false;
    }
    if (prompt->empty()) {
        // An empty prompt starts from BOS, as OpenAI's starts from <|endoftext|>.
        if (m.bos() < 0) return *err = bad_request("the prompt is empty", "prompt"), false;
        prompt->push_back(m.bos());
    }
    return true;
}

// Prompt reuse (cache_prompt): keeps the longest prefix the session shares
// with the prompt, never all of it (the last prompt token is evaluated for
// its logits): *kept is its length, 0 after a reset; *cached the part of it
// not evaluated again (a rewind re-evaluates from the newest checkpoint). Not for a prompt with
// images (a pad token's id does not say which image row it takes) nor for
// echo with logprobs (every prompt token is scored). *reusable: the model
// can rewind and this request takes part.
bool reuse_prefix(Model &m, const GenRequest &req, const std::vector<int32_t> &prompt, bool images, size_t *kept,
                  size_t *cached, bool *reusable, ApiError *err) {
    std::string e;
    *kept = 0;
    *cached = 0;
    *reusable = false;
    if (req.cache_prompt && !images && !(req.echo && req.logprobs)) {
        std::vector<int32_t> have;
        if (m.session_tokens(&have)) {
            *reusable = true;
            // Another conversation kept aside may share more (session_shelf.h).
            if (Keeper *kp = m.keeper(); kp && m.shelf()) m.shelf()->before_prompt(*kp, &have, prompt);
            const size_t k = shared_prefix(have, prompt);
            // A failed rewind (a token it must evaluate again is unknown, an
            // I/O error) falls back to a fresh session.
            size_t again = 0;
            if (k > 0 && m.rewind(k, &again, &e)) {
                *kept = k;
                *cached = k - std::min(k, again);
                return true;
            }
        }
    }
    if (!m.reset(&e)) return *err = server_error("cannot reset the session: " + e), false;
    return true;
}

// Evaluates the prompt from position `from` (the tokens before it are the
// reused prefix), scoring every token when echo + logprobs ask for it
// (then from is 0). logits receives the next-token logits. checkpoint: the
// state before the prompt's last token is kept (Model::checkpoint_at, in the
// same pass): a resent prompt (n > 1, a retry) keeps all but its last token,
// and the next turn of a conversation goes on from there with one token
// evaluated again.
bool eval_prompt(Model &m, const GenRequest &req, const std::vector<int32_t> &prompt, size_t from, bool checkpoint,
                 GenObserver &obs, PromptInfo *info, std::vector<float> *logits, ApiError *err) {
    std::string e;
    const int32_t V = m.vocab();
    if (!(req.echo && req.logprobs)) {
        if (checkpoint) m.checkpoint_at(prompt.size() - 1);
        if (!m.eval(prompt.data() + from, prompt.size() - from, logits->data(), &e))
            return *err = server_error("evaluation failed: " + e), false;
        return true;
    }
    // Scored in chunks: all rows at once would be prompt x vocab floats.
    constexpr size_t kChunk = 32;
    std::vector<float> rows(kChunk * (size_t)V), lp;
    std::vector<int32_t> order;
    TokenLogprob first;
    first.id = prompt[0];
    first.bytes = m.token_bytes(prompt[0]);
    first.has_logprob = false;
    info->logprobs.push_back(std::move(first));
    for (size_t at = 0; at < prompt.size(); at += kChunk) {
        if (obs.cancelled()) return *err = cancelled_error(), false;
        size_t n = std::min(kChunk, prompt.size() - at);
        if (!m.eval_all(prompt.data() + at, n, rows.data(), &e))
            return *err = server_error("evaluation failed: " + e), false;
        for (size_t r = 0; r < n; r++) {
            size_t next = at + r + 1;
            const float *row = rows.data() + r * (size_t)V;
            if (next < prompt.size()) {
                log_softmax(row, V, &lp);
                info->logprobs.push_back(token_logprob(m, lp, prompt[next], req.top_logprobs, &order));
            } else {
                std::copy(row, row + V, logits->begin());
            }
        }
    }
    return true;
}

}  // namespace

namespace {

// /tokenize and /detokenize: on the worker, which owns the model.
bool token_utility(Model &m, const GenRequest &req, GenResult *res, ApiError *err) {
    std::string e;
    if (req.kind == Endpoint::tokenize) {
        bool ok = req.markup ? m.tokenize_markup(req.prompt_text, &res->tokens, &e)
                             : m.tokenize(req.prompt_text, &res->tokens, &e);
        if (!ok) return *err = bad_request("cannot tokenize: " + e, "content", "no_tokenizer"), false;
        if (req.with_pieces)
            for (int32_t id : res->tokens) res->pieces.push_back(m.token_bytes(id));
        return true;
    }
    const int32_t V = m.vocab();
    auto d = m.new_detokenizer();
    if (!d) return *err = bad_request("this model has no tokenizer", "tokens", "no_tokenizer"), false;
    for (size_t i = 0; i < req.prompt_ids.size(); i++) {
        int64_t id = req.prompt_ids[i];
        if (id < 0 || id >= V)
            return *err = bad_request("'tokens[" + std::to_string(i) + "]' is " + std::to_string(id) +
                                          ", outside the vocabulary [0, " + std::to_string(V) + ")",
                                      "tokens"),
                   false;
        res->text += d->push((int32_t)id);
    }
    res->text += d->flush();
    return true;
}

}  // namespace

namespace {

// n > 1: one choice's deltas, tagged with its index; the prompt once.
class ChoiceObserver final : public GenObserver {
public:
    ChoiceObserver(GenObserver &o, int i) : o_(o), i_(i) {}
    void on_prompt(PromptInfo info) override {
        if (i_ == 0) o_.on_prompt(std::move(info));
    }
    void on_delta(Delta d) override {
        d.choice = i_;
        o_.on_delta(std::move(d));
    }
    bool cancelled() override { return o_.cancelled(); }

private:
    GenObserver &o_;
    int i_;
};

}  // namespace

bool generate(Model &m, const GenRequest &req, std::chrono::steady_clock::time_point deadline, GenObserver &obs,
              GenResult *res, ApiError *err) {
    if (req.kind == Endpoint::tokenize || req.kind == Endpoint::detokenize) return token_utility(m, req, res, err);
    if (req.n > 1) {
        GenRequest one = req;
        one.n = 1;
        for (int i = 0; i < req.n; i++) {
            one.sampling.seed = req.sampling.seed + (uint64_t)i;
            ChoiceObserver co(obs, i);
            GenResult r;
            if (!generate(m, one, deadline, co, &r, err)) return false;
            res->choices.push_back(std::move(r));
        }
        GenResult sum = res->choices[0];
        for (size_t i = 1; i < res->choices.size(); i++) {
            sum.completion_tokens += res->choices[i].completion_tokens;
            if (sum.reasoning_tokens >= 0) sum.reasoning_tokens += res->choices[i].reasoning_tokens;
        }
        sum.have_engine = res->choices.back().have_engine;
        sum.engine = res->choices.back().engine;
        sum.choices = std::move(res->choices);
        *res = std::move(sum);
        return true;
    }
    std::vector<int32_t> prompt;
    ChatPlan plan;
    if (!build_prompt(m, req, &prompt, &plan, err)) return false;

    const int64_t ctx = m.context(), P = (int64_t)prompt.size();
    const int64_t room = ctx - P;
    int64_t max_new = req.max_tokens;
    if (max_new < 0) max_new = req.kind == Endpoint::chat ? room : std::min<int64_t>(16, room);
    if (P > ctx || (max_new > 0 && P + max_new > ctx) || (req.max_tokens < 0 && room < 1)) {
        ApiError e = bad_request("This model's maximum context length is " + std::to_string(ctx) +
                                     " tokens. However, you requested " + std::to_string(P + std::max<int64_t>(max_new, 1)) +
                                     " tokens (" + std::to_string(P) + " in the " +
                                     (req.kind == Endpoint::chat ? "messages" : "prompt") + ", " +
                                     std::to_string(std::max<int64_t>(max_new, 1)) +
                                     " in the completion). Please reduce the length of the " +
                                     (req.kind == Endpoint::chat ? "messages" : "prompt") + " or completion.",
                                 req.kind == Endpoint::chat ? "messages" : "prompt", "context_length_exceeded");
        *err = e;
        m.clear_images();  // a refused prompt leaves no image queued
        return false;
    }

    const int32_t stop_tok = req.kind != Endpoint::chat ? -1 : plan.xtml ? plan.mk.end_of_msg : m.chat_stop_token();
    // The thinking budget, response_format, forced and strict tool calls:
    // what is forced and what is sampled under a schema (reply_guide.h).
    // Checked before the prompt is evaluated: a max_tokens too small for
    // the answer is the client's 400.
    ReplyGuide guide;
    if (req.kind == Endpoint::chat &&
        !guide.init(m, req, plan.xtml ? &plan.mk : nullptr, plan.starts_in, max_new, stop_tok, err)) {
        m.clear_images();
        return false;
    }

    std::string e;
    const bool images = req.kind == Endpoint::chat && request_has_images(req);
    size_t kept = 0, cached = 0;
    bool reusable = false;
    if (!reuse_prefix(m, req, prompt, images, &kept, &cached, &reusable, err)) return false;
    const int32_t V = m.vocab();
    std::vector<float> logits((size_t)V), lp;
    std::vector<int32_t> order;
    PromptInfo info;
    info.prompt_tokens = (int)P;
    if (req.echo) {
        if (req.prompt_is_ids)
            for (int32_t id : prompt) info.text += m.token_bytes(id);
        else info.text = req.prompt_text;
    }
    if (!eval_prompt(m, req, prompt, kept, reusable, obs, &info, &logits, err)) return false;
    obs.on_prompt(std::move(info));

    std::string serr;
    auto sampler = m.new_sampler(req.sampling, &serr);
    auto detok = m.new_detokenizer();
    if (!sampler) return *err = server_error("cannot create a sampler: " + serr), false;
    // Without a tokenizer only token-id completions get here: their output
    // is the ids (GenResult::tokens), with no text.
    if (!detok && (req.kind != Endpoint::completion || !req.prompt_is_ids))
        return *err = bad_request("this model has no tokenizer", "messages", "no_tokenizer"), false;
    res->no_tokenizer = !detok;
    // Test hook (sluice serve --test-forced-output): the model's tokens are
    // replaced by this text's, so a random-weight model can exercise
    // reasoning, tool calls and constrained output end to end.
    std::vector<int32_t> forced;
    if (!req.forced_output.empty() && !m.tokenize_markup(req.forced_output, &forced, &e))
        return *err = server_error("cannot tokenize the forced output: " + e), false;

    std::unique_ptr<XtmlReply> reply;
    if (plan.xtml) reply = std::make_unique<XtmlReply>(plan.starts_in);
    std::vector<int32_t> history = prompt;
    std::string text;  // plain path: everything decoded so far (cut at a stop string)
    size_t sent = 0;   // how much of it (plain: text; K3: content) has been delivered
    size_t sent_reasoning = 0, calls_announced = 0;
    Delta pending;
    int produced = 0;
    std::string finish = "length";
    bool stopped_by_string = false;

    auto deliver = [&](size_t upto) {
        if (reply) {
            const std::string &c = reply->content();
            if (upto > sent) pending.text = c.substr(sent, upto - sent), sent = upto;
            const std::string &r = reply->reasoning();
            if (r.size() > sent_reasoning) pending.reasoning = r.substr(sent_reasoning), sent_reasoning = r.size();
            const auto &calls = reply->calls();
            while (calls_announced < calls.size() && !calls[calls_announced].name.empty()) {
                const XToolCall &tc = calls[calls_announced];
                pending.calls.push_back(CallStart{(int)calls_announced, tc.id, tc.name});
                calls_announced++;
            }
        } else if (upto > sent) {
            pending.text = text.substr(sent, upto - sent), sent = upto;
        }
        if (!pending.text.empty() || !pending.reasoning.empty() || !pending.calls.empty() || !pending.tokens.empty())
            obs.on_delta(std::move(pending));
        pending = Delta{};
    };
    // Content so far and a stop string in it (K3: content only, never reasoning).
    auto content = [&]() -> const std::string & { return reply ? reply->content() : text; };

    while (produced < max_new) {
        if (obs.cancelled()) return *err = cancelled_error(), false;
        // A request over its time limit ends like one over its token limit.
        if (std::chrono::steady_clock::now() >= deadline) break;
        const bool thinking_now = reply && reply->in_think();
        int32_t id;
        const bool forcing = !forced.empty() && ((size_t)produced < forced.size() || !req.forced_then_sample);
        if (forcing) {
            id = (size_t)produced < forced.size() ? forced[(size_t)produced] : (stop_tok >= 0 ? stop_tok : m.eos());
        } else if (req.kind == Endpoint::chat) {
            id = guide.next(logits.data(), V, history, reply.get(), *sampler, max_new - produced);
        } else {
            id = sampler->sample(logits.data(), V, history);
        }
        if (id < 0 || id >= V) return *err = server_error("the sampler returned token id " + std::to_string(id)), false;
        produced++;
        if (id == m.eos() || (stop_tok >= 0 && id == stop_tok)) {
            finish = "stop";  // counted in usage, not shown as output
            if (reply) reply->feed_marker(XMarker::end_of_msg);
            break;
        }
        if (req.logprobs) {
            log_softmax(logits.data(), V, &lp);
            pending.tokens.push_back(token_logprob(m, lp, id, req.top_logprobs, &order));
        }
        history.push_back(id);
        if (reply) {
            if (id == plan.mk.open) reply->feed_marker(XMarker::open);
            else if (id == plan.mk.close) reply->feed_marker(XMarker::close);
            else if (id == plan.mk.sep) reply->feed_marker(XMarker::sep);
            else reply->feed_text(detok->push(id));
        } else {
            if (detok) text += detok->push(id);
            if (req.kind == Endpoint::completion) res->tokens.push_back(id);
        }
        // A call's header just completed: its arguments may go through a
        // schema (not while the test hook is still forcing the text).
        if (req.kind == Endpoint::chat &&
            !guide.after(id, thinking_now, reply.get(), !forced.empty() && (size_t)produced < forced.size(), err))
            return false;
        // A stop string cannot begin before `sent`: a text that might start
        // one is never delivered (stop_holdback).
        size_t cut = std::string::npos;
        for (const std::string &st : req.stop) cut = std::min(cut, content().find(st, sent));
        if (cut != std::string::npos) {
            if (reply) reply->truncate_content(cut);
            else text.resize(cut);
            finish = "stop";
            stopped_by_string = true;
            break;
        }
        deliver(content().size() - stop_holdback(std::string_view(content()).substr(sent), req.stop));
        if (reply && reply->finished()) {
            finish = "stop";
            break;
        }
        if (produced >= max_new) break;
        if (!m.eval(&id, 1, logits.data(), &e)) return *err = server_error("evaluation failed: " + e), false;
    }
    // After a stop string the held-back bytes lie past the cut.
    if (reply) {
        if (!stopped_by_string) reply->feed_text(detok->flush());
        reply->finish();
        if (!reply->calls().empty()) finish = "tool_calls";
        res->message = reply->message();
        mark_invalid_arguments(&res->message);
        res->reasoning_tokens = guide.reasoning_tokens();
    } else if (!stopped_by_string && detok) {
        text += detok->flush();
    }
    deliver(content().size());
    res->finish_reason = finish;
    res->prompt_tokens = (int)P;
    res->cached_tokens = (int)cached;
    res->completion_tokens = produced;
    res->have_engine = m.engine_stats(&res->engine);
    return true;
}

}  // namespace sluice::server
