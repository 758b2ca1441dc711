// Sessions kept aside: a server that alternates between conversations (an
// agent and its sub-agent, two chats) copies the live session out before
// another takes its place, and back when that conversation returns, instead
// of evaluating its whole prefix again. Copies only: the live session keeps
// its buffers, so a restore allocates nothing the plan did not count.
#include <algorithm>

#include "model/engine.h"

namespace sluice {

uint64_t saved_session_bytes(const SavedSession &s) {
    uint64_t b = s.tokens.size() * sizeof(int32_t);
    for (const KdaState &k : s.kda) b += (k.S.size() + k.ring.size()) * sizeof(float);
    for (const MlaState &m : s.mla) b += m.cache.size() * sizeof(float);
    for (const Checkpoint &c : s.ckpts)
        for (const KdaState &k : c.kda) b += (k.S.size() + k.ring.size()) * sizeof(float);
    return b;
}

Status Engine::save_session(SavedSession *out) {
    SLUICE_TRY(settle());  // the copy holds the state at n_past
    SavedSession s;
    s.pos = pos_;
    s.tokens = tokens_;
    s.kda = kda_;
    s.mla.resize(mla_.size());
    for (size_t L = 0; L < mla_.size(); L++) {
        s.mla[L].len = mla_[L].len;
        s.mla[L].cache.assign(mla_[L].cache.begin(), mla_[L].cache.end());  // exactly its length
    }
    // Only the newest checkpoint: where the conversation's last prompt
    // ended, which its next turn rewinds to when it re-renders the reply
    // (a client that drops the reasoning). Older ones would double or
    // treble the bytes (one checkpoint is the whole KDA state) for rewinds
    // a returning conversation rarely makes.
    const Checkpoint *newest = nullptr;
    for (const Checkpoint &c : ckpts_)
        if (c.pos <= pos_ && (!newest || c.pos > newest->pos)) newest = &c;
    if (newest) s.ckpts.push_back(*newest);
    s.bytes = saved_session_bytes(s);
    *out = std::move(s);
    return Status::ok();
}

Status Engine::restore_session(const SavedSession &in) {
    const ModelConfig &cfg = c_.config();
    const int64_t row = (int64_t)cfg.kv_lora + cfg.d_rope;
    auto bad = [](const std::string &why) { return Status(SLUICE_E_ARG, "restore_session: " + why); };
    // Everything a later eval would index, checked before anything changes:
    // a copy from a context of another model is refused, named.
    if (in.pos < 0 || in.pos > opt_.max_context || in.tokens.size() != (size_t)in.pos)
        return bad("position " + std::to_string(in.pos) + " does not fit this context (" +
                   std::to_string(opt_.max_context) + ") or its tokens");
    if (in.kda.size() != (size_t)cfg.n_layers || in.mla.size() != (size_t)cfg.n_layers)
        return bad("the saved session has " + std::to_string(in.kda.size()) + " layers, this model " +
                   std::to_string(cfg.n_layers));
    for (int L = 0; L < cfg.n_layers; L++) {
        const KdaState &k = in.kda[(size_t)L];
        if (cfg.is_kda[(size_t)L]) {
            if (k.S.size() != kda_[(size_t)L].S.size() || k.ring.size() != kda_[(size_t)L].ring.size())
                return bad("layer " + std::to_string(L) + ": the KDA state has another shape");
        } else if (in.mla[(size_t)L].len != in.pos || (int64_t)in.mla[(size_t)L].cache.size() != in.pos * row) {
            return bad("layer " + std::to_string(L) + ": the MLA cache does not hold " + std::to_string(in.pos) +
                       " rows");
        }
    }
    for (int32_t t : in.tokens)
        if (t < -1 || t >= cfg.vocab) return bad("a token id is outside the vocabulary");
    for (const Checkpoint &c : in.ckpts) {
        if (c.pos <= 0 || c.pos > in.pos || c.kda.size() != (size_t)cfg.n_layers)
            return bad("a checkpoint lies outside the saved session");
        for (int L = 0; L < cfg.n_layers; L++)
            if (cfg.is_kda[(size_t)L] && (c.kda[(size_t)L].S.size() != kda_[(size_t)L].S.size() ||
                                          c.kda[(size_t)L].ring.size() != kda_[(size_t)L].ring.size()))
                return bad("a checkpoint's KDA state has another shape");
    }
    // Into the live buffers (their capacity stays: the plan counted them).
    pos_ = in.pos;
    tokens_.assign(in.tokens.begin(), in.tokens.end());
    pending_.clear();
    due_.clear();
    log_lo_ = log_hi_ = in.pos;  // the copy holds no log
    for (int L = 0; L < cfg.n_layers; L++) {
        if (cfg.is_kda[(size_t)L]) {
            std::copy(in.kda[(size_t)L].S.begin(), in.kda[(size_t)L].S.end(), kda_[(size_t)L].S.begin());
            std::copy(in.kda[(size_t)L].ring.begin(), in.kda[(size_t)L].ring.end(), kda_[(size_t)L].ring.begin());
        } else {
            mla_[(size_t)L].len = in.mla[(size_t)L].len;
            mla_[(size_t)L].cache.assign(in.mla[(size_t)L].cache.begin(), in.mla[(size_t)L].cache.end());
        }
    }
    // The checkpoint pool takes the saved ones, newest kept if it is smaller.
    drop_checkpoints_after(0);
    std::vector<const Checkpoint *> keep;
    for (const Checkpoint &c : in.ckpts) keep.push_back(&c);
    std::sort(keep.begin(), keep.end(), [](const Checkpoint *a, const Checkpoint *b) { return a->seq < b->seq; });
    if (keep.size() > ckpt_capacity_) keep.erase(keep.begin(), keep.end() - (ptrdiff_t)ckpt_capacity_);
    for (const Checkpoint *c : keep) {
        Checkpoint &slot = checkpoint_slot(c->pos);
        for (int L = 0; L < cfg.n_layers; L++) {
            if (!cfg.is_kda[(size_t)L]) continue;
            std::copy(c->kda[(size_t)L].S.begin(), c->kda[(size_t)L].S.end(), slot.kda[(size_t)L].S.begin());
            std::copy(c->kda[(size_t)L].ring.begin(), c->kda[(size_t)L].ring.end(), slot.kda[(size_t)L].ring.begin());
        }
    }
    return Status::ok();
}

}  // namespace sluice
