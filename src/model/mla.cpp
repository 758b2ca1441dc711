// Multi-head Latent Attention (MODEL.md §5), evaluated in the absorbed
// form: only the normalised latent and the rope key are cached, and the
// per-head up-projections are applied on the fly from the quantized
// kv_b_proj rows (no f32 copy of kv_b_proj is kept).
#include <algorithm>
#include <cmath>

#include "model/engine.h"

namespace sluice {
namespace {

// Dequantizes row r of W into out via the row kernel against unit vectors
// would be slow; instead decode directly (same values as FORMAT.md §4.3).
void dequant_row(const QTensor &W, int64_t r, float *out) {
    const uint8_t *q = W.row(r);
    if (W.fmt == QFmt::F32) {
        std::copy(W.f32() + r * W.cols, W.f32() + (r + 1) * W.cols, out);
        return;
    }
    // One loop per format and group, so the compiler vectorises it: this runs
    // for dn rows per head per token (the absorbed key projection), and a
    // per-element format switch and group division made it ~6% of decode.
    const float *sc = W.row_scales(r);
    for (int64_t g = 0; g < W.ng; g++) {
        const int64_t i0 = g * W.group, i1 = std::min<int64_t>(W.cols, i0 + W.group);
        const float s = sc[g];
        if (W.fmt == QFmt::Q8G) {
            const int8_t *q8 = reinterpret_cast<const int8_t *>(q);
            for (int64_t i = i0; i < i1; i++) out[i] = (float)q8[i] * s;
        } else if (W.fmt == QFmt::Q4G) {
            for (int64_t i = i0; i < i1; i += 2) {
                const uint8_t b = q[i >> 1];
                out[i] = (float)((int)(b & 15) - 8) * s;
                if (i + 1 < i1) out[i + 1] = (float)((int)(b >> 4) - 8) * s;
            }
        } else {
            for (int64_t i = i0; i < i1; i++) {
                const int64_t p = 3 * i;
                const unsigned v = q[p >> 3] | ((unsigned)q[(p >> 3) + 1] << 8);
                out[i] = (float)((int)((v >> (p & 7)) & 7) - 4) * s;
            }
        }
    }
}

}  // namespace

void Engine::mla_block(int L, const float *Hn, int64_t n, int pos0, float *out) {
    const ModelConfig &cfg = c_.config();
    const MlaWeights &w = w_.layers[(size_t)L].m;
    MlaState &st = mla_[(size_t)L];
    const int64_t nh = cfg.n_heads, dn = cfg.d_nope, dr = cfg.d_rope, dv = cfg.d_v, dq = dn + dr;
    const int64_t rkv = cfg.kv_lora, row = rkv + dr;
    AttnScratch &sb = attn_scratch_;
    float *const Q = scratch(sb.q, n * nh * dq), *const KVA = scratch(sb.kva, n * row), *const O = scratch(sb.o, n * nh * dv);
    if (cfg.q_lora > 0) {
        float *const QA = scratch(sb.fa, n * cfg.q_lora);
        ops_.matmul(w.qa, Hn, n, QA);
        for (int64_t t = 0; t < n; t++)
            rmsnorm(QA + t * cfg.q_lora, w.qa_norm.data(), cfg.q_lora, cfg.eps, QA + t * cfg.q_lora);
        ops_.matmul(w.qb, QA, n, Q);
    } else {
        ops_.matmul(w.q, Hn, n, Q);
    }
    ops_.matmul(w.kva, Hn, n, KVA);
    float *Gt = nullptr;
    if (cfg.mla_output_gate) {
        Gt = scratch(sb.g, n * nh * dv);
        ops_.matmul(w.g, Hn, n, Gt);
    }

    auto rotate = [&](float *x, int p) {
        for (int64_t j = 0; j < dr / 2; j++) {
            const float phi = (float)p * rope_freq_[(size_t)j];
            const float c = std::cos(phi), s = std::sin(phi);
            const float a = x[2 * j], b = x[2 * j + 1];  // adjacent pairs (§5.3)
            x[2 * j] = a * c - b * s;
            x[2 * j + 1] = a * s + b * c;
        }
    };

    // W_UK of every head as floats, once per chunk of prompt tokens: each
    // token dequantized every row again (7.5 % of a 512-token prefill on
    // the 48B shape, perf). The same floats in the same order of adds, so
    // the same bits; a single token (decode) keeps the one-row buffer, as
    // a whole-matrix copy would leave the cache for every step.
    const float *wuk = nullptr;
    if (n > 1) {
        if (mla_wuk_.size() < (size_t)(nh * dn * rkv)) mla_wuk_.resize((size_t)(nh * dn * rkv));
        ops_.pool->parallel_for(nh * dn, 16, [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; i++)
                dequant_row(w.kvb, (i / dn) * (dn + dv) + i % dn, mla_wuk_.data() + i * rkv);
        });
        wuk = mla_wuk_.data();
    }

