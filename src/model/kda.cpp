// Kimi Delta Attention (MODEL.md §4). Projections are batched over the
// chunk; the short convolution and the delta-rule recurrence advance one
// token at a time, so a chunk computes exactly what single steps compute.
#include <algorithm>
#include <cmath>

#include "model/engine.h"

namespace sluice {

void Engine::kda_block(int L, const float *Hn, int64_t n, int pos0, float *out) {
    const ModelConfig &cfg = c_.config();
    const KdaWeights &w = w_.layers[(size_t)L].k;
    const int64_t H = cfg.kda_heads, D = cfg.kda_dim, C = H * D;
    AttnScratch &sb = attn_scratch_;
    float *const Q = scratch(sb.q, n * C), *const Kp = scratch(sb.k, n * C), *const Vp = scratch(sb.v, n * C),
                 *const Fa = scratch(sb.fa, n * D), *const Z = scratch(sb.z, n * C), *const Bt = scratch(sb.b, n * H),
                 *const G = scratch(sb.g, n * C), *const O = scratch(sb.o, n * C);
    ops_.matmul(w.q, Hn, n, Q);
    ops_.matmul(w.k, Hn, n, Kp);
    ops_.matmul(w.v, Hn, n, Vp);
    ops_.matmul(w.fa, Hn, n, Fa);
    ops_.matmul(w.fb, Fa, n, Z);
    ops_.matmul(w.b, Hn, n, Bt);
    if (cfg.full_rank_gate) {
        ops_.matmul(w.g, Hn, n, G);
    } else {
        float *const Ga = scratch(sb.ga, n * D);
        ops_.matmul(w.ga, Hn, n, Ga);
        ops_.matmul(w.gb, Ga, n, G);
    }
    std::vector<float> *log = log_cap_ > 0 ? &kda_log_[(size_t)L] : nullptr;
    for (int64_t t = 0; t < n; t++) {
        if (log) {
            // The recurrence's inputs at this position, for a rewind's replay.
            float *e = log->data() + (size_t)((pos0 + t) % log_cap_) * (size_t)replay_log_entry_floats(cfg);
            std::copy_n(Q + t * C, C, e);
            std::copy_n(Kp + t * C, C, e + C);
            std::copy_n(Vp + t * C, C, e + 2 * C);
            std::copy_n(Z + t * C, C, e + 3 * C);
            std::copy_n(Bt + t * H, H, e + 4 * C);
        }
        kda_step(L, Q + t * C, Kp + t * C, Vp + t * C, Z + t * C, Bt + t * H, G + t * C, O + t * C);
    }
    ops_.matmul(w.o, O, n, out);
}

void Engine::kda_replay(int L, int p) {
    const ModelConfig &cfg = c_.config();
    const int64_t H = cfg.kda_heads, C = H * (int64_t)cfg.kda_dim;
    const float *e = kda_log_[(size_t)L].data() + (size_t)(p % log_cap_) * (size_t)replay_log_entry_floats(cfg);
    // kda_step overwrites its projections with their convolutions.
    float *const q = scratch(attn_scratch_.q, 3 * C);
    std::copy_n(e, 3 * C, q);
    kda_step(L, q, q + C, q + 2 * C, e + 3 * C, e + 4 * C, nullptr, nullptr);
}

void Engine::kda_step(int L, float *qr, float *kr, float *vr, const float *zt, const float *bt, const float *gt,
                      float *ot) {
    const ModelConfig &cfg = c_.config();
    const KdaWeights &w = w_.layers[(size_t)L].k;
    KdaState &st = kda_[(size_t)L];
    const int64_t H = cfg.kda_heads, D = cfg.kda_dim, C = H * D, K = cfg.conv_kernel;
    const float eps = cfg.eps;
    const bool bounded = cfg.gate_lower_bound < 0.0f;
    const float lb = cfg.gate_lower_bound;
    const float qscale = 1.0f / std::sqrt((float)D);
    const int64_t R = K - 1;
    {
        // Short causal convolution over raw projections, SiLU after (§4.1).
        float *proj[3] = {qr, kr, vr};
        const float *taps[3] = {w.qconv.data(), w.kconv.data(), w.vconv.data()};
        for (int m = 0; m < 3; m++) {
            float *ring = st.ring.data() + (size_t)(m * C * R);
            for (int64_t c = 0; c < C; c++) {
                const float *wc = taps[m] + c * K;
                float *rc = ring + c * R;
                const float p = proj[m][c];
                float z = 0.0f;
                for (int64_t j = 0; j < R; j++) z += wc[j] * rc[j];
                z += wc[K - 1] * p;
                for (int64_t j = 0; j + 1 < R; j++) rc[j] = rc[j + 1];
                if (R > 0) rc[R - 1] = p;
                proj[m][c] = siluf(z);
            }
        }
        ops_.pool->parallel_for(H, std::max<int64_t>(1, 16384 / (D * D)), [&](int64_t h0, int64_t h1) {
            std::vector<float> g((size_t)D), u((size_t)D), delta((size_t)D), o((size_t)D);
            for (int64_t h = h0; h < h1; h++) {
                float *q = proj[0] + h * D, *k = proj[1] + h * D;
                const float *v = proj[2] + h * D;
                // L2 normalisation with 1e-12 inside the root (§4.2).
                float qq = 0.0f, kk = 0.0f;
                for (int64_t j = 0; j < D; j++) qq += q[j] * q[j], kk += k[j] * k[j];
                const float qn = 1.0f / std::sqrt(qq + 1e-12f), kn = 1.0f / std::sqrt(kk + 1e-12f);
                for (int64_t j = 0; j < D; j++) q[j] = q[j] * qn * qscale, k[j] = k[j] * kn;
                const float beta = sigmoidf(bt[h]);
                const float a = std::exp(w.a_log[(size_t)h]);  // A_log is per head (§4.4)
                for (int64_t j = 0; j < D; j++) {
                    const float zj = zt[h * D + j] + w.dt_bias[(size_t)(h * D + j)];
                    g[(size_t)j] = bounded ? lb * sigmoidf(a * zj) : -a * softplusf(zj);
                }
                // Recurrence (§4.5): decay first, delta from the decayed
                // state, read out after the update. Two passes over the
                // head's state (D x D floats, 64 KB at D = 128) instead of
                // four: each row is decayed then enters u, and later updated
                // then read out, while it is in L1. u and o still add the rows
                // in row order, so the bits are the four-pass loop's.
                float *S = st.S.data() + h * D * D;
                std::fill(u.begin(), u.end(), 0.0f);
                for (int64_t i = 0; i < D; i++) {
                    const float e = std::exp(g[(size_t)i]);
                    float *row = S + i * D;
                    const float ki = k[i];
                    for (int64_t j = 0; j < D; j++) {
                        row[j] *= e;
                        u[(size_t)j] += row[j] * ki;
                    }
                }
                for (int64_t j = 0; j < D; j++) delta[(size_t)j] = beta * (v[j] - u[(size_t)j]);
                // A replay (no ot) updates the state only.
                if (ot) std::fill(o.begin(), o.end(), 0.0f);
                for (int64_t i = 0; i < D; i++) {
                    float *row = S + i * D;
                    const float ki = k[i], qi = q[i];
                    for (int64_t j = 0; j < D; j++) row[j] += ki * delta[(size_t)j];
                    if (ot)
                        for (int64_t j = 0; j < D; j++) o[(size_t)j] += row[j] * qi;
                }
                if (!ot) continue;
                // Per-head RMSNorm with the shared o_norm, times σ(gate) (§4.6).
                float ss = 0.0f;
                for (int64_t j = 0; j < D; j++) ss += o[(size_t)j] * o[(size_t)j];
                const float r = 1.0f / std::sqrt(ss / (float)D + eps);
                for (int64_t j = 0; j < D; j++)
                    ot[h * D + j] = ((o[(size_t)j] * r) * w.o_norm[(size_t)j]) * sigmoidf(gt[h * D + j]);
            }
        });
    }
}

}  // namespace sluice
