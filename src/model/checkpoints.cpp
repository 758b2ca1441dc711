// Prompt reuse: rewinding a session to an earlier position, so a prompt
// that shares a prefix with the evaluated tokens evaluates only the rest.
//
// The MLA cache is append-only: its first p rows are the state at p, so
// cutting it is the whole rewind. The KDA recurrence folds every token into
// S and the conv ring and cannot be undone, so its state is kept as
// checkpoints (every checkpoint_interval positions, at the end of each
// prompt the caller marks, and at each rewind target) in a bounded pool;
// a rewind restores the newest checkpoint at or before the target and
// evaluates the tokens from there again. Restoring the MLA rows without the
// matching KDA state would give wrong logits, not an error, so both always
// move together.
#include <algorithm>

#include "model/engine.h"

namespace sluice {

void Engine::drop_checkpoints_after(int pos) {
    for (size_t i = 0; i < ckpts_.size();) {
        if (ckpts_[i].pos > pos) {
            ckpt_spare_.push_back(std::move(ckpts_[i]));
            ckpts_.erase(ckpts_.begin() + (ptrdiff_t)i);
        } else {
            i++;
        }
    }
}

Checkpoint &Engine::checkpoint_slot(int pos) {
    for (Checkpoint &c : ckpts_)
        if (c.pos == pos) {
            c.seq = ++ckpt_seq_;
            return c;
        }
    Checkpoint c;
    if (ckpts_.size() >= ckpt_capacity_) {
        // The pool is full: the least recently made or used checkpoint goes,
        // and its buffers take the new state (no allocation).
        auto oldest = std::min_element(ckpts_.begin(), ckpts_.end(),
                                       [](const Checkpoint &a, const Checkpoint &b) { return a.seq < b.seq; });
        c = std::move(*oldest);
        ckpts_.erase(oldest);
    } else if (!ckpt_spare_.empty()) {
        c = std::move(ckpt_spare_.back());
        ckpt_spare_.pop_back();
    }
    const ModelConfig &cfg = c_.config();
    c.kda.resize((size_t)cfg.n_layers);
    for (int L = 0; L < cfg.n_layers; L++) {
        if (!cfg.is_kda[(size_t)L]) continue;
        c.kda[(size_t)L].S.resize(kda_[(size_t)L].S.size());
        c.kda[(size_t)L].ring.resize(kda_[(size_t)L].ring.size());
    }
    c.pos = pos;
    c.seq = ++ckpt_seq_;
    ckpts_.push_back(std::move(c));
    return ckpts_.back();
}

Status Engine::checkpoint_at(int pos) {
    if (pos < n_past())
        return Status(SLUICE_E_RANGE, "checkpoint: position " + std::to_string(pos) +
                                          " is before the session's end (" + std::to_string(n_past()) + ")");
    if (ckpt_capacity_ == 0 || pos == 0) return Status::ok();
    if (pos > pos_) {
        if (std::find(due_.begin(), due_.end(), pos) == due_.end()) {
            due_.push_back(pos);
            std::sort(due_.begin(), due_.end());
        }
        return Status::ok();
    }
    Checkpoint &c = checkpoint_slot(pos_);  // one already here holds this state: copied again, unchanged
    const ModelConfig &cfg = c_.config();
    for (int L = 0; L < cfg.n_layers; L++) {
        if (!cfg.is_kda[(size_t)L]) continue;
        std::copy(kda_[(size_t)L].S.begin(), kda_[(size_t)L].S.end(), c.kda[(size_t)L].S.begin());
        std::copy(kda_[(size_t)L].ring.begin(), kda_[(size_t)L].ring.end(), c.kda[(size_t)L].ring.begin());
    }
    return Status::ok();
}

std::vector<int32_t> Engine::session_tokens() const {
    std::vector<int32_t> t;
    t.reserve(tokens_.size() + pending_.size());
    t.insert(t.end(), tokens_.begin(), tokens_.end());
    t.insert(t.end(), pending_.begin(), pending_.end());
    return t;
}

CheckpointStats Engine::checkpoint_stats() const {
    CheckpointStats s;
    s.held = ckpts_.size();
    s.bytes = s.held * checkpoint_bytes(c_.config());
    s.capacity = ckpt_capacity_;
    s.restores = ckpt_restores_;
    s.reevaluated = ckpt_reevaluated_;
    s.replayed = ckpt_replayed_;
    s.log_positions = (uint64_t)log_cap_;
    return s;
}

Status Engine::rewind(int n) {
    if (n < 0 || n > n_past())
        return Status(SLUICE_E_RANGE, "rewind: position " + std::to_string(n) + " is outside the session's [0, " +
                                          std::to_string(n_past()) + "]");
    if (n == n_past()) return Status::ok();
    due_.erase(std::remove_if(due_.begin(), due_.end(), [n](int p) { return p > n; }), due_.end());
    if (n >= pos_) {
        // Inside the tokens an earlier rewind left: fewer of them, the
        // checkpoint at the new end.
        ckpt_reevaluated_ -= pending_.size() - (size_t)(n - pos_);
        pending_.resize((size_t)(n - pos_));
        if (!pending_.empty()) (void)checkpoint_at(n);
        return Status::ok();
    }
    const ModelConfig &cfg = c_.config();
    const bool recurrent = checkpoint_bytes(cfg) > 0;
    // Where the state can be restored exactly: n itself without KDA layers;
    // otherwise the newest checkpoint at or before n, or the zero state.
    int from = n;
    const Checkpoint *best = nullptr;
    if (recurrent) {
        from = 0;
        for (const Checkpoint &c : ckpts_)
            if (c.pos <= n && c.pos > from) from = c.pos, best = &c;
    }
    // The log holds every position from the checkpoint to the target: the
    // KDA recurrences are replayed from it (no token needs to be known).
    const bool replay = recurrent && from < n && log_lo_ <= from && n <= log_hi_;
    if (recurrent && !replay) {
        for (int p = from; p < n; p++)
            if (tokens_[(size_t)p] < 0)
                return Status(SLUICE_E_STATE, "rewind: cannot reach position " + std::to_string(n) +
                                                  ": the token at position " + std::to_string(p) +
                                                  " is not known (an image row or a loaded state); reset and "
                                                  "evaluate the prompt instead");
    }
    // The MLA cache is cut at the target when the log takes the KDA state
    // there, else at the checkpoint (its rows are evaluated again).
    const int cut = replay ? n : from;
    const int64_t row = (int64_t)cfg.kv_lora + cfg.d_rope;
    for (int L = 0; L < cfg.n_layers; L++) {
        if (cfg.is_kda[(size_t)L]) {
            KdaState &k = kda_[(size_t)L];
            if (best) {
                std::copy(best->kda[(size_t)L].S.begin(), best->kda[(size_t)L].S.end(), k.S.begin());
                std::copy(best->kda[(size_t)L].ring.begin(), best->kda[(size_t)L].ring.end(), k.ring.begin());
            } else {
                std::fill(k.S.begin(), k.S.end(), 0.0f);
                std::fill(k.ring.begin(), k.ring.end(), 0.0f);
            }
        } else {
            mla_[(size_t)L].len = cut;
            mla_[(size_t)L].cache.resize((size_t)(cut * row));
        }
    }
    if (best) {
        for (Checkpoint &c : ckpts_)
            if (c.pos == from) c.seq = ++ckpt_seq_;  // used: the last to be evicted
    }
    if (replay) {
        for (int L = 0; L < cfg.n_layers; L++)
            if (cfg.is_kda[(size_t)L])
                for (int p = from; p < n; p++) kda_replay(L, p);
        pos_ = n;
        tokens_.resize((size_t)n);
        drop_checkpoints_after(n);
        log_hi_ = n;
        ckpt_restores_++;
        ckpt_replayed_ += (uint64_t)(n - from);
        checkpoint();  // the next prompt sharing this prefix restores here directly
        return Status::ok();
    }
    std::vector<int32_t> again(tokens_.begin() + from, tokens_.begin() + n);
    pos_ = from;
    tokens_.resize((size_t)from);
    drop_checkpoints_after(from);
    log_hi_ = std::min(log_hi_, from);
    log_lo_ = std::min(log_lo_, log_hi_);
    if (recurrent) ckpt_restores_++;
    // Evaluated with the next eval's tokens (eval), or alone where that
    // cannot be (settle). The pad token of an image among them is its table
    // row: the positions that took image rows were refused above.
    ckpt_reevaluated_ += again.size();
    pending_ = std::move(again);
    if (!pending_.empty()) (void)checkpoint_at(n);  // the next prompt sharing this prefix restores there directly
    return Status::ok();
}

}  // namespace sluice
