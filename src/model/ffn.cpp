// Dense FFN and the sigmoid-routed mixture of experts (MODEL.md §6-7).
// In a chunk, each distinct routed expert is fetched once and applied to
// every token that chose it; each token then sums its experts in selection
// order, so a chunk gives exactly the single-step result.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>

#include "format/f16.h"
#include "model/engine.h"

namespace sluice {

void Engine::act(float *a, const float *b, int64_t n) const {
    const ModelConfig &cfg = c_.config();
    if (cfg.situ) {
        const float b1 = cfg.situ_beta, b2 = cfg.situ_linear_beta;
        for (int64_t i = 0; i < n; i++) {
            const float up = b2 > 0.0f ? b2 * std::tanh(b[i] / b2) : b[i];
            a[i] = (b1 * std::tanh(a[i] / b1)) * sigmoidf(a[i]) * up;
        }
    } else {
        for (int64_t i = 0; i < n; i++) a[i] = siluf(a[i]) * b[i];
    }
}

void Engine::dense_ffn(const DenseWeights &w, const float *Hn, int64_t n, float *out) {
    const int64_t I = w.gate.rows, d = c_.config().hidden;
    // In chunks: a wave's n x I intermediates would be gigabytes at 4,096
    // tokens, and a token's row is the same in any batch.
    const int64_t chunk = std::min<int64_t>(n, std::max(1, opt_.prefill_chunk));
    std::vector<float> A((size_t)(chunk * I)), Bv((size_t)(chunk * I));
    for (int64_t s0 = 0; s0 < n; s0 += chunk) {
        const int64_t m = std::min(chunk, n - s0);
        ops_.matmul(w.gate, Hn + s0 * d, m, A.data());
        ops_.matmul(w.up, Hn + s0 * d, m, Bv.data());
        act(A.data(), Bv.data(), m * I);
        ops_.matmul(w.down, A.data(), m, out + s0 * d);
    }
}

void Engine::quantize_table(const float *T, int64_t nv, int8_t *Tq, float *lam, int L, int pos, int kind,
                            int expert) {
    vq_quantize_table_i8(T, nv, Tq, lam);
    const Vq4pEntry &f = opt_.vq4p_flip;
    const bool flip = f.layer == L && f.pos == pos && f.kind == kind && f.expert == expert;
    if (!opt_.vq4p_diag && !flip) return;
    for (int64_t b0 = 0; b0 < nv; b0 += 32) {
        const int64_t b1 = std::min<int64_t>(b0 + 32, nv);
        float M = 0.0f;
        for (int64_t i = b0 * 256; i < b1 * 256; i++) M = std::fmax(M, std::fabs(T[i]));
        if (M == 0.0f) continue;
        const float fct = 127.0f / M;
        for (int64_t i = b0 * 256; i < b1 * 256; i++) {
            const float v = T[i] * fct;
            const double margin = std::fabs(std::fabs((double)v - std::floor((double)v)) - 0.5);
            if (flip && i == f.index) {
                const int q = Tq[i];
                const int alt = (double)v > q ? q + 1 : q - 1;
                Tq[i] = (int8_t)std::clamp(alt, -127, 127);
            }
            if (opt_.vq4p_diag && margin < opt_.vq4p_band && std::fabs(v) < 127.0f &&
                vq4p_near_.size() < kVq4pMaxTies)
                vq4p_near_.push_back({L, pos, kind, expert, i, margin, v, (int)Tq[i]});
        }
    }
}

std::vector<Vq4pEntry> Engine::vq4p_near_ties() const {
    std::vector<Vq4pEntry> v = vq4p_near_;
    std::sort(v.begin(), v.end(), [](const Vq4pEntry &a, const Vq4pEntry &b) { return a.margin < b.margin; });
    return v;
}

Status Engine::ffn_block(int L, const float *Hn, int64_t n, float *out) {
    const LayerWeights &lw = w_.layers[(size_t)L];
    if (!lw.moe) {
        dense_ffn(lw.dense, Hn, n, out);
        return Status::ok();
    }
    return moe_ffn(L, Hn, n, out);
}

// Sigmoid scores, bias for selection only, strict > so equal keys go to the
// lower index; renormalise (presence flag) before the routed scale (§7.1).
void Engine::route(const MoeWeights &mw, const float *logits, int64_t n, int *sel, float *wt) const {
    const ModelConfig &cfg = c_.config();
    const int64_t E = cfg.n_experts, k = cfg.top_k;
    std::vector<float> s((size_t)E), key((size_t)E);
    std::vector<char> taken((size_t)E);
    for (int64_t t = 0; t < n; t++) {
        for (int64_t e = 0; e < E; e++) {
            s[(size_t)e] = sigmoidf(logits[t * E + e]);
            key[(size_t)e] = mw.bias.empty() ? s[(size_t)e] : s[(size_t)e] + mw.bias[(size_t)e];
        }
        std::fill(taken.begin(), taken.end(), 0);
        float sum = 0.0f;
        for (int64_t j = 0; j < k; j++) {
            int64_t best = -1;
            for (int64_t e = 0; e < E; e++)
                if (!taken[(size_t)e] && (best < 0 || key[(size_t)e] > key[(size_t)best])) best = e;
            taken[(size_t)best] = 1;
            sel[t * k + j] = (int)best;
            wt[t * k + j] = s[(size_t)best];
            sum += s[(size_t)best];
        }
        for (int64_t j = 0; j < k; j++) {
            float &w = wt[t * k + j];
            if (cfg.renormalize && k > 1) w = w / (sum + 1e-20f);
            w = w * cfg.routed_scaling;
        }
    }
}

// Benchmark-only route replay: the trace's experts for this position and
// MoE layer replace the router's (ids folded into range, duplicates moved
// to the next free id, so a token still has k distinct experts). The
// router's weights are kept: the numbers are meaningless by design.
void Engine::replay_routes(int L, int64_t n, int *sel) const {
    const RouteTrace &tr = *opt_.route_replay;
    const ModelConfig &cfg = c_.config();
    const int64_t E = cfg.n_experts, k = cfg.top_k;
    int m = 0;
    for (int i = 0; i < L; i++) m += w_.layers[(size_t)i].moe ? 1 : 0;
    m %= tr.moe_layers;
    for (int64_t t = 0; t < n; t++) {
        const std::vector<int> &ids = tr.tokens[(size_t)(pos_ + t) % tr.tokens.size()][(size_t)m];
        std::vector<char> used((size_t)E, 0);
        for (int64_t j = 0; j < k; j++) {
            int e = (int)((ids[(size_t)j % ids.size()] + (int64_t)(j / (int64_t)ids.size())) % E);
            while (used[(size_t)e]) e = (int)((e + 1) % E);
            used[(size_t)e] = 1;
            sel[t * k + j] = e;
        }
    }
}

Status Engine::moe_ffn(int L, const float *Hn, int64_t n, float *out) {
    const ModelConfig &cfg = c_.config();
    const MoeWeights &mw = w_.layers[(size_t)L].moe_w;
    const int64_t d = cfg.hidden, E = cfg.n_experts, k = cfg.top_k;

    // Router (§7.1), for the whole wave: its distinct experts are what the
    // wave reads.
    std::vector<float> logits((size_t)(n * E));
    ops_.matmul(mw.router, Hn, n, logits.data());
    std::vector<int> sel((size_t)(n * k));
    std::vector<float> wt((size_t)(n * k));
    route(mw, logits.data(), n, sel.data(), wt.data());
    logits = {};
    if (opt_.route_replay) replay_routes(L, n, sel.data());
    if (record_routes_) {
        const int m = moe_ordinal_[(size_t)L];
        const size_t n_moe = (size_t)*std::max_element(moe_ordinal_.begin(), moe_ordinal_.end()) + 1;
        for (int64_t i = 0; i < n; i++) {
            std::vector<std::vector<int>> &v = routes_[pos_ + (int)i];
            v.resize(n_moe);
            v[(size_t)m].assign(sel.begin() + i * k, sel.begin() + (i + 1) * k);
        }
    }

    // Read-ahead: request every routed record now, so the reads overlap the
    // shared expert and the table builds below.
    std::vector<int> distinct(sel.begin(), sel.end());
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    if ((size_t)L < prompt_.routed.size()) {
        std::vector<char> &r = prompt_.routed[(size_t)L];
        r.resize((size_t)E, 0);
        for (int e : distinct) r[(size_t)e] = 1;
    }
    if (opt_.readahead) experts_->prefetch(L, distinct, false);
    // Router lookahead: the next MoE layer's router on this hidden state.
    // A wrong guess costs bandwidth; the real router still decides.
    if (opt_.lookahead && L + 1 < cfg.n_layers && w_.layers[(size_t)L + 1].moe) {
        const MoeWeights &nw = w_.layers[(size_t)L + 1].moe_w;
        std::vector<float> nl((size_t)(n * E));
        ops_.matmul(nw.router, Hn, n, nl.data());
        std::vector<int> nsel((size_t)(n * k));
        std::vector<float> nwt((size_t)(n * k));
        route(nw, nl.data(), n, nsel.data(), nwt.data());
        std::sort(nsel.begin(), nsel.end());
        nsel.erase(std::unique(nsel.begin(), nsel.end()), nsel.end());
        experts_->prefetch(L + 1, nsel, true);
    }

    // The routed experts in sub-waves of the plan's expert batch (their VQ
    // tables are per token: a wave's would be gigabytes). Where the cache can hold
    // the wave's records, each is kept from its first sub-wave to the last,
    // so it is read once for the wave; else each sub-wave fetches its own.
    const int64_t chunk = std::min<int64_t>(n, std::max<int64_t>({1, opt_.prefill_chunk, plan_.batch_tokens}));
    std::vector<ExpertRef> held;
    const bool hold = n > chunk && (int64_t)distinct.size() <= experts_->hold_capacity();
    if (hold) {
        held.resize((size_t)E);
        experts_->set_holding(true);
    }
    Status st;
    for (int64_t s0 = 0; s0 < n && st; s0 += chunk) {
        const int64_t m = std::min(chunk, n - s0);
        st = moe_routed(L, Hn + s0 * d, m, pos_ + (int)s0, sel.data() + s0 * k, wt.data() + s0 * k, out + s0 * d,
                        hold ? &held : nullptr);
    }
    if (hold) {
        held.clear();
        experts_->set_holding(false);
    }
    return st;
}

Status Engine::moe_routed(int L, const float *Hn, int64_t n, int pos0, const int *sel, const float *wt, float *out,
                          std::vector<ExpertRef> *held) {
    const ModelConfig &cfg = c_.config();
    const MoeWeights &mw = w_.layers[(size_t)L].moe_w;
    const int64_t d = cfg.hidden, k = cfg.top_k, nin = cfg.expert_in(), I = cfg.moe_inter;
    const ExpertGeom &g = geom_;
    const int S = g.stages;
    const bool p6 = g.index_bits == 6;
    const int Es = c_.book_entries();  // table stride per (v, s)

    // Shared experts on the full hidden state (§7.2), while reads run.
    const int64_t W = mw.sh_gate.rows;
    // Engine-owned like the tables below: at a wave of 459 tokens these are
    // megabytes each, and fresh vectors were mapped, faulted in and zeroed
    // per layer (page faults cost 0.3-0.5 GB/s on the benchmark VM).
    auto grow = [](std::vector<float> &v, int64_t n_) -> std::vector<float> & {
        if (v.size() < (size_t)n_) v.resize((size_t)n_);
        return v;
    };
    std::vector<float> &A = grow(moe_scratch_.sh_a, n * W), &Bv = grow(moe_scratch_.sh_b, n * W);
    ops_.matmul(mw.sh_gate, Hn, n, A.data());
    ops_.matmul(mw.sh_up, Hn, n, Bv.data());
    act(A.data(), Bv.data(), n * W);
    ops_.matmul(mw.sh_down, A.data(), n, out);

    // Routed experts' input: the latent projection for K3, else h.
    const float *Xin = Hn;
    if (cfg.r_lat > 0) {
        std::vector<float> &Xl = grow(moe_scratch_.xl, n * nin);
        ops_.matmul(mw.lat_down, Hn, n, Xl.data());
        Xin = Xl.data();
    }

    // Gate/up tables per token from the layer's books (every record carries
    // the layer's codebook_base; checked at read).
    const int64_t nv_in = nin / 8, nv_I = I / 8;
    const size_t tsz_in = (size_t)(nv_in * S * Es);
    // Engine-owned scratch, grown once and reused: fresh vectors here were
    // 113 MB of page faults and memset per layer for a 64-token chunk (30 %
    // of prefill in a profile). Every element read is written first.
    float *const Tg = moe_scratch_.tg.grow(n * (int64_t)tsz_in), *const Tu = moe_scratch_.tu.grow(n * (int64_t)tsz_in);
    std::vector<int8_t> Tgq, Tuq;
    std::vector<float> lg, lu;
    const int64_t nb_in = (nv_in + 31) / 32;
    {
        const float *bg[8], *bu[8];
        for (int s = 0; s < S; s++) {
            bg[s] = c_.book(mw.codebook_base + 0 * S + s);
            bu[s] = c_.book(mw.codebook_base + 1 * S + s);
        }
        ops_.pool->parallel_for(n, std::max<int64_t>(1, 65536 / (nv_in * S * Es * 8)), [&](int64_t t0, int64_t t1) {
            for (int64_t t = t0; t < t1; t++) {
                ops_.k->vq_table(Xin + t * nin, nv_in, S, Es, bg, Tg + t * tsz_in);
                ops_.k->vq_table(Xin + t * nin, nv_in, S, Es, bu, Tu + t * tsz_in);
            }
        });
        if (p6) {
            // +64: the gather kernels read whole words at byte offsets.
            Tgq.resize((size_t)n * tsz_in + 64);
            Tuq.resize((size_t)n * tsz_in + 64);
            lg.resize((size_t)(n * nb_in));
            lu.resize((size_t)(n * nb_in));
            for (int64_t t = 0; t < n; t++) {
                quantize_table(Tg + t * tsz_in, nv_in, Tgq.data() + t * tsz_in, lg.data() + t * nb_in, L,
                               pos0 + (int)t, 0, -1);
                quantize_table(Tu + t * tsz_in, nv_in, Tuq.data() + t * tsz_in, lu.data() + t * nb_in, L,
                               pos0 + (int)t, 1, -1);
            }
        }
    }

    // Distinct experts in ascending id, each fetched once per chunk.
    std::map<int, std::vector<std::pair<int64_t, int64_t>>> users;  // expert -> (token, slot)
    for (int64_t t = 0; t < n; t++)
        for (int64_t j = 0; j < k; j++) users[sel[(size_t)(t * k + j)]].push_back({t, j});
    std::vector<const std::pair<const int, std::vector<std::pair<int64_t, int64_t>>> *> tasks;
    for (const auto &u : users) tasks.push_back(&u);
    std::vector<float> &Yexp = moe_scratch_.yexp;  // per (token, slot) expert output
    if (Yexp.size() < (size_t)(n * k * nin)) Yexp.resize((size_t)(n * k * nin));

    // One routed expert for its users. `split` runs a product's rows over
    // the pool; without it the calling thread does all rows. A row's sum
    // order is the same either way, so both give the same bits.
    // `worker` (expert-parallel only, else -1) names the pool thread's
    // scratch for the shared-code product.
    auto run_expert = [&](int e, const std::vector<std::pair<int64_t, int64_t>> &list, bool split,
                          int worker) -> Status {
        ExpertRef ref;
        if (held && (*held)[(size_t)e]) {
            ref = (*held)[(size_t)e];
        } else {
            SLUICE_TRY(experts_->fetch(L, e, &ref));
            // Each expert of a sub-wave is one task: no two threads write a slot.
            if (held) (*held)[(size_t)e] = ref;
        }
        const ExpertView &ev = ref->view;
        std::vector<float> sg((size_t)I), su((size_t)I), sd((size_t)nin);
        for (int64_t i = 0; i < I; i++) {
            sg[(size_t)i] = f16_scale(rd16(ev.scales + 2 * i));
            su[(size_t)i] = f16_scale(rd16(ev.scales + 2 * (I + i)));
        }
        for (int64_t i = 0; i < nin; i++) sd[(size_t)i] = f16_scale(rd16(ev.scales + 2 * (2 * I + i)));
        const float *bd[8];
        for (int s = 0; s < S; s++) bd[s] = c_.book(ev.codebook_id + 2 * S + s);
        // One token's gate/up outputs and down table: the pool worker's
        // buffers where there is one. Fresh vectors here (the table is
        // 384 KB at the 48B shape) were mapped, faulted in and zeroed for
        // every expert: 14 % of a 512-token prefill (perf, AVX-512).
        std::vector<float> own_a, own_b, own_td;
        MoeScratch::Tokens *ws = worker >= 0 ? &moe_scratch_.tokens[(size_t)worker] : nullptr;
        std::vector<float> &va = ws ? ws->a : own_a, &vb = ws ? ws->b : own_b, &vtd = ws ? ws->td : own_td;
        std::vector<int8_t> Tdq;
        std::vector<float> ld;
        auto gemv = [&](const float *T, const int8_t *Tq, const float *lam, const uint8_t *idx, int64_t nv,
                        const float *sc, float *dst, int64_t rows) {
            auto body = [&](int64_t r0, int64_t r1) {
                if (p6) ops_.k->vq_gemv_p6(Tq, lam, idx, nv, sc, dst, r0, r1);
                else ops_.k->vq_gemv_u8(T, idx, nv, S, Es, sc, dst, r0, r1);
            };
            if (split) ops_.pool->parallel_for(rows, std::max<int64_t>(64, 65536 / (nv * S)), body);
            else body(0, rows);
        };
        // Four or more of the chunk's tokens on this expert: their products
        // share each code byte (vq_gemm_u8_tokens), in groups of at most
        // kVqTokensMax. Same bits as one token at a time.
        if (!p6 && worker >= 0 && ops_.k->vq_gemm_u8_tokens && list.size() >= 4) {
            MoeScratch::Tokens &w = moe_scratch_.tokens[(size_t)worker];
            const int64_t G = kVqTokensMax, tsz_I = nv_I * S * Es;
            grow(w.a, G * I);
            grow(w.b, G * I);
            grow(w.td, G * tsz_I);
            grow(w.scratch, vq_tokens_scratch(G, std::max(I, nin), S, Es));
            for (size_t g0 = 0; g0 < list.size(); g0 += (size_t)G) {
                const int64_t m = std::min<int64_t>(G, (int64_t)(list.size() - g0));
                const float *tg[kVqTokensMax], *tu[kVqTokensMax], *td[kVqTokensMax];
                float *ya[kVqTokensMax], *yb[kVqTokensMax], *yd[kVqTokensMax];
                for (int64_t i = 0; i < m; i++) {
                    const auto [t, j] = list[g0 + (size_t)i];
                    tg[i] = Tg + (size_t)t * tsz_in;
                    tu[i] = Tu + (size_t)t * tsz_in;
                    ya[i] = w.a.data() + i * I;
                    yb[i] = w.b.data() + i * I;
                    td[i] = w.td.data() + i * tsz_I;
                    yd[i] = Yexp.data() + (t * k + j) * nin;
                }
                ops_.k->vq_gemm_u8_tokens(tg, m, ev.gate, nv_in, S, Es, sg.data(), ya, 0, I, w.scratch.data());
                ops_.k->vq_gemm_u8_tokens(tu, m, ev.up, nv_in, S, Es, su.data(), yb, 0, I, w.scratch.data());
                for (int64_t i = 0; i < m; i++) {
                    act(ya[i], yb[i], I);
                    ops_.k->vq_table(ya[i], nv_I, S, Es, bd, w.td.data() + i * tsz_I);
                }
                ops_.k->vq_gemm_u8_tokens(td, m, ev.down, nv_I, S, Es, sd.data(), yd, 0, nin, w.scratch.data());
            }
            return Status::ok();
        }
        float *const a = grow(va, I).data(), *const b = grow(vb, I).data(), *const Td = grow(vtd, nv_I * S * Es).data();
        for (const auto &[t, j] : list) {
            float *y = Yexp.data() + (t * k + j) * nin;
            const size_t to = (size_t)t * tsz_in;
            gemv(Tg + to, p6 ? Tgq.data() + to : nullptr, p6 ? lg.data() + t * nb_in : nullptr, ev.gate,
                 nv_in, sg.data(), a, I);
            gemv(Tu + to, p6 ? Tuq.data() + to : nullptr, p6 ? lu.data() + t * nb_in : nullptr, ev.up, nv_in,
                 su.data(), b, I);
            act(a, b, I);
            ops_.k->vq_table(a, nv_I, S, Es, bd, Td);
            if (p6) {
                Tdq.resize((size_t)(nv_I * S * Es) + 64);
                ld.resize((size_t)((nv_I + 31) / 32));
                // Serialised: it records near-ties in engine state (diagnostics).
                std::lock_guard<std::mutex> lk(vq4p_mu_);
                quantize_table(Td, nv_I, Tdq.data(), ld.data(), L, pos0 + (int)t, 2, e);
            }
            gemv(Td, Tdq.data(), ld.data(), ev.down, nv_I, sd.data(), y, nin);
        }
        return Status::ok();
    };

    const int nthr = ops_.pool->size();
    if (nthr > 1 && (int64_t)tasks.size() >= 2 * nthr) {
        // Expert-parallel: each thread takes whole experts, next-free first.
        // Splitting every product's rows instead costs three pool round
        // trips per expert (~24 per layer at top-8), and the spin-waits
        // there were ~20% of decode; here a layer costs one.
        std::atomic<size_t> next{0};
        std::vector<Status> st(tasks.size());
        // A prefill chunk routes to ~200 distinct experts per layer, far
        // more than the read-ahead allowance (2 x top-k records) admits at
        // the layer start. Without this sliding window the later experts
        // are synchronous reads: 64-token prefill at 2 GB took 8.5-8.8 s
        // against 7.4 s with it (bench_budget --chunk 64, 2026-12-03).
        const size_t ahead = opt_.readahead ? (size_t)(2 * k) : 0;
        if (moe_scratch_.tokens.size() < (size_t)nthr) moe_scratch_.tokens.resize((size_t)nthr);
        ops_.pool->parallel_for(nthr, 1, [&](int64_t w0, int64_t) {
            std::vector<int> win;
            for (size_t i; (i = next.fetch_add(1)) < tasks.size();) {
                if (ahead && tasks.size() > ahead) {
                    win.clear();
                    for (size_t j = i + 1; j < tasks.size() && j <= i + ahead; j++) win.push_back(tasks[j]->first);
                    experts_->prefetch(L, win, false);
                }
                st[i] = run_expert(tasks[i]->first, tasks[i]->second, false, (int)w0);
            }
        });
        for (const Status &s : st) SLUICE_TRY(s);
    } else {
        for (const auto *u : tasks) SLUICE_TRY(run_expert(u->first, u->second, true, -1));
    }

    // Weighted sum in selection order, latent norm and up-projection.
    // Tokens over the pool (each token's sum is its own, in slot order): on
    // the calling thread alone it was 2 % of a 512-token prefill, the other
    // core idle, the wave's expert outputs (37 MB) streamed from memory.
    std::vector<float> &Yr = grow(moe_scratch_.yr, n * nin);
    ops_.pool->parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, k * nin)), [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; t++) {
            float *yr = Yr.data() + t * nin;
            std::fill(yr, yr + nin, 0.0f);
            for (int64_t j = 0; j < k; j++) {
                const float w = wt[(size_t)(t * k + j)];
                ops_.k->axpy(w, Yexp.data() + (t * k + j) * nin, yr, nin);
            }
        }
    });
    std::vector<float> &Yd = grow(moe_scratch_.yd, n * d);
    const float *routed = Yr.data();
    if (cfg.r_lat > 0) {
        if (!mw.lat_norm.empty())
            for (int64_t t = 0; t < n; t++)
                rmsnorm(Yr.data() + t * nin, mw.lat_norm.data(), nin, cfg.eps, Yr.data() + t * nin);
        ops_.matmul(mw.lat_up, Yr.data(), n, Yd.data());
        routed = Yd.data();
    }

    for (int64_t i = 0; i < n * d; i++) out[i] = routed[i] + out[i];
    return Status::ok();
}

}  // namespace sluice
