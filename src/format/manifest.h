// manifest.json: the model config, the trunk tensor index and the expert
// bank index (FORMAT.md §2). Parsing is hardened: every dimension is bounded
// before anything is sized from it, and a wrong JSON type is refused with
// the key named rather than silently defaulted.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace sluice {

struct RopeConfig {
    bool enabled = false;  // false for NoPE (mla_use_nope)
    double theta = 10000.0;
    bool yarn = false;
    double factor = 1.0, mscale = 1.0, mscale_all_dim = 0.0;
    double original_max_pos = 4096, beta_fast = 32, beta_slow = 1;
};

struct ModelConfig {
    std::string arch_name;   // _outer.architectures[0] or architectures[0]
    std::string model_type;
    int n_layers = 0, hidden = 0, vocab = 0, n_heads = 0;
    float eps = 1e-5f;
    // MoE
    int n_experts = 0, top_k = 0, moe_inter = 0, inter = 0, n_shared = 0, first_dense = 0;
    float routed_scaling = 1.0f;
    bool renormalize = false;  // presence flag (MODEL.md §1.2)
    int eos_token_id = 0;
    int bos_token_id = -1;
    // MLA
    int kv_lora = 0, q_lora = 0, d_nope = 0, d_rope = 0, d_v = 0;
    bool mla_output_gate = false;
    RopeConfig rope;
    // K3
    int r_lat = 0;
    bool latent_norm = false;
    int attn_res_block = 0;
    bool situ = false;
    float situ_beta = 1.0f, situ_linear_beta = 0.0f;
    // KDA
    int kda_heads = 0, kda_dim = 0, conv_kernel = 4;
    bool full_rank_gate = false;
    float gate_lower_bound = 0.0f;
    std::vector<bool> is_kda;  // per layer

    bool is_moe_layer(int L) const { return n_experts > 0 && L >= first_dense; }
    int expert_in() const { return r_lat > 0 ? r_lat : hidden; }
    int shared_width() const { return moe_inter * (n_shared > 1 ? n_shared : 1); }
};

struct ExpertQuant {
    std::string fmt;
    int stages = 3, vec_dim = 8, entries = 256, index_block = 64, index_bits = 8;
};

struct BankEntry {
    std::string file;
    int64_t experts = 0, bytes = 0, codebook_base = 0;
};

struct TrunkEntry {
    std::string name;
    int fmt = 0;
    uint64_t off = 0;
    std::vector<int64_t> shape;
    int64_t group = 128;
    uint64_t scale_off = 0;
    bool has_scale_off = false;
    int64_t bytes = -1;
};

struct Manifest {
    std::string tensor_prefix;
    std::string arch;
    ModelConfig cfg;
    ExpertQuant eq;
    std::map<int, BankEntry> banks;  // MoE layer -> bank
    std::vector<TrunkEntry> trunk;
    std::string provenance_json;  // the converter's provenance object, if any ("" when absent)
    // Top-level "integrity" (sluice's converter writes it; warp ignores
    // unknown top-level keys, FORMAT.md §2.1): SHA-256 of trunk.bin and
    // codebooks.bin, lowercase hex, "" when absent. The per-record crc32 is
    // the format's only other checksum; these cover what it does not.
    std::string trunk_sha256, codebooks_sha256;
};

// `where` names the file in error messages.
Status parse_manifest(const std::string &text, const std::string &where, Manifest *out);

// Validates the bank index against the codebook count (FORMAT.md §2.4).
Status validate_banks(const Manifest &m, int64_t n_books, const std::string &where);

}  // namespace sluice
