// Expert-major prefill: a prompt goes through the model in waves, each
// layer for the whole wave at once, so each routed record is read once per
// wave instead of once per chunk (a 512-token prompt in 64-token chunks read
// each of the 48B shape's records about 8 times). Within a layer the
// attention still runs in chunks, in order, and the routed experts in
// sub-waves of a chunk's tokens (their VQ tables are per token), holding the
// layer's records between sub-waves (model/ffn.cpp). Every token's numbers
// are the ones a single step computes: waves, chunks and sub-waves change
// only which tokens share a record's read.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "model/engine.h"

namespace sluice {

PrefillStats Engine::prefill_stats() const {
    PrefillStats s = prefill_;
    s.wave_tokens = wave_tokens_;
    return s;
}

Status Engine::eval_chunks(const int32_t *tokens, int64_t n, float *logits, bool all) {
    const ModelConfig &cfg = c_.config();
    const int64_t V = cfg.vocab;
    const auto t_start = std::chrono::steady_clock::now();
    // The image queue is armed for this call's tokens only; once any row
    // was used the whole queue is spent (VISION.md §6.3).
    splice_cursor_ = 0;
    // Interval checkpoints are for prompts: a decode step (n = 1) takes
    // none, since in a small pool the reply's would evict the prompt's end,
    // which is where a next turn that re-renders the reply (a client that
    // drops the reasoning) diverges.
    const int every = ckpt_capacity_ > 0 && n > 1 ? opt_.checkpoint_interval : 0;
    // A prompt's routed experts are recorded whatever its wave size (moe_ffn
    // records while routed is sized); a decode step records none.
    const bool prompt = n > 1 && experts_ != nullptr;
    prompt_.routed.clear();
    if (prompt) {
        prompt_.reads0.assign((size_t)cfg.n_layers, 0);
        prompt_.routed.assign((size_t)cfg.n_layers, {});
        for (int L = 0; L < cfg.n_layers; L++)
            if (moe_ordinal_[(size_t)L] >= 0) prompt_.reads0[(size_t)L] = experts_->layer_reads(L);
        prompt_.waves = 0;
    }
    for (int64_t t0 = 0, m = 0; t0 < n; t0 += m) {
        m = std::min<int64_t>(wave_tokens_, n - t0);
        // Checkpoint positions inside the wave: the pool keeps the newest
        // ckpt_capacity_, so only those are taken (as one at a time would
        // leave them), each layer's KDA state as its chunks pass there.
        // Positions asked for (checkpoint_at: a prompt's end, a rewind's
        // target) come first; interval ones fill what the pool has left.
        std::vector<int> marks, asked;
        if (ckpt_capacity_ > 0)
            for (int p : due_)
                if (p > pos_ && p <= pos_ + m) asked.push_back(p);
        if (every > 0)
            for (int p = (pos_ / every + 1) * every; p <= pos_ + m; p += every)
                if (std::find(asked.begin(), asked.end(), p) == asked.end()) marks.push_back(p);
        const size_t room = ckpt_capacity_ - std::min(ckpt_capacity_, asked.size());
        if (marks.size() > room) marks.erase(marks.begin(), marks.end() - (ptrdiff_t)room);
        if (asked.size() > ckpt_capacity_) asked.erase(asked.begin(), asked.end() - (ptrdiff_t)ckpt_capacity_);
        marks.insert(marks.end(), asked.begin(), asked.end());
        std::sort(marks.begin(), marks.end());
        const bool last = t0 + m == n;
        float *out = nullptr;
        if (logits && all) out = logits + t0 * V;
        else if (logits && last) out = logits;
        for (int p : marks) checkpoint_slot(p);
        SLUICE_TRY(eval_wave(tokens + t0, m, out, all, marks));
        due_.erase(std::remove_if(due_.begin(), due_.end(), [this](int p) { return p <= pos_; }), due_.end());
        prompt_.waves++;
    }
    if (prompt) {
        prefill_.waves = prompt_.waves;
        prefill_.tokens = (uint64_t)n;
        prefill_.layer_reads.clear();
        for (int L = 0; L < cfg.n_layers; L++) {
            if (moe_ordinal_[(size_t)L] < 0) continue;
            const std::vector<char> &r = prompt_.routed[(size_t)L];
            const int64_t distinct = std::count(r.begin(), r.end(), (char)1);
            const uint64_t reads = experts_->layer_reads(L) - prompt_.reads0[(size_t)L];
            prefill_.layer_reads.push_back(distinct > 0 ? (double)reads / (double)distinct : 0.0);
        }
    }
    if (splice_cursor_ > 0) image_clear();
    splice_cursor_ = 0;
    tokens_evaluated_ += (uint64_t)n;
    seconds_eval_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return Status::ok();
}

Status Engine::eval_wave(const int32_t *tokens, int64_t n, float *logits, bool all, const std::vector<int> &marks) {
    const ModelConfig &cfg = c_.config();
    const int64_t d = cfg.hidden;
    const int B = cfg.attn_res_block;
    const int64_t chunk = std::max(1, opt_.prefill_chunk);
    std::vector<float> X((size_t)(n * d)), Hn((size_t)(n * d)), Y((size_t)(n * d)), In((size_t)(n * d));
    SLUICE_TRY(embed(tokens, n, X.data()));
    auto trace = [&](int L, const char *stage, const float *M) {
        if (trace_)
            for (int64_t t = 0; t < n; t++) trace_(L, stage, pos_ + (int)t, M + t * d, (int)d);
    };
    trace(-1, "embed", X.data());

    // A corrupted weight (trunk or codebook edits no checksum covers) can
    // turn the stream into NaN/Inf; logits from it are garbage that look like
    // a result. The stream is checked after each block (n*d floats, noise
    // next to the matmuls) so the error names the first layer it happened in.
    auto nonfinite = [&](const float *M, int L, const char *block) -> Status {
        for (int64_t i = 0; i < n * d; i++)
            if (!std::isfinite(M[i]))
                return format_error(c_.dir() + ": layer " + std::to_string(L) + " " + block +
                                    ": the hidden state holds " + (std::isnan(M[i]) ? "NaN" : "Inf") +
                                    " (token position " + std::to_string(pos_ + i / d) +
                                    "); the container's weights are likely corrupt (try --verify / sluice verify)");
        return Status::ok();
    };

    std::vector<std::vector<float>> R;  // AttnRes block history, each n x d
    std::vector<float> P;               // AttnRes partial sum, n x d
    auto mix = [&](const std::vector<float> *last, const float *norm, const float *proj, float *out) {
        std::vector<const float *> vs(R.size() + 1);
        for (int64_t t = 0; t < n; t++) {
            for (size_t i = 0; i < R.size(); i++) vs[i] = R[i].data() + t * d;
            vs[R.size()] = last->data() + t * d;
            attn_res(vs, norm, proj, out + t * d);
        }
    };

    // The mixer over the wave in chunks, in order: each chunk's KDA state and
    // MLA rows are the next one's past, exactly as for separate calls. A KDA
    // layer's chunks end at each mark, where its state is copied out.
    auto attention = [&](int L, const LayerWeights &lw) {
        for (int64_t s0 = 0, m = 0; s0 < n; s0 += m) {
            m = std::min<int64_t>(chunk, n - s0);
            const int at = pos_ + (int)s0;
            if (lw.kda) {
                for (int p : marks)
                    if (p > at && p < at + m) m = p - at;
                kda_block(L, Hn.data() + s0 * d, m, at, Y.data() + s0 * d);
                for (int p : marks)
                    if (p == at + (int)m)
                        for (Checkpoint &c : ckpts_)
                            if (c.pos == p) {
                                c.kda[(size_t)L].S.assign(kda_[(size_t)L].S.begin(), kda_[(size_t)L].S.end());
                                c.kda[(size_t)L].ring.assign(kda_[(size_t)L].ring.begin(), kda_[(size_t)L].ring.end());
                            }
            } else {
                mla_block(L, Hn.data() + s0 * d, m, at, Y.data() + s0 * d);
            }
        }
    };

    for (int L = 0; L < cfg.n_layers; L++) {
        const LayerWeights &lw = w_.layers[(size_t)L];
        const float *a_in = X.data();
        bool p_none = false;
        if (B > 0) {
            P = X;
            if (!R.empty()) {
                mix(&P, lw.sa_res_norm.data(), lw.sa_res_proj.data(), In.data());
                a_in = In.data();
            }
            if (L % B == 0) {
                R.push_back(P);
                p_none = true;
            }
        }
        for (int64_t t = 0; t < n; t++) rmsnorm(a_in + t * d, lw.in_norm.data(), d, cfg.eps, Hn.data() + t * d);
        attention(L, lw);
        float *S = B > 0 ? P.data() : X.data();  // the stream the mixer output lands in
        if (B > 0 && p_none) std::copy(Y.begin(), Y.end(), P.begin());
        else for (int64_t i = 0; i < n * d; i++) S[i] = S[i] + Y[(size_t)i];
        trace(L, "attn", S);
        SLUICE_TRY(nonfinite(S, L, "attention"));

        const float *f_in = X.data();
        if (B > 0) {
            mix(&P, lw.mlp_res_norm.data(), lw.mlp_res_proj.data(), In.data());
            f_in = In.data();
        }
        for (int64_t t = 0; t < n; t++) rmsnorm(f_in + t * d, lw.post_norm.data(), d, cfg.eps, Hn.data() + t * d);
        SLUICE_TRY(ffn_block(L, Hn.data(), n, Y.data()));
        for (int64_t i = 0; i < n * d; i++) S[i] = S[i] + Y[(size_t)i];
        if (B > 0) X = P;
        trace(L, "ffn", X.data());
        SLUICE_TRY(nonfinite(S, L, "ffn"));
    }
    if (B > 0 && !R.empty()) {
        mix(&X, w_.out_res_norm.data(), w_.out_res_proj.data(), In.data());
        X.swap(In);
    }
    trace(-1, "final", X.data());
    pos_ += (int)n;
    if (log_cap_ > 0) {
        // Every KDA layer logged these positions (kda_block).
        log_hi_ = pos_;
        log_lo_ = std::max(log_lo_, pos_ - log_cap_);
    }

    if (logits) {
        const int64_t first = all ? 0 : n - 1;
        const int64_t cnt = n - first;
        for (int64_t t = first; t < n; t++)
            rmsnorm(X.data() + t * d, w_.final_norm.data(), d, cfg.eps, Hn.data() + (t - first) * d);
        ops_.matmul(w_.lm_head, Hn.data(), d, cnt, logits, cfg.vocab);
        for (int64_t i = 0; i < cnt * (int64_t)cfg.vocab; i++)
            if (!std::isfinite(logits[i]))
                return format_error(c_.dir() + ": the logits hold NaN/Inf at token position " +
                                    std::to_string(pos_ - n + first + i / cfg.vocab) + ", vocab " +
                                    std::to_string(i % cfg.vocab) + " (final norm or lm_head; every layer was finite)");
    }
    return Status::ok();
}

}  // namespace sluice