    // Every token's (normalised latent, rope key) appended first: token t
    // reads slots [0, pos0 + t] only, so the later ones change none of its
    // numbers.
    const int64_t len0 = st.len;
    st.cache.resize((size_t)((len0 + n) * row));
    for (int64_t t = 0; t < n; t++) {
        const int p = pos0 + (int)t;
        const float *a = KVA + t * row;
        float *slot = st.cache.data() + (size_t)(len0 + t) * row;
        rmsnorm(a, w.kva_norm.data(), rkv, cfg.eps, slot);
        std::copy(a + rkv, a + row, slot + rkv);
        if (cfg.rope.enabled) {
            rotate(slot + rkv, p);
            float *q = Q + t * nh * dq;
            for (int64_t h = 0; h < nh; h++) rotate(q + h * dq + dn, p);
        }
    }
    st.len = (int)(len0 + n);

    // Keys in blocks that stay in L2 (64 x 576 floats on the 48B shape)
    // while every head and token of a thread's share scores and sums them:
    // head by head, each token streamed the whole cache from memory once
    // per head (32 times per token and layer; most of what an agent's turn
    // on a 1,500-token prefix spent beyond its new tokens). Each score is
    // the same two dots, and each ctx element adds its keys in order
    // (block by block, ascending), so the bits are those of the per-head
    // loop, whatever the token block.
    const int64_t kb = std::max<int64_t>(16, 65536 / std::max<int64_t>(1, row) / 16 * 16);
    constexpr int64_t kTokens = 4;
    const float *cache = st.cache.data();
    ops_.pool->parallel_for(nh, 1, [&](int64_t h0, int64_t h1) {
        const int64_t hn = h1 - h0;
        std::vector<float> qt((size_t)(kTokens * hn * rkv)), wrow((size_t)rkv), ctx((size_t)(kTokens * hn * rkv));
        std::vector<float> e, sums((size_t)(kTokens * hn));
        for (int64_t t0 = 0; t0 < n; t0 += kTokens) {
            const int64_t tn = std::min(kTokens, n - t0);
            const int64_t ns_max = len0 + t0 + tn;  // keys of the block's last token
            e.resize((size_t)(tn * hn * ns_max));
            // q̃ = W_UKᵀ q_nope (absorbed key up-projection), per token and head.
            for (int64_t t = 0; t < tn; t++)
                for (int64_t h = h0; h < h1; h++) {
                    const float *qn = Q + (t0 + t) * nh * dq + h * dq;
                    float *q = qt.data() + (t * hn + h - h0) * rkv;
                    std::fill(q, q + rkv, 0.0f);
                    for (int64_t i = 0; i < dn; i++) {
                        const float *wr = wrow.data();
                        if (wuk) wr = wuk + (h * dn + i) * rkv;
                        else dequant_row(w.kvb, h * (dn + dv) + i, wrow.data());
                        ops_.k->axpy(qn[i], wr, q, rkv);
                    }
                }
            for (int64_t s0 = 0; s0 < ns_max; s0 += kb)
                for (int64_t t = 0; t < tn; t++) {
                    const int64_t s1 = std::min(s0 + kb, len0 + t0 + t + 1);
                    for (int64_t h = h0; h < h1; h++) {
                        const float *q = qt.data() + (t * hn + h - h0) * rkv;
                        const float *qr = Q + (t0 + t) * nh * dq + h * dq + dn;
                        float *eh = e.data() + (t * hn + h - h0) * ns_max;
                        for (int64_t s = s0; s < s1; s++) {
                            const float *cs = cache + s * row;
                            eh[s] = mla_scale_ * (ops_.k->dot(q, cs, rkv) + ops_.k->dot(qr, cs + rkv, dr));
                        }
                    }
                }
            for (int64_t t = 0; t < tn; t++) {
                const int64_t ns = len0 + t0 + t + 1;
                for (int64_t h = 0; h < hn; h++) {
                    float *eh = e.data() + (t * hn + h) * ns_max;
                    float mx = -INFINITY;
                    for (int64_t s = 0; s < ns; s++) mx = std::max(mx, eh[s]);
                    float sum = 0.0f;
                    for (int64_t s = 0; s < ns; s++) sum += (eh[s] = std::exp(eh[s] - mx));
                    sums[(size_t)(t * hn + h)] = sum;
                }
            }
            std::fill(ctx.begin(), ctx.begin() + tn * hn * rkv, 0.0f);
            for (int64_t s0 = 0; s0 < ns_max; s0 += kb)
                for (int64_t t = 0; t < tn; t++) {
                    const int64_t s1 = std::min(s0 + kb, len0 + t0 + t + 1);
                    for (int64_t h = 0; h < hn; h++) {
                        const float *eh = e.data() + (t * hn + h) * ns_max;
                        const float sum = sums[(size_t)(t * hn + h)];
                        float *c = ctx.data() + (t * hn + h) * rkv;
                        for (int64_t s = s0; s < s1; s++) ops_.k->axpy(eh[s] / sum, cache + s * row, c, rkv);
                    }
                }
            // o_h = W_UV^h · ctx.
            for (int64_t t = 0; t < tn; t++) {
                float *o = O + (t0 + t) * nh * dv;
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t i = 0; i < dv; i++)
                        o[h * dv + i] = ops_.k->row_dot[(int)w.kvb.fmt](w.kvb, h * (dn + dv) + dn + i,
                                                                      ctx.data() + (t * hn + h - h0) * rkv);
            }
        }
    });
    if (cfg.mla_output_gate)
        for (int64_t i = 0; i < n * nh * dv; i++) O[i] = O[i] * sigmoidf(Gt[i]);
    ops_.matmul(w.o, O, n, out);
}

}  // namespace sluice
