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
    std::vector<float> Q((size_t)(n * nh * dq)), KVA((size_t)(n * row)), O((size_t)(n * nh * dv));
    if (cfg.q_lora > 0) {
        std::vector<float> QA((size_t)(n * cfg.q_lora));
        ops_.matmul(w.qa, Hn, n, QA.data());
        for (int64_t t = 0; t < n; t++)
            rmsnorm(QA.data() + t * cfg.q_lora, w.qa_norm.data(), cfg.q_lora, cfg.eps, QA.data() + t * cfg.q_lora);
        ops_.matmul(w.qb, QA.data(), n, Q.data());
    } else {
        ops_.matmul(w.q, Hn, n, Q.data());
    }
    ops_.matmul(w.kva, Hn, n, KVA.data());
    std::vector<float> Gt;
    if (cfg.mla_output_gate) {
        Gt.resize((size_t)(n * nh * dv));
        ops_.matmul(w.g, Hn, n, Gt.data());
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

    for (int64_t t = 0; t < n; t++) {
        const int p = pos0 + (int)t;
        float *q = Q.data() + t * nh * dq;
        const float *a = KVA.data() + t * row;
        // Append (normalised latent, rope key) at slot p.
        st.cache.resize((size_t)((st.len + 1) * row));
        float *slot = st.cache.data() + (size_t)st.len * row;
        rmsnorm(a, w.kva_norm.data(), rkv, cfg.eps, slot);
        std::copy(a + rkv, a + row, slot + rkv);
        if (cfg.rope.enabled) {
            rotate(slot + rkv, p);
            for (int64_t h = 0; h < nh; h++) rotate(q + h * dq + dn, p);
        }
        st.len++;
        const int64_t ns = st.len;
        float *o = O.data() + t * nh * dv;
        ops_.pool->parallel_for(nh, std::max<int64_t>(1, 65536 / ((dn + dv) * rkv + ns * rkv)), [&](int64_t h0, int64_t h1) {
            std::vector<float> qt((size_t)rkv), wrow((size_t)rkv), e((size_t)ns), ctx((size_t)rkv);
            for (int64_t h = h0; h < h1; h++) {
                const float *qn = q + h * dq, *qr = qn + dn;
                // q̃ = W_UKᵀ q_nope (absorbed key up-projection).
                std::fill(qt.begin(), qt.end(), 0.0f);
                for (int64_t i = 0; i < dn; i++) {
                    const float *wr = wrow.data();
                    if (wuk) wr = wuk + (h * dn + i) * rkv;
                    else dequant_row(w.kvb, h * (dn + dv) + i, wrow.data());
                    const float qi = qn[i];
                    for (int64_t k = 0; k < rkv; k++) qt[(size_t)k] += wr[k] * qi;
                }
                float mx = -INFINITY;
                for (int64_t s = 0; s < ns; s++) {
                    const float *cs = st.cache.data() + s * row;
                    float sc = ops_.k->dot(qt.data(), cs, rkv) + ops_.k->dot(qr, cs + rkv, dr);
                    e[(size_t)s] = mla_scale_ * sc;
                    mx = std::max(mx, e[(size_t)s]);
                }
                float sum = 0.0f;
                for (int64_t s = 0; s < ns; s++) sum += (e[(size_t)s] = std::exp(e[(size_t)s] - mx));
                std::fill(ctx.begin(), ctx.end(), 0.0f);
                for (int64_t s = 0; s < ns; s++) {
                    const float al = e[(size_t)s] / sum;
                    const float *cs = st.cache.data() + s * row;
                    for (int64_t k = 0; k < rkv; k++) ctx[(size_t)k] += al * cs[k];
                }
                // o_h = W_UV^h · ctx.
                for (int64_t i = 0; i < dv; i++)
                    o[h * dv + i] = ops_.k->row_dot[(int)w.kvb.fmt](w.kvb, h * (dn + dv) + dn + i, ctx.data());
            }
        });
        if (cfg.mla_output_gate)
            for (int64_t i = 0; i < nh * dv; i++) o[i] = o[i] * sigmoidf(Gt[(size_t)(t * nh * dv + i)]);
    }
    ops_.matmul(w.o, O.data(), n, out);
}

}  // namespace sluice
