// One request's generation (see generate.h).
#include "server/generate.h"
#include "server/images.h"

#include <algorithm>
#include <cmath>
#include <numeric>

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

// Builds the prompt ids; false with *err for input the model refuses.
bool build_prompt(Model &m, const GenRequest &req, std::vector<int32_t> *prompt, ApiError *err) {
    std::string e;
    const int32_t V = m.vocab();
    if (req.kind == Endpoint::chat && request_has_images(req)) {
        std::string code;
        if (!m.chat_render_images(req.messages, prompt, &e, &code))
            return *err = bad_request("cannot take the images: " + e, "messages", code), false;
    } else if (req.kind == Endpoint::chat) {
        if (!m.chat_render(req.messages, prompt, &e))
            return *err = bad_request("cannot render the conversation: " + e, "messages"), false;
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

// Evaluates the prompt, scoring every token when echo + logprobs ask for it.
// logits receives the next-token logits.
bool eval_prompt(Model &m, const GenRequest &req, const std::vector<int32_t> &prompt, GenObserver &obs,
                 PromptInfo *info, std::vector<float> *logits, ApiError *err) {
    std::string e;
    const int32_t V = m.vocab();
    if (!(req.echo && req.logprobs)) {
        if (!m.eval(prompt.data(), prompt.size(), logits->data(), &e))
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

bool generate(Model &m, const GenRequest &req, std::chrono::steady_clock::time_point deadline, GenObserver &obs,
              GenResult *res, ApiError *err) {
    std::vector<int32_t> prompt;
    if (!build_prompt(m, req, &prompt, err)) return false;

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
        return false;
    }

    std::string e;
    if (!m.reset(&e)) return *err = server_error("cannot reset the session: " + e), false;
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
    if (!eval_prompt(m, req, prompt, obs, &info, &logits, err)) return false;
    obs.on_prompt(std::move(info));

    auto sampler = m.new_sampler(req.sampling);
    auto detok = m.new_detokenizer();
    if (!sampler || !detok) return *err = server_error("cannot create a sampler or detokenizer"), false;
    const int32_t stop_tok = req.kind == Endpoint::chat ? m.chat_stop_token() : -1;
    std::vector<int32_t> history = prompt;
    std::string text;  // everything decoded so far (cut at a stop string)
    size_t sent = 0;   // how much of it has been delivered
    Delta pending;
    int produced = 0;
    std::string finish = "length";
    bool stopped_by_string = false;

    auto deliver = [&](size_t upto) {
        if (upto > sent) pending.text = text.substr(sent, upto - sent), sent = upto;
        if (!pending.text.empty() || !pending.tokens.empty()) obs.on_delta(std::move(pending));
        pending = Delta{};
    };

    while (produced < max_new) {
        if (obs.cancelled()) return *err = cancelled_error(), false;
        // A request over its time limit ends like one over its token limit.
        if (std::chrono::steady_clock::now() >= deadline) break;
        int32_t id = sampler->sample(logits.data(), V, history);
        if (id < 0 || id >= V) return *err = server_error("the sampler returned token id " + std::to_string(id)), false;
        produced++;
        if (id == m.eos() || (stop_tok >= 0 && id == stop_tok)) {
            finish = "stop";  // counted in usage, not shown as output
            break;
        }
        if (req.logprobs) {
            log_softmax(logits.data(), V, &lp);
            pending.tokens.push_back(token_logprob(m, lp, id, req.top_logprobs, &order));
        }
        history.push_back(id);
        text += detok->push(id);
        // A stop string cannot begin before `sent`: a text that might start
        // one is never delivered (stop_holdback).
        size_t cut = std::string::npos;
        for (const std::string &s : req.stop) cut = std::min(cut, text.find(s, sent));
        if (cut != std::string::npos) {
            text.resize(cut);
            finish = "stop";
            stopped_by_string = true;
            break;
        }
        deliver(text.size() - stop_holdback(std::string_view(text).substr(sent), req.stop));
        if (produced >= max_new) break;
        if (!m.eval(&id, 1, logits.data(), &e)) return *err = server_error("evaluation failed: " + e), false;
    }
    if (!stopped_by_string) text += detok->flush();
    deliver(text.size());
    res->finish_reason = finish;
    res->prompt_tokens = (int)P;
    res->completion_tokens = produced;
    return true;
}

}  // namespace sluice::server
