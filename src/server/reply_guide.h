// Steering a chat reply so that what the request demands arrives within
// max_tokens. A model that thinks may never stop (a random-weight one
// never does), and a constraint that starts only once thinking ends then
// never starts: the agent asking for JSON gets `content: null`.
//
// - The think channel has a budget (thinking_budget, --thinking-budget).
//   When it is spent, the channel's closing markup is forced.
// - A structured answer (response_format json_object / json_schema) or a
//   forced call (tool_choice "required" or a named function) reserves its
//   room: thinking is capped so the answer fits, and a request whose
//   max_tokens cannot hold any valid answer is a 400 up front. Once the
//   think channel closes (the model ends it, by any marker, or the budget
//   does) the answer's markup is forced, and its JSON is sampled under the
//   schema with a draw limit (finish-now), so it completes within the
//   tokens left.
// - A call the model opens to a strict tool (tool_choice auto) gets the
//   same treatment for its arguments.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/model.h"
#include "server/request.h"
#include "server/xtml_reply.h"

namespace sluice::server {

// K3's four XTML markers (CHAT_K3.md §1), when each is one token.
struct Markers {
    int32_t open = -1, close = -1, sep = -1, end_of_msg = -1;
};

class ReplyGuide {
public:
    // mk: the markers on the XTML path, nullptr on a chat.json format.
    // starts_in: the channel the prompt left open ("think" or "response").
    // max_new: the completion's token limit. stop_tok: the chat's stop
    // token. False with *err for a request that cannot be honoured.
    bool init(Model &m, const GenRequest &req, const Markers *mk, const std::string &starts_in, int64_t max_new,
              int32_t stop_tok, ApiError *err);

    // The next token: a forced one, or a draw from `free` or from the
    // constrained sampler that governs this part of the reply. left: tokens
    // the completion may still produce, this one included. -1 when the
    // sampler has no token to give.
    int32_t next(const float *logits, int32_t n_vocab, const std::vector<int32_t> &history, const XtmlReply *reply,
                 Sampler &free, int64_t left);

    // After the reply has taken id: counts reasoning tokens, and notices a
    // call's completed header (its arguments are then written under a
    // schema). hook_forcing: the test hook is still forcing the text.
    bool after(int32_t id, bool was_thinking, const XtmlReply *reply, bool hook_forcing, ApiError *err);

    // Tokens produced in the think channel (the marker that closes it not
    // counted): never more than the budget, unless the test hook forced them.
    int reasoning_tokens() const { return think_used_; }
    // The budget in force (-1: none).
    int64_t thinking_budget() const { return budget_; }

private:
    bool tokenize(const std::string &markup, std::vector<int32_t> *out, ApiError *err);
    bool new_constrained(const std::string &schema, bool any_object, std::vector<int32_t> end, uint64_t seed,
                         std::unique_ptr<Sampler> *out, ApiError *err, const char *param);
    void enqueue(const std::vector<int32_t> &ids);
    // The forced call's opening, from the response channel (named: with the
    // name and the header's end; required: the name is sampled next, from
    // the tools' names).
    void open_forced_call();
    bool is_marker(int32_t id) const;

    Model *m_ = nullptr;
    const GenRequest *req_ = nullptr;
    Markers mk_;
    bool xtml_ = false;
    bool json_answer_ = false;  // response_format json_object / json_schema
    bool forced_call_ = false;  // tool_choice required / named
    bool call_opened_ = false;
    int64_t budget_ = -1;
    int think_used_ = 0;
    size_t calls_seen_ = 0;
    int32_t eos_ = -1;

    std::vector<int32_t> queue_;
    size_t qpos_ = 0;
    // Markup, tokenized once.
    std::vector<int32_t> think_close_, response_open_, call_open_, json_open_, call_tail_, msg_tail_;
    std::vector<int32_t> name_ids_;  // named: ="NAME"<|sep|>; required: =
    std::unique_ptr<Sampler> answer_, name_, args_;
    int64_t args_room_ = 0;   // the most draws a forced call's arguments may need (their largest minimum)
    int64_t tail_after_ = 0;  // forced tokens after the open arguments' end token
};

}  // namespace sluice::server
