// Steering a chat reply (see reply_guide.h).
#include "server/reply_guide.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace sluice::server {

namespace {

// The answer's room when the request leaves the thinking budget to the
// server: half of max_tokens, up to 512 tokens (more when the shortest
// valid answer needs more). An explicit thinking_budget is capped only by
// the shortest answer.
constexpr int64_t kAnswerShareCap = 512;

int64_t draws_of(const Sampler &s) {
    const int32_t d = s.draws_to_finish();
    return d < 1 ? 1 : d;  // a sampler that cannot tell needs at least its end token
}

int32_t clamp_draws(int64_t v) { return (int32_t)std::clamp<int64_t>(v, 0, INT32_MAX); }

}  // namespace

bool ReplyGuide::tokenize(const std::string &markup, std::vector<int32_t> *out, ApiError *err) {
    // Tag names and attribute fragments are separate segments in K3's
    // rendering (CHAT_K3.md §2): each piece is tokenized on its own, so the
    // forced markup has the token ids the model saw in its prompts.
    out->clear();
    std::vector<std::string> pieces;
    std::string cur;
    auto flush = [&]() {
        if (!cur.empty()) pieces.push_back(cur), cur.clear();
    };
    for (size_t i = 0; i < markup.size();) {
        size_t mk_len = 0;
        for (const char *mk : {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"})
            if (markup.compare(i, std::char_traits<char>::length(mk), mk) == 0) mk_len = std::char_traits<char>::length(mk);
        if (mk_len) {
            flush();
            pieces.push_back(markup.substr(i, mk_len));
            i += mk_len;
        } else if (markup.compare(i, 2, "=\"") == 0) {
            flush();
            pieces.push_back("=\"");
            i += 2;
        } else if (markup[i] == '"') {
            flush();
            pieces.push_back("\"");
            i++;
        } else {
            if (markup[i] == ' ') flush();  // " key" is a fragment of its own
            cur += markup[i++];
        }
    }
    if (!cur.empty()) pieces.push_back(cur);
    std::vector<int32_t> ids;
    std::string e;
    for (const std::string &p : pieces) {
        if (!m_->tokenize_markup(p, &ids, &e)) {
            ApiError a;
            a.status = 500;
            a.type = "server_error";
            a.message = "cannot tokenize the reply's markup: " + e;
            return *err = a, false;
        }
        out->insert(out->end(), ids.begin(), ids.end());
    }
    return true;
}

bool ReplyGuide::new_constrained(const std::string &schema, bool any_object, std::vector<int32_t> end, uint64_t seed,
                                 std::unique_ptr<Sampler> *out, ApiError *err, const char *param) {
    SamplingParams sp = req_->sampling;
    sp.constrained = true;
    sp.json_schema = any_object ? std::string() : schema;
    sp.end_tokens = std::move(end);
    sp.seed = seed;
    std::string e;
    *out = m_->new_sampler(sp, &e);
    if (!*out) return *err = bad_request(std::string(param) + " cannot be enforced: " + e, param), false;
    return true;
}

bool ReplyGuide::init(Model &m, const GenRequest &req, const Markers *mk, const std::string &starts_in,
                      int64_t max_new, int32_t stop_tok, ApiError *err) {
    m_ = &m;
    req_ = &req;
    xtml_ = mk != nullptr;
    if (mk) mk_ = *mk;
    eos_ = m.eos();
    forced_call_ = xtml_ && !req.forced_calls.empty();
    json_answer_ = !req.response_format.empty() && !forced_call_;  // a forced call is the answer
    const bool thinking = xtml_ && starts_in == "think";
    const uint64_t seed = req.sampling.seed;

    if (xtml_) {
        if (!tokenize("<|close|>think<|sep|>", &think_close_, err) ||
            !tokenize("<|open|>response<|sep|>", &response_open_, err) ||
            !tokenize("<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool", &call_open_, err) ||
            !tokenize("<|open|>json type=\"object\"<|sep|>", &json_open_, err) ||
            !tokenize("json<|sep|><|close|>call<|sep|>", &call_tail_, err) ||
            !tokenize("<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>", &msg_tail_, err))
            return false;
    }

    // What the answer needs at least, after the thinking.
    int64_t need = 0;
    if (json_answer_) {
        std::vector<int32_t> end;
        if (stop_tok >= 0) end.push_back(stop_tok);
        if (eos_ >= 0) end.push_back(eos_);
        if (!new_constrained(req.json_schema, req.response_format != "json_schema", end, seed, &answer_, err,
                             "response_format"))
            return false;
        need = (thinking ? (int64_t)(think_close_.size() + response_open_.size()) : 0) + draws_of(*answer_);
    }
    if (forced_call_) {
        std::unique_ptr<Sampler> probe;
        for (const auto &[name, schema] : req.forced_calls) {
            if (!new_constrained(schema, schema.empty(), {mk_.close}, seed, &probe, err, "tools")) return false;
            args_room_ = std::max(args_room_, draws_of(*probe));
        }
        int64_t name_need;
        if (req.forced_calls.size() == 1) {
            if (!tokenize("=\"" + req.forced_calls[0].first + "\"<|sep|>", &name_ids_, err)) return false;
            name_need = (int64_t)name_ids_.size();
        } else {
            if (!tokenize("=", &name_ids_, err)) return false;
            nlohmann::json names = nlohmann::json::array();
            for (const auto &fc : req.forced_calls) names.push_back(fc.first);
            if (!new_constrained(nlohmann::json{{"enum", names}}.dump(), false, {mk_.sep}, seed ^ 0x6e616d65ull,
                                 &name_, err, "tools"))
                return false;
            name_need = (int64_t)name_ids_.size() + draws_of(*name_);  // "=", the quoted name, <|sep|>
        }
        need = (thinking ? (int64_t)(think_close_.size() + response_open_.size()) : 0) + (int64_t)call_open_.size() +
               name_need + (int64_t)json_open_.size() + args_room_ + (int64_t)(call_tail_.size() + msg_tail_.size());
    }
    if (need > max_new) {
        const bool given = req.max_tokens >= 0;
        return *err = bad_request(std::string(given ? "'max_tokens' is " + std::to_string(max_new)
                                                    : "the context leaves " + std::to_string(max_new) + " tokens") +
                                      ", too few for the " + (forced_call_ ? "tool call that 'tool_choice'" :
                                                                              "JSON that 'response_format'") +
                                      " demands: its shortest valid form, with the reply's markup, takes " +
                                      std::to_string(need) + " tokens",
                                  given ? "max_tokens" : "messages", "max_tokens_too_small"),
               false;
    }

    // The thinking budget, and the room the answer keeps.
    const bool explicit_budget = req.thinking_budget != GenRequest::kBudgetUnset;
    const int64_t b = explicit_budget ? req.thinking_budget : req.default_thinking_budget;
    budget_ = thinking ? b : -1;
    if (thinking && (json_answer_ || forced_call_)) {
        const int64_t reserve = explicit_budget ? need : std::max(need, std::min((max_new + 1) / 2, kAnswerShareCap));
        const int64_t cap = std::max<int64_t>(0, max_new - reserve);
        budget_ = b < 0 ? cap : std::min(b, cap);
    }
    return true;
}

void ReplyGuide::enqueue(const std::vector<int32_t> &ids) {
    if (qpos_ >= queue_.size()) queue_.clear(), qpos_ = 0;
    queue_.insert(queue_.end(), ids.begin(), ids.end());
}

bool ReplyGuide::is_marker(int32_t id) const {
    return id == mk_.open || id == mk_.close || id == mk_.sep || id == mk_.end_of_msg;
}

void ReplyGuide::open_forced_call() {
    enqueue(call_open_);
    enqueue(name_ids_);  // named: the whole header; required: "=", then the name is sampled
    call_opened_ = true;
}

int32_t ReplyGuide::next(const float *logits, int32_t n_vocab, const std::vector<int32_t> &history,
                         const XtmlReply *reply, Sampler &free, int64_t left) {
    if (qpos_ < queue_.size()) return queue_[qpos_++];
    if (args_) {
        args_->set_draw_limit(clamp_draws(left - tail_after_));
        const int32_t id = args_->sample(logits, n_vocab, history);
        // Its end token (<|close|>): the JSON is complete; the tags close.
        if (id == mk_.close) {
            args_.reset();
            enqueue(call_tail_);
            if (forced_call_) enqueue(msg_tail_);
        }
        return id;
    }
    if (name_ && call_opened_) {
        name_->set_draw_limit(clamp_draws(left - ((int64_t)json_open_.size() + args_room_ +
                                                  (int64_t)(call_tail_.size() + msg_tail_.size()))));
        const int32_t id = name_->sample(logits, n_vocab, history);
        if (id == mk_.sep) name_.reset();
        return id;
    }
    const bool structured = json_answer_ || forced_call_;
    auto close_think = [&]() {
        enqueue(think_close_);
        if (structured) enqueue(response_open_);
        if (forced_call_) open_forced_call();
        return queue_[qpos_++];
    };
    if (reply && reply->in_think()) {
        if (budget_ >= 0 && think_used_ >= budget_) return close_think();
        const int32_t id = free.sample(logits, n_vocab, history);
        // Any structure the model starts in the think channel, or its end,
        // means it is done thinking: the answer's markup follows.
        if (structured && (is_marker(id) || id == eos_)) return close_think();
        return id;
    }
    if (forced_call_ && !call_opened_) {
        open_forced_call();
        return queue_[qpos_++];
    }
    if (answer_ && !(reply && reply->in_header())) {
        answer_->set_draw_limit(clamp_draws(left));
        return answer_->sample(logits, n_vocab, history);
    }
    return free.sample(logits, n_vocab, history);
}

bool ReplyGuide::after(int32_t id, bool was_thinking, const XtmlReply *reply, bool hook_forcing, ApiError *err) {
    if (was_thinking && !(xtml_ && id == mk_.close)) think_used_++;
    if (!reply || hook_forcing || reply->calls().size() <= calls_seen_ || !reply->in_call()) return true;
    // A call's header is complete: its arguments are a raw JSON block
    // (CHAT_K3.md §5.2, §9.3), which the parser passes on verbatim as
    // `arguments`, written under the tool's schema.
    calls_seen_ = reply->calls().size();
    const std::string &name = reply->calls().back().name;
    const std::vector<std::pair<std::string, std::string>> &pool = forced_call_ ? req_->forced_calls : req_->strict_tools;
    for (const auto &[tool, schema] : pool) {
        if (tool != name) continue;
        if (!new_constrained(schema, schema.empty(), {mk_.close}, req_->sampling.seed + calls_seen_, &args_, err,
                             "tools"))
            return false;
        enqueue(json_open_);
        tail_after_ = (int64_t)call_tail_.size() + (forced_call_ ? (int64_t)msg_tail_.size() : 0);
        break;
    }
    return true;
}

}  // namespace sluice::server
