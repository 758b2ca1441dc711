// Small generated containers of each family, for the prompt-reuse tests
// (C API and server): Kimi-Linear (KDA + MLA), DeepSeek-V3 (MLA only) and
// the K3 shape (AttnRes, gated MLA, full-rank KDA gate, latent MoE).
// Written once per process into a temp dir.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "synth/synth.h"

namespace sluice_test {

struct ReuseModel {
    std::string name, path;
    bool recurrent = false;  // has KDA layers
    int vocab = 0;
};

inline sluice::SynthOptions reuse_kimi_linear(const std::string &out) {
    sluice::SynthOptions o;
    o.out = out;
    o.layers = 4;  // KDA 1-3, MLA 4
    o.mla_every = 4;
    o.hidden = 128;
    o.vocab = 256;
    o.heads = 2;
    o.experts = 8;
    o.top_k = 2;
    o.moe_inter = 64;
    o.inter = 256;
    o.kda_heads = 2;
    o.kda_dim = 32;
    o.kv_lora = 32;
    o.d_nope = 16;
    o.d_rope = 8;
    o.d_v = 16;
    o.jobs = 1;
    return o;
}

inline sluice::SynthOptions reuse_deepseek(const std::string &out) {
    sluice::SynthOptions o = reuse_kimi_linear(out);
    o.layers = 3;
    o.mla_every = 1;  // every layer MLA: DeepSeek-V3's shape
    return o;
}

inline sluice::SynthOptions reuse_k3(const std::string &out) {
    sluice::SynthOptions o = sluice::k3_shape();
    o.out = out;
    o.jobs = 1;
    o.layers = 5;  // MLA at 1-based 3 and 5
    o.mla_every = 3;
    o.attn_res_block = 2;
    o.hidden = 128;
    o.vocab = 256;
    o.heads = 4;
    o.kda_heads = 2;
    o.kda_dim = 32;
    o.kv_lora = 32;
    o.q_lora = 48;
    o.d_nope = 16;
    o.d_rope = 8;
    o.d_v = 16;
    o.inter = 256;
    o.experts = 8;
    o.top_k = 2;
    o.shared = 1;
    o.moe_inter = 64;
    o.r_lat = 96;
    return o;
}

// Generates the three containers (once); *err says why not.
inline const std::vector<ReuseModel> &reuse_models(std::string *err) {
    static std::vector<ReuseModel> models;
    static std::string why;
    static bool done = false;
    if (!done) {
        done = true;
        const std::filesystem::path dir =
            std::filesystem::temp_directory_path() / ("sluice-reuse-" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir);
        // Removed when the test process exits.
        struct Cleanup {
            std::filesystem::path dir;
            ~Cleanup() {
                std::error_code ec;
                std::filesystem::remove_all(dir, ec);
            }
        };
        static Cleanup cleanup;
        cleanup.dir = dir;
        struct Spec {
            const char *name;
            sluice::SynthOptions o;
            bool recurrent;
        } specs[] = {{"kimi-linear", reuse_kimi_linear((dir / "kl.waste").string()), true},
                     {"deepseek-v3", reuse_deepseek((dir / "ds.waste").string()), false},
                     {"k3", reuse_k3((dir / "k3.waste").string()), true}};
        for (const Spec &s : specs) {
            const sluice::Status st = sluice::run_synth(s.o, nullptr);
            if (!st) {
                why = std::string(s.name) + ": sluice synth failed: " + st.message();
                models.clear();
                break;
            }
            models.push_back({s.name, s.o.out, s.recurrent, s.o.vocab});
        }
    }
    *err = why;
    return models;
}

}  // namespace sluice_test
