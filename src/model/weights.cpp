#include "model/weights.h"

#include <atomic>
#include <thread>

namespace sluice {
namespace {

struct Binder {
    const Container &c;
    ModelWeights &w;
    // Matrices are read after the walk, several at a time (see run()).
    struct Job {
        std::string name;
        int64_t rows, cols;
        QTensor *t;
    };
    std::vector<Job> jobs;

    Status mat(const std::string &name, int64_t rows, int64_t cols, QTensor *t) {
        jobs.push_back({name, rows, cols, t});
        return Status::ok();
    }
    // Reads the queued matrices with up to 8 reads in flight. One tensor
    // at a time, the 48B-shaped trunk (1.4 GB) took 4.2 s to load from a
    // dropped page cache (buffered reads, one request deep); the disk
    // serves random reads several times faster at depth 8 (bench_disk_probe).
    // The first error in walk order is returned, as the serial walk did.
    Status run() {
        std::vector<Status> st(jobs.size());
        std::atomic<size_t> next{0};
        auto work = [&] {
            for (size_t i; (i = next.fetch_add(1)) < jobs.size();)
                st[i] = c.load(jobs[i].name, {jobs[i].rows, jobs[i].cols}, false, jobs[i].t);
        };
        const size_t nt = std::min<size_t>(8, jobs.size());
        std::vector<std::thread> ts;
        for (size_t i = 1; i < nt; i++) ts.emplace_back(work);
        work();
        for (auto &t : ts) t.join();
        for (size_t i = 0; i < jobs.size(); i++) {
            SLUICE_TRY(st[i]);
            const QTensor *t = jobs[i].t;
            w.resident_bytes += (uint64_t)(t->rows * t->rowbytes + t->scales.size() * 4);
            w.trunk_params += (uint64_t)t->numel();
        }
        return Status::ok();
    }
    // 1-D F32 vector of exactly n values.
    Status vec(const std::string &name, int64_t n, std::vector<float> *out) {
        QTensor t;
        const TrunkEntry *e = c.find(name);
        // AttnRes projections are [1, d] linears read as vectors (MODEL.md §8).
        std::vector<int64_t> shape = {n};
        if (e && e->shape.size() == 2 && e->shape[0] == 1) shape = {1, n};
        SLUICE_TRY(c.load(name, shape, true, &t));
        out->assign(t.f32(), t.f32() + n);
        w.resident_bytes += (uint64_t)n * 4;
        w.trunk_params += (uint64_t)n;
        return Status::ok();
    }
    Status vec_min(const std::string &name, int64_t n, std::vector<float> *out) {
        SLUICE_TRY(c.load_f32_min(name, n, out));
        w.resident_bytes += out->size() * 4;
        w.trunk_params += out->size();
        return Status::ok();
    }
};

}  // namespace

Status load_weights(const Container &c, ModelWeights *w) {
    const ModelConfig &cfg = c.config();
    const int64_t d = cfg.hidden, V = cfg.vocab;
    Binder b{c, *w, {}};
    SLUICE_TRY(c.describe("model.embed_tokens.weight", {V, d}, &w->embed));
    w->trunk_params += (uint64_t)(V * d);
    SLUICE_TRY(b.mat("lm_head.weight", V, d, &w->lm_head));
    SLUICE_TRY(b.vec("model.norm.weight", d, &w->final_norm));
    if (cfg.attn_res_block > 0) {
        SLUICE_TRY(b.vec("model.output_attn_res_norm.weight", d, &w->out_res_norm));
        SLUICE_TRY(b.vec("model.output_attn_res_proj.weight", d, &w->out_res_proj));
    }
    w->layers.resize((size_t)cfg.n_layers);
    for (int L = 0; L < cfg.n_layers; L++) {
        LayerWeights &lw = w->layers[(size_t)L];
        const std::string P = "model.layers." + std::to_string(L) + ".";
        SLUICE_TRY(b.vec(P + "input_layernorm.weight", d, &lw.in_norm));
        SLUICE_TRY(b.vec(P + "post_attention_layernorm.weight", d, &lw.post_norm));
        if (cfg.attn_res_block > 0) {
            SLUICE_TRY(b.vec(P + "self_attention_res_norm.weight", d, &lw.sa_res_norm));
            SLUICE_TRY(b.vec(P + "self_attention_res_proj.weight", d, &lw.sa_res_proj));
            SLUICE_TRY(b.vec(P + "mlp_res_norm.weight", d, &lw.mlp_res_norm));
            SLUICE_TRY(b.vec(P + "mlp_res_proj.weight", d, &lw.mlp_res_proj));
        }
        const std::string A = P + "self_attn.";
        lw.kda = cfg.is_kda[(size_t)L];
        if (lw.kda) {
            const int64_t H = cfg.kda_heads, D = cfg.kda_dim, C = H * D, K = cfg.conv_kernel;
            KdaWeights &k = lw.k;
            SLUICE_TRY(b.mat(A + "q_proj.weight", C, d, &k.q));
            SLUICE_TRY(b.mat(A + "k_proj.weight", C, d, &k.k));
            SLUICE_TRY(b.mat(A + "v_proj.weight", C, d, &k.v));
            SLUICE_TRY(b.vec_min(A + "q_conv1d.weight", C * K, &k.qconv));
            SLUICE_TRY(b.vec_min(A + "k_conv1d.weight", C * K, &k.kconv));
            SLUICE_TRY(b.vec_min(A + "v_conv1d.weight", C * K, &k.vconv));
            SLUICE_TRY(b.mat(A + "f_a_proj.weight", D, d, &k.fa));
            SLUICE_TRY(b.mat(A + "f_b_proj.weight", C, D, &k.fb));
            SLUICE_TRY(b.mat(A + "b_proj.weight", H, d, &k.b));
            SLUICE_TRY(b.vec_min(A + "A_log", H, &k.a_log));
            SLUICE_TRY(b.vec_min(A + "dt_bias", C, &k.dt_bias));
            if (cfg.full_rank_gate) {
                SLUICE_TRY(b.mat(A + "g_proj.weight", C, d, &k.g));
            } else {
                SLUICE_TRY(b.mat(A + "g_a_proj.weight", D, d, &k.ga));
                SLUICE_TRY(b.mat(A + "g_b_proj.weight", C, D, &k.gb));
            }
            SLUICE_TRY(b.vec(A + "o_norm.weight", D, &k.o_norm));
            SLUICE_TRY(b.mat(A + "o_proj.weight", d, C, &k.o));
        } else {
            const int64_t nh = cfg.n_heads, dq = cfg.d_nope + cfg.d_rope;
            MlaWeights &m = lw.m;
            if (cfg.q_lora > 0) {
                SLUICE_TRY(b.mat(A + "q_a_proj.weight", cfg.q_lora, d, &m.qa));
                SLUICE_TRY(b.vec(A + "q_a_layernorm.weight", cfg.q_lora, &m.qa_norm));
                SLUICE_TRY(b.mat(A + "q_b_proj.weight", nh * dq, cfg.q_lora, &m.qb));
            } else {
                SLUICE_TRY(b.mat(A + "q_proj.weight", nh * dq, d, &m.q));
            }
            SLUICE_TRY(b.mat(A + "kv_a_proj_with_mqa.weight", cfg.kv_lora + cfg.d_rope, d, &m.kva));
            SLUICE_TRY(b.vec(A + "kv_a_layernorm.weight", cfg.kv_lora, &m.kva_norm));
            SLUICE_TRY(b.mat(A + "kv_b_proj.weight", nh * (cfg.d_nope + cfg.d_v), cfg.kv_lora, &m.kvb));
            if (cfg.mla_output_gate) SLUICE_TRY(b.mat(A + "g_proj.weight", nh * cfg.d_v, d, &m.g));
            SLUICE_TRY(b.mat(A + "o_proj.weight", d, nh * cfg.d_v, &m.o));
        }
        lw.moe = cfg.is_moe_layer(L);
        if (lw.moe) {
            const std::string M = P + "block_sparse_moe.";
            MoeWeights &mw = lw.moe_w;
            const int64_t sh = cfg.shared_width();
            SLUICE_TRY(b.mat(M + "gate.weight", cfg.n_experts, d, &mw.router));
            if (const TrunkEntry *e = c.find(M + "gate.e_score_correction_bias"); e && e->fmt == 0)
                SLUICE_TRY(b.vec(M + "gate.e_score_correction_bias", cfg.n_experts, &mw.bias));
            SLUICE_TRY(b.mat(M + "shared_experts.gate_proj.weight", sh, d, &mw.sh_gate));
            SLUICE_TRY(b.mat(M + "shared_experts.up_proj.weight", sh, d, &mw.sh_up));
            SLUICE_TRY(b.mat(M + "shared_experts.down_proj.weight", d, sh, &mw.sh_down));
            if (cfg.r_lat > 0) {
                SLUICE_TRY(b.mat(M + "routed_expert_down_proj.weight", cfg.r_lat, d, &mw.lat_down));
                SLUICE_TRY(b.mat(M + "routed_expert_up_proj.weight", d, cfg.r_lat, &mw.lat_up));
                if (cfg.latent_norm) SLUICE_TRY(b.vec(M + "routed_expert_norm.weight", cfg.r_lat, &mw.lat_norm));
            }
            mw.codebook_base = c.manifest().banks.at(L).codebook_base;
        } else {
            const std::string M = P + "mlp.";
            SLUICE_TRY(b.mat(M + "gate_proj.weight", cfg.inter, d, &lw.dense.gate));
            SLUICE_TRY(b.mat(M + "up_proj.weight", cfg.inter, d, &lw.dense.up));
            SLUICE_TRY(b.mat(M + "down_proj.weight", d, cfg.inter, &lw.dense.down));
        }
    }
    return b.run();
}

}  // namespace sluice
