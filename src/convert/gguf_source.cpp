// The inverse of `sluice export-gguf` (src/gguf/export_families.cpp):
// llama.cpp's names, layouts and metadata keys back to a Hugging Face
// checkpoint's. Matrices keep their bytes (GGUF ne [in, out] is PyTorch
// [out, in] row-major); the transforms that are not a rename are MLA's
// kv_b_proj (split per head into attn_k_b, transposed, and attn_v_b), KDA's
// A_log (stored as -exp(A_log)), the stacked experts (one slab per matrix
// kind) and K3's AttnRes scores (norm ⊙ proj: written back as the projection
// with an all-ones norm, the same product).
#include "convert/gguf_source.h"

#include "convert/byte_level.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>

#include "common/sha256.h"
#include "format/file.h"

namespace sluice::convert {

using ojson = nlohmann::ordered_json;

namespace {

std::string dims_str(const std::vector<int64_t>& d) {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
}

// Dims without their size-1 axes: the stored bytes are the same whatever
// axes of 1 a writer adds ({K, 1, C} and {K, 1, C, 1}; {H} and {1, H}).
std::vector<int64_t> squeeze(const std::vector<int64_t>& d) {
    std::vector<int64_t> o;
    for (int64_t x : d)
        if (x != 1) o.push_back(x);
    return o;
}

// The shortest decimal that reads back as the same f32, as a double: the
// synthesized config then says 1e-05 and 2.446, as a release's does.
double clean_f32(double v) {
    const float f = static_cast<float>(v);
    for (int p = 1; p <= 9; ++p) {
        char b[40];
        std::snprintf(b, sizeof b, "%.*g", p, static_cast<double>(f));
        const double d = std::strtod(b, nullptr);
        if (static_cast<float>(d) == f) return d;
    }
    return static_cast<double>(f);
}

std::string hname(int L, const std::string& rest) { return "model.layers." + std::to_string(L) + "." + rest; }
std::string gblk(int L, const std::string& rest) { return "blk." + std::to_string(L) + "." + rest; }

constexpr int64_t kMaxWidth = int64_t(1) << 20;  // any model width (hidden, intermediate, rank)

}  // namespace

bool is_gguf_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
    File f;
    if (!f.open_read(path).is_ok() || f.size() < 4) return false;
    char m[4] = {};
    return f.pread_all(m, 4, 0).is_ok() && std::memcmp(m, "GGUF", 4) == 0;
}

bool GgufSource::open(const std::string& path, std::string* err) {
    if (Status s = rd_.open(path); !s.is_ok()) {
        *err = s.message();
        return false;
    }
    // The header's SHA-256 (the data is not hashed: cost, as for safetensors shards).
    {
        File f;
        std::string head(static_cast<size_t>(rd_.data_start()), '\0');
        Status s = f.open_read(path);
        if (s.is_ok()) s = f.pread_all(head.data(), head.size(), 0);
        if (!s.is_ok()) {
            *err = s.message();
            return false;
        }
        header_sha256_ = sha256_hex(head);
    }
    for (const gguf::TensorInfo& t : rd_.tensors()) {
        TypeMix& m = type_mix_[gguf::ggml_type_name(t.type)];
        m.tensors += 1;
        m.bytes += t.bytes;
    }
    return build(err);
}

std::vector<std::string> GgufSource::names() const {
    std::vector<std::string> v;
    v.reserve(map_.size());
    for (const auto& [n, e] : map_) v.push_back(n);
    return v;  // std::map order: ascending bytes
}

bool GgufSource::shape(const std::string& hf, std::vector<int64_t>* out, std::string* err) const {
    auto it = map_.find(hf);
    if (it == map_.end()) {
        *err = "tensor '" + hf + "' is not in the checkpoint (" + path() + " maps no GGUF tensor to it)";
        return false;
    }
    *out = it->second.shape;
    return true;
}

bool GgufSource::add(const std::string& hf, Entry e, std::string* err) {
    if (!map_.emplace(hf, std::move(e)).second) {
        *err = path() + ": two GGUF tensors map to " + hf;
        return false;
    }
    return true;
}

bool GgufSource::read_rows_f32(const std::string& hf, int64_t r0, int64_t r1, float* dst, std::string* err) const {
    auto it = map_.find(hf);
    if (it == map_.end()) {
        *err = "tensor '" + hf + "' is not in the checkpoint";
        return false;
    }
    const Entry& e = it->second;
    const int64_t N = e.shape.empty() ? 1 : e.shape.back();
    int64_t R = 1;
    for (size_t i = 0; i + 1 < e.shape.size(); ++i) R *= e.shape[i];
    if (r0 < 0 || r1 < r0 || r1 > R) {
        *err = "tensor '" + hf + "': row range out of bounds";
        return false;
    }
    if (r1 == r0) return true;
    auto fail = [&](const Status& s) {
        *err = s.message() + " (for " + hf + ")";
        return false;
    };
    switch (e.kind) {
    case Kind::ones:
        std::fill(dst, dst + (r1 - r0) * N, 1.0f);
        return true;
    case Kind::rows: {
        // Elements [row0·ne0 + r0·N, row0·ne0 + r1·N) of the GGUF tensor in
        // stored order; read as whole GGUF rows, then cut.
        const int64_t ne0 = e.a->dims[0];
        const int64_t first = e.row0 * ne0 + r0 * N, last = e.row0 * ne0 + r1 * N;  // bounded by the file (2^50)
        const int64_t g0 = first / ne0, g1 = (last + ne0 - 1) / ne0;
        if (first % ne0 == 0 && last % ne0 == 0) {
            if (Status s = rd_.read_rows_f32(*e.a, g0, g1 - g0, dst); !s.is_ok()) return fail(s);
            return true;
        }
        std::vector<float> tmp(static_cast<size_t>((g1 - g0) * ne0));
        if (Status s = rd_.read_rows_f32(*e.a, g0, g1 - g0, tmp.data()); !s.is_ok()) return fail(s);
        std::copy(tmp.begin() + (first - g0 * ne0), tmp.begin() + (last - g0 * ne0), dst);
        return true;
    }
    case Kind::a_log: {
        const int64_t H = R * N;
        std::vector<float> a(static_cast<size_t>(e.a->rows() * e.a->dims[0]));
        if (Status s = rd_.read_rows_f32(*e.a, 0, e.a->rows(), a.data()); !s.is_ok()) return fail(s);
        for (int64_t h = 0; h < H; ++h)
            if (!(a[static_cast<size_t>(h)] < 0.0f) || !std::isfinite(a[static_cast<size_t>(h)])) {
                *err = path() + ": tensor " + e.a->name + ": value " + std::to_string(h) + " is " +
                       std::to_string(a[static_cast<size_t>(h)]) + "; ssm_a = -exp(A_log) must be negative and finite";
                return false;
            }
        for (int64_t i = r0 * N; i < r1 * N; ++i)
            dst[i - r0 * N] = static_cast<float>(std::log(-static_cast<double>(a[static_cast<size_t>(i)])));
        return true;
    }
    case Kind::kv_b: {
        // HF row h·(dn+dv) + i: i < dn is column i of k_b's head h ([r][dn]),
        // else row i - dn of v_b's head h ([dv][r]). One head of each at a time.
        const int64_t dn = e.dn, dv = e.dv, r = e.rank, W = dn + dv;
        std::vector<float> kb(static_cast<size_t>(r * dn)), vb(static_cast<size_t>(dv * r));
        int64_t held = -1;
        for (int64_t row = r0; row < r1; ++row) {
            const int64_t h = row / W, i = row % W;
            if (h != held) {
                if (Status s = rd_.read_rows_f32(*e.a, h * r, r, kb.data()); !s.is_ok()) return fail(s);
                if (Status s = rd_.read_rows_f32(*e.b, h * dv, dv, vb.data()); !s.is_ok()) return fail(s);
                held = h;
            }
            float* o = dst + (row - r0) * r;
            if (i < dn) {
                for (int64_t j = 0; j < r; ++j) o[j] = kb[static_cast<size_t>(j * dn + i)];
            } else {
                std::copy(vb.begin() + (i - dn) * r, vb.begin() + (i - dn + 1) * r, o);
            }
        }
        return true;
    }
    }
    return false;
}

bool GgufSource::build(std::string* err) {
    const std::string& P = path();
    std::set<const gguf::TensorInfo*> used;
    auto st = [&](const Status& s) {
        if (!s.is_ok()) *err = s.message();
        return s.is_ok();
    };
    if (!st(rd_.get_str("general.architecture", &arch_))) return false;
    const bool kimi_linear = arch_ == "kimi-linear", k3 = arch_ == "kimi-k3", ds = arch_ == "deepseek2";
    if (!kimi_linear && !k3 && !ds) {
        *err = P + ": general.architecture '" + arch_ +
               "' is not supported (sluice converts kimi-linear, kimi-k3 and deepseek2 GGUF files)";
        return false;
    }
    const std::string A = arch_ + ".";

    // --- metadata: every integer bounded, every required key named when missing.
    auto get_i = [&](const std::string& key, int64_t lo, int64_t hi, int64_t* out) {
        if (!st(rd_.get_int(key, out))) return false;
        if (*out < lo || *out > hi) {
            *err = P + ": metadata key " + key + " = " + std::to_string(*out) + " is outside [" + std::to_string(lo) +
                   ", " + std::to_string(hi) + "]";
            return false;
        }
        return true;
    };
    auto opt_i = [&](const std::string& key, int64_t lo, int64_t hi, int64_t dflt, int64_t* out) {
        if (!rd_.find(key)) {
            *out = dflt;
            return true;
        }
        return get_i(key, lo, hi, out);
    };
    auto get_f = [&](const std::string& key, double* out) {
        if (!st(rd_.get_float(key, out))) return false;
        if (!std::isfinite(*out) || std::fabs(*out) > 1e38) {
            *err = P + ": metadata key " + key + " is not a finite f32";
            return false;
        }
        return true;
    };
    auto opt_f = [&](const std::string& key, double dflt, double* out) {
        if (!rd_.find(key)) {
            *out = dflt;
            return true;
        }
        return get_f(key, out);
    };
    auto opt_b = [&](const std::string& key, bool dflt, bool* out) {
        if (!rd_.find(key)) {
            *out = dflt;
            return true;
        }
        return st(rd_.get_bool(key, out));
    };

    int64_t n_layers, d, heads, vocab, ffn, n_dense, E, top_k, I, n_shared, gating;
    double eps, scale;
    bool renorm;
    if (!get_i(A + "block_count", 1, 128, &n_layers) || !get_i(A + "embedding_length", 1, kMaxWidth, &d) ||
        !get_i(A + "attention.head_count", 1, 65536, &heads) ||
        !get_f(A + "attention.layer_norm_rms_epsilon", &eps) ||
        !opt_i(A + "feed_forward_length", 0, kMaxWidth, 0, &ffn) ||
        !opt_i(A + "leading_dense_block_count", 0, n_layers, 0, &n_dense) ||
        !opt_i(A + "expert_count", 0, 65535, 0, &E) || !opt_i(A + "expert_used_count", 0, 64, 0, &top_k) ||
        !opt_i(A + "expert_feed_forward_length", 0, kMaxWidth, 0, &I) ||
        !opt_i(A + "expert_shared_count", 0, 64, 0, &n_shared) ||
        !opt_f(A + "expert_weights_scale", 1.0, &scale) || !opt_b(A + "expert_weights_norm", false, &renorm) ||
        !opt_i(A + "expert_gating_func", 0, 16, -1, &gating))
        return false;
    if (!(eps > 0 && eps < 1)) {
        *err = P + ": metadata key " + A + "attention.layer_norm_rms_epsilon must be in (0, 1)";
        return false;
    }
    if (!(scale > 0)) {
        // llama.cpp reads 0 as "no scaling"; sluice would multiply by it.
        *err = P + ": metadata key " + A + "expert_weights_scale must be > 0";
        return false;
    }
    if (E > 0 && n_dense < n_layers) {
        if (top_k < 1 || top_k > E) {
            *err = P + ": metadata key " + A + "expert_used_count must be in [1, expert_count]";
            return false;
        }
        if (I < 8 || I % 8) {
            *err = P + ": metadata key " + A + "expert_feed_forward_length must be a positive multiple of 8";
            return false;
        }
        // sluice routes by sigmoid scores (2); deepseek2 without the key means softmax.
        if (gating != 2 && (gating != -1 || ds)) {
            *err = P + ": metadata key " + A + "expert_gating_func " +
                   (gating == -1 ? std::string("is missing (llama.cpp's deepseek2 then routes by softmax)")
                                 : "= " + std::to_string(gating)) +
                   ": sluice routes by sigmoid (2) only";
            return false;
        }
    } else {
        E = 0;
    }
    const bool moe = E > 0;
    {
        const gguf::TensorInfo* te = rd_.tensor("token_embd.weight");
        int64_t v0 = te && te->dims.size() >= 2 ? te->dims[1] : 0;
        if (!opt_i(A + "vocab_size", 1, 1 << 24, v0, &vocab)) return false;
        if (vocab < 1 || vocab > (1 << 24)) {
            *err = P + ": no " + A + "vocab_size and no token_embd.weight to take the vocabulary size from";
            return false;
        }
    }

    // Layer kinds: head_count_kv 0 = KDA (recurrent), else MLA.
    std::vector<bool> is_kda(static_cast<size_t>(n_layers), false);
    if (!ds) {
        const std::string key = A + "attention.head_count_kv";
        const gguf::Value* v = rd_.find(key);
        if (!v) {
            *err = P + ": metadata key " + key + " is missing (it marks KDA layers with 0)";
            return false;
        }
        std::vector<int64_t> kv;
        if (v->type == gguf::ValueType::ARR) {
            if (!st(rd_.get_int_array(key, &kv))) return false;
        } else {
            int64_t x = 0;
            if (!get_i(key, 0, 65536, &x)) return false;
            kv.assign(static_cast<size_t>(n_layers), x);
        }
        if (static_cast<int64_t>(kv.size()) != n_layers) {
            *err = P + ": metadata key " + key + " holds " + std::to_string(kv.size()) + " values for " +
                   std::to_string(n_layers) + " layers";
            return false;
        }
        for (int64_t L = 0; L < n_layers; ++L) is_kda[static_cast<size_t>(L)] = kv[static_cast<size_t>(L)] == 0;
    }
    bool any_kda = false, any_mla = false;
    for (bool k : is_kda) (k ? any_kda : any_mla) = true;

    // MLA widths.
    int64_t kv_lora = 0, kl_mla = 0, vl_mla = 0, d_rope = 0, q_lora = 0;
    if (any_mla) {
        if (!get_i(A + "attention.kv_lora_rank", 1, kMaxWidth, &kv_lora) ||
            !get_i(A + "attention.key_length_mla", 1, 65536, &kl_mla) ||
            !get_i(A + "attention.value_length_mla", 1, 65536, &vl_mla) ||
            !opt_i(A + "rope.dimension_count", 0, 65536, 0, &d_rope) ||
            !opt_i(A + "attention.q_lora_rank", 0, kMaxWidth, 0, &q_lora))
            return false;
        if (d_rope > kl_mla) {
            *err = P + ": metadata key " + A + "rope.dimension_count exceeds " + A + "attention.key_length_mla";
            return false;
        }
    }
    const int64_t d_nope = kl_mla - d_rope, d_v = vl_mla;
    // KDA widths (one head count for both layer kinds in llama.cpp's kimi graphs).
    int64_t kda_dim = 0, conv_k = 4;
    if (any_kda && (!get_i(A + "kda.head_dim", 1, 4096, &kda_dim) || !get_i(A + "ssm.conv_kernel", 1, 64, &conv_k)))
        return false;
    if (heads * std::max(kda_dim, d_nope + d_rope + d_v) > 4 * kMaxWidth) {
        *err = P + ": " + A + "attention.head_count times the head widths is too large";
        return false;
    }
    // K3 extras.
    int64_t r_lat = 0, attn_res = 0;
    double situ_beta = 1e30, situ_lin = 0, lower = 0;
    bool has_lower = false;
    if (k3) {
        if (!opt_i(A + "expert_latent_length", 0, kMaxWidth, 0, &r_lat) ||
            !opt_f(A + "activation.situ_beta", 1e30, &situ_beta) ||
            !opt_f(A + "activation.situ_linear_beta", 0.0, &situ_lin) ||
            !opt_i(A + "attn_res.block_size", 0, 65536, 0, &attn_res))
            return false;
        has_lower = rd_.find(A + "kda.gate_lower_bound") != nullptr;
        if (has_lower && !get_f(A + "kda.gate_lower_bound", &lower)) return false;
        if (moe && r_lat > 0 && r_lat % 8) {
            *err = P + ": metadata key " + A + "expert_latent_length must be a multiple of 8";
            return false;
        }
    }
    const int64_t lat = r_lat > 0 ? r_lat : d;
    if (moe && lat % 8) {
        *err = P + ": " + A + "embedding_length must be a multiple of 8 (the experts' vector width)";
        return false;
    }

    // --- tensors. need(): present, of a type sluice reads, of the expected dims.
    auto need = [&](const std::string& g, const std::vector<int64_t>& ne) -> const gguf::TensorInfo* {
        const gguf::TensorInfo* t = rd_.tensor(g);
        if (!t) {
            *err = P + ": tensor " + g + " is missing (the " + arch_ + " mapping needs it)";
            return nullptr;
        }
        if (t->bytes == 0) {
            *err = P + ": tensor " + g + " is of ggml type " + gguf::ggml_type_name(t->type) +
                   ", which sluice does not read (only " + gguf::read_type_names() +
                   ": convert such a GGUF, or the Hugging Face release)";
            return nullptr;
        }
        if (squeeze(t->dims) != squeeze(ne)) {
            *err = P + ": tensor " + g + " has dims " + dims_str(t->dims) + ", expected " + dims_str(ne) +
                   " from the metadata";
            return nullptr;
        }
        used.insert(t);
        return t;
    };
    auto rows = [&](const std::string& g, const std::vector<int64_t>& ne, const std::string& hf,
                    std::vector<int64_t> hf_shape) {
        const gguf::TensorInfo* t = need(g, ne);
        if (!t) return false;
        Entry e;
        e.a = t;
        e.shape = std::move(hf_shape);
        return add(hf, std::move(e), err);
    };
    // A matrix: GGUF ne [in, out] is HF [out, in], same bytes.
    auto mat = [&](const std::string& g, int64_t out, int64_t in, const std::string& hf) {
        return rows(g, {in, out}, hf, {out, in});
    };
    auto vec = [&](const std::string& g, int64_t n, const std::string& hf) { return rows(g, {n}, hf, {n}); };
    // The rank of a low-rank pair, read from the file (ne[1] of the first half).
    auto dim_of = [&](const std::string& g, size_t axis, int64_t* out) {
        const gguf::TensorInfo* t = rd_.tensor(g);
        if (!t || t->dims.size() <= axis) {
            *err = P + ": tensor " + g + " is missing (the " + arch_ + " mapping needs it)";
            return false;
        }
        *out = t->dims[axis];
        if (*out < 1 || *out > kMaxWidth) {
            *err = P + ": tensor " + g + ": dim " + std::to_string(axis) + " = " + std::to_string(*out) +
                   " is out of range";
            return false;
        }
        return true;
    };

    if (!mat("token_embd.weight", vocab, d, "model.embed_tokens.weight")) return false;
    if (!vec("output_norm.weight", d, "model.norm.weight")) return false;
    if (rd_.tensor("output.weight")) {
        if (!mat("output.weight", vocab, d, "lm_head.weight")) return false;
    } else {
        // Tied embeddings: llama.cpp reads token_embd as the head when output is absent.
        if (!mat("token_embd.weight", vocab, d, "lm_head.weight")) return false;
        notes_.push_back("output.weight absent: lm_head.weight is token_embd.weight (tied embeddings)");
    }
    const std::string moe_pre = ds ? "mlp." : "block_sparse_moe.";
    bool out_gate = false, latent_norm = false, any_moe = false;
    int out_gate_layers = 0, mla_layers = 0;
    const int64_t H = heads, C = heads * kda_dim, K = conv_k;
    for (int L = 0; L < static_cast<int>(n_layers); ++L) {
        if (!vec(gblk(L, "attn_norm.weight"), d, hname(L, "input_layernorm.weight")) ||
            !vec(gblk(L, "ffn_norm.weight"), d, hname(L, "post_attention_layernorm.weight")))
            return false;
        if (k3 && attn_res > 0) {
            for (auto [score, norm, proj] :
                 {std::tuple{"attn_res_score.weight", "self_attention_res_norm.weight", "self_attention_res_proj.weight"},
                  std::tuple{"ffn_res_score.weight", "mlp_res_norm.weight", "mlp_res_proj.weight"}}) {
                if (!rows(gblk(L, score), {d}, hname(L, proj), {1, d})) return false;
                Entry one;
                one.kind = Kind::ones;
                one.shape = {d};
                if (!add(hname(L, norm), std::move(one), err)) return false;
            }
        }
        const std::string a = "self_attn.";
        if (is_kda[static_cast<size_t>(L)]) {
            for (const char* x : {"q", "k", "v"}) {
                if (!mat(gblk(L, std::string("attn_") + x + ".weight"), C, d, hname(L, a + x + "_proj.weight")) ||
                    !rows(gblk(L, std::string("ssm_conv1d_") + x + ".weight"), {K, 1, C},
                          hname(L, a + x + "_conv1d.weight"), {C, 1, K}))
                    return false;
            }
            int64_t fr = 0;
            if (!dim_of(gblk(L, "ssm_f_a.weight"), 1, &fr) || !mat(gblk(L, "ssm_f_a.weight"), fr, d, hname(L, a + "f_a_proj.weight")) ||
                !mat(gblk(L, "ssm_f_b.weight"), C, fr, hname(L, a + "f_b_proj.weight")) ||
                !mat(gblk(L, "ssm_beta.weight"), H, d, hname(L, a + "b_proj.weight")))
                return false;
            {
                const gguf::TensorInfo* t = need(gblk(L, "ssm_a"), {H});
                if (!t) return false;
                Entry e;
                e.kind = Kind::a_log;
                e.a = t;
                e.shape = {1, 1, H, 1};
                if (!add(hname(L, a + "A_log"), std::move(e), err)) return false;
            }
            if (!vec(gblk(L, "ssm_dt.bias"), C, hname(L, a + "dt_bias"))) return false;
            if (k3) {
                // The low-rank pair was folded into one matrix by the export: kept full rank.
                if (!mat(gblk(L, "ssm_g.weight"), C, d, hname(L, a + "g_proj.weight"))) return false;
            } else {
                int64_t gr = 0;
                if (!dim_of(gblk(L, "ssm_g_a.weight"), 1, &gr) ||
                    !mat(gblk(L, "ssm_g_a.weight"), gr, d, hname(L, a + "g_a_proj.weight")) ||
                    !mat(gblk(L, "ssm_g_b.weight"), C, gr, hname(L, a + "g_b_proj.weight")))
                    return false;
            }
            if (!vec(gblk(L, "ssm_norm.weight"), kda_dim, hname(L, a + "o_norm.weight")) ||
                !mat(gblk(L, "attn_output.weight"), d, C, hname(L, a + "o_proj.weight")))
                return false;
        } else {
            ++mla_layers;
            const int64_t qw = H * (d_nope + d_rope);
            if (q_lora > 0 || rd_.tensor(gblk(L, "attn_q_a.weight"))) {
                if (q_lora < 1 && !dim_of(gblk(L, "attn_q_a.weight"), 1, &q_lora)) return false;
                if (!mat(gblk(L, "attn_q_a.weight"), q_lora, d, hname(L, a + "q_a_proj.weight")) ||
                    !vec(gblk(L, "attn_q_a_norm.weight"), q_lora, hname(L, a + "q_a_layernorm.weight")) ||
                    !mat(gblk(L, "attn_q_b.weight"), qw, q_lora, hname(L, a + "q_b_proj.weight")))
                    return false;
            } else if (!mat(gblk(L, "attn_q.weight"), qw, d, hname(L, a + "q_proj.weight"))) {
                return false;
            }
            if (!mat(gblk(L, "attn_kv_a_mqa.weight"), kv_lora + d_rope, d, hname(L, a + "kv_a_proj_with_mqa.weight")) ||
                !vec(gblk(L, "attn_kv_a_norm.weight"), kv_lora, hname(L, a + "kv_a_layernorm.weight")))
                return false;
            if (rd_.tensor(gblk(L, "attn_k_b.weight")) || !rd_.tensor(gblk(L, "attn_kv_b.weight"))) {
                Entry e;
                e.kind = Kind::kv_b;
                if (!(e.a = need(gblk(L, "attn_k_b.weight"), {d_nope, kv_lora, H})) ||
                    !(e.b = need(gblk(L, "attn_v_b.weight"), {kv_lora, d_v, H})))
                    return false;
                e.heads = H;
                e.dn = d_nope;
                e.dv = d_v;
                e.rank = kv_lora;
                e.shape = {H * (d_nope + d_v), kv_lora};
                if (!add(hname(L, a + "kv_b_proj.weight"), std::move(e), err)) return false;
            } else if (!mat(gblk(L, "attn_kv_b.weight"), H * (d_nope + d_v), kv_lora, hname(L, a + "kv_b_proj.weight"))) {
                return false;  // the fused form older llama.cpp converters write
            }
            if (rd_.tensor(gblk(L, "attn_gate.weight"))) {
                if (!k3) {
                    *err = P + ": tensor " + gblk(L, "attn_gate.weight") + ": an MLA output gate is a kimi-k3 block";
                    return false;
                }
                if (!mat(gblk(L, "attn_gate.weight"), H * d_v, d, hname(L, a + "g_proj.weight"))) return false;
                out_gate = true;
                ++out_gate_layers;
            }
            if (!mat(gblk(L, "attn_output.weight"), d, H * d_v, hname(L, a + "o_proj.weight"))) return false;
        }
        if (L < n_dense || !moe) {
            if (ffn < 1) {
                *err = P + ": layer " + std::to_string(L) + " is dense but " + A + "feed_forward_length is missing or 0";
                return false;
            }
            if (!mat(gblk(L, "ffn_gate.weight"), ffn, d, hname(L, "mlp.gate_proj.weight")) ||
                !mat(gblk(L, "ffn_up.weight"), ffn, d, hname(L, "mlp.up_proj.weight")) ||
                !mat(gblk(L, "ffn_down.weight"), d, ffn, hname(L, "mlp.down_proj.weight")))
                return false;
            continue;
        }
        any_moe = true;
        const std::string m = moe_pre;
        if (!mat(gblk(L, "ffn_gate_inp.weight"), E, d, hname(L, m + "gate.weight"))) return false;
        if (rd_.tensor(gblk(L, "exp_probs_b.bias")) &&
            !vec(gblk(L, "exp_probs_b.bias"), E, hname(L, m + "gate.e_score_correction_bias")))
            return false;
        // Stacked experts ne [in, out, E]: expert e is rows [e·out, (e+1)·out).
        static const char* kimi_names[3] = {"w1", "w3", "w2"};
        static const char* ds_names[3] = {"gate_proj", "up_proj", "down_proj"};
        static const char* stacks[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
        for (int k = 0; k < 3; ++k) {
            const int64_t out = k == 2 ? lat : I, in = k == 2 ? I : lat;
            const gguf::TensorInfo* t = need(gblk(L, stacks[k]), {in, out, E});
            if (!t) return false;
            for (int64_t e = 0; e < E; ++e) {
                Entry x;
                x.a = t;
                x.row0 = e * out;
                x.shape = {out, in};
                const std::string hf = hname(L, m + "experts." + std::to_string(e) + "." +
                                                  (ds ? ds_names[k] : kimi_names[k]) + ".weight");
                if (!add(hf, std::move(x), err)) return false;
            }
        }
        if (k3 && r_lat > 0) {
            if (!mat(gblk(L, "ffn_routed_down.weight"), r_lat, d, hname(L, m + "routed_expert_down_proj.weight")) ||
                !mat(gblk(L, "ffn_routed_up.weight"), d, r_lat, hname(L, m + "routed_expert_up_proj.weight")))
                return false;
            if (rd_.tensor(gblk(L, "ffn_routed_norm.weight"))) {
                if (!vec(gblk(L, "ffn_routed_norm.weight"), r_lat, hname(L, m + "routed_expert_norm.weight"))) return false;
                latent_norm = true;
            }
        }
        const bool has_sh = rd_.tensor(gblk(L, "ffn_gate_shexp.weight")) != nullptr;
        if (has_sh != (n_shared > 0)) {
            *err = P + ": " + (has_sh ? "tensor " + gblk(L, "ffn_gate_shexp.weight") + " is present but " + A +
                                            "expert_shared_count is missing or 0"
                                      : "tensor " + gblk(L, "ffn_gate_shexp.weight") + " is missing (the " + arch_ +
                                            " mapping needs it: expert_shared_count > 0)");
            return false;
        }
        if (has_sh) {
            const int64_t S = I * n_shared;
            if (!mat(gblk(L, "ffn_gate_shexp.weight"), S, d, hname(L, m + "shared_experts.gate_proj.weight")) ||
                !mat(gblk(L, "ffn_up_shexp.weight"), S, d, hname(L, m + "shared_experts.up_proj.weight")) ||
                !mat(gblk(L, "ffn_down_shexp.weight"), d, S, hname(L, m + "shared_experts.down_proj.weight")))
                return false;
        }
    }
    if (out_gate && out_gate_layers != mla_layers) {
        *err = P + ": attn_gate.weight is in " + std::to_string(out_gate_layers) + " of " + std::to_string(mla_layers) +
               " MLA layers (sluice's MLA output gate is all or none)";
        return false;
    }
    if (k3 && attn_res > 0) {
        if (!rows("output_res_score.weight", {d}, "model.output_attn_res_proj.weight", {1, d})) return false;
        Entry one;
        one.kind = Kind::ones;
        one.shape = {d};
        if (!add("model.output_attn_res_norm.weight", std::move(one), err)) return false;
    }
    {
        std::vector<std::string> left;
        for (const gguf::TensorInfo& t : rd_.tensors())
            if (!used.count(&t)) left.push_back(t.name);
        if (!left.empty()) {
            std::string line = "ignored " + std::to_string(left.size()) + " GGUF tensor(s) the " + arch_ +
                               " mapping does not use:";
            for (size_t i = 0; i < left.size() && i < 8; ++i) line += " " + left[i];
            if (left.size() > 8) line += " ...";
            notes_.push_back(line);
        }
    }

    // --- config.json as the release would hold it (the keys hfconfig.cpp and
    // the manifest parser read; presence flags only when set).
    ojson c = ojson::object();
    c["model_type"] = kimi_linear ? "kimi_linear" : k3 ? "kimi_k3" : "deepseek_v3";
    c["architectures"] = {kimi_linear ? "KimiLinearForCausalLM" : k3 ? "KimiK3ForCausalLM" : "DeepseekV3ForCausalLM"};
    c["hidden_size"] = d;
    c["vocab_size"] = vocab;
    c["num_hidden_layers"] = n_layers;
    c["rms_norm_eps"] = clean_f32(eps);
    c["num_attention_heads"] = heads;
    c["first_k_dense_replace"] = any_moe ? n_dense : n_layers;
    c["intermediate_size"] = ffn;
    c["moe_intermediate_size"] = I;
    c["num_experts"] = any_moe ? E : 0;
    c["num_experts_per_token"] = any_moe ? top_k : 0;
    c["num_shared_experts"] = n_shared;
    if (renorm) c["moe_renormalize"] = true;
    c["routed_scaling_factor"] = clean_f32(scale);
    c["kv_lora_rank"] = kv_lora;
    if (q_lora > 0) c["q_lora_rank"] = q_lora;
    else c["q_lora_rank"] = nullptr;
    c["qk_nope_head_dim"] = d_nope;
    c["qk_rope_head_dim"] = d_rope;
    c["v_head_dim"] = d_v;
    // llama.cpp's kimi graphs apply no rotary to MLA; deepseek2 always does.
    c["mla_use_nope"] = !ds;
    if (ds) {
        double theta = 10000;
        std::string type;
        if (!opt_f(A + "rope.freq_base", 10000.0, &theta)) return false;
        if (!(theta > 1)) {
            *err = P + ": metadata key " + A + "rope.freq_base must be > 1";
            return false;
        }
        c["rope_theta"] = clean_f32(theta);
        if (rd_.find(A + "rope.scaling.type") && !st(rd_.get_str(A + "rope.scaling.type", &type))) return false;
        if (type == "yarn") {
            double factor, mult = 0, beta_fast, beta_slow;
            int64_t orig;
            if (!get_f(A + "rope.scaling.factor", &factor) ||
                !get_i(A + "rope.scaling.original_context_length", 1, int64_t(1) << 30, &orig) ||
                !opt_f(A + "rope.scaling.yarn_beta_fast", 32.0, &beta_fast) ||
                !opt_f(A + "rope.scaling.yarn_beta_slow", 1.0, &beta_slow))
                return false;
            // mscale = mscale_all_dim = yarn_log_multiplier / 0.1; attn_factor in its
            // place is export-gguf's spelling of mscale_all_dim 0.
            if (rd_.find(A + "rope.scaling.yarn_log_multiplier")) {
                if (!get_f(A + "rope.scaling.yarn_log_multiplier", &mult)) return false;
            } else if (!rd_.find(A + "rope.scaling.attn_factor")) {
                *err = P + ": metadata keys " + A + "rope.scaling.yarn_log_multiplier and " + A +
                       "rope.scaling.attn_factor are both missing (YaRN needs one)";
                return false;
            }
            ojson rs;
            rs["type"] = "yarn";
            rs["factor"] = clean_f32(factor);
            rs["original_max_position_embeddings"] = orig;
            const double ms = clean_f32(static_cast<float>(mult) / 0.1);
            rs["mscale"] = ms;
            rs["mscale_all_dim"] = ms;
            rs["beta_fast"] = clean_f32(beta_fast);
            rs["beta_slow"] = clean_f32(beta_slow);
            c["rope_scaling"] = rs;
        } else if (!type.empty() && type != "none") {
            *err = P + ": metadata key " + A + "rope.scaling.type '" + type + "' is not supported (yarn or none)";
            return false;
        }
    }
    if (k3) {
        if (out_gate) c["mla_use_output_gate"] = true;
        const bool situ = situ_beta < 1e29;  // export-gguf writes SiLU-GLU as SiTU with beta 1e30
        c["hidden_act"] = situ ? "situ" : "silu";
        if (situ) {
            if (!(situ_beta > 0)) {
                *err = P + ": metadata key " + A + "activation.situ_beta must be > 0";
                return false;
            }
            c["activation_situ_beta"] = clean_f32(situ_beta);
            c["activation_situ_linear_beta"] = clean_f32(situ_lin);
        }
        if (r_lat > 0) c["routed_expert_hidden_size"] = r_lat;
        if (latent_norm) c["latent_moe_use_norm"] = true;
        if (attn_res > 0) c["attn_res_block_size"] = attn_res;
    }
    for (const char* tok : {"bos", "eos"}) {
        const std::string key = std::string("tokenizer.ggml.") + tok + "_token_id";
        int64_t id = -1;
        if (!opt_i(key, 0, vocab - 1, -1, &id)) return false;
        if (id >= 0) c[std::string(tok) + "_token_id"] = id;
    }
    if (!ds) {
        ojson la;
        ojson kda = ojson::array(), full = ojson::array();
        for (int64_t L = 0; L < n_layers; ++L) (is_kda[static_cast<size_t>(L)] ? kda : full).push_back(L + 1);
        la["head_dim"] = any_kda ? kda_dim : 1;
        la["num_heads"] = heads;
        la["short_conv_kernel_size"] = conv_k;
        la["kda_layers"] = kda;
        la["full_attn_layers"] = full;
        if (k3) la["use_full_rank_gate"] = true;  // ssm_g is the folded gate: it cannot be split again
        if (has_lower) {
            if (!(lower < 0)) {
                *err = P + ": metadata key " + A + "kda.gate_lower_bound must be < 0";
                return false;
            }
            la["gate_lower_bound"] = clean_f32(lower);
        }
        c["linear_attn_config"] = la;
    }
    config_ = std::move(c);
    std::string a, b, t, why;
    if (!tokenizer_files(&a, &b, &t, &why))
        notes_.push_back("tokenizer: not imported (" + why + "); the container runs on token ids (sluice logits --ids)");
    return true;
}

namespace {

std::string base64(const std::string& in) {
    static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string o;
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        const uint32_t v = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8) | uint8_t(in[i + 2]);
        o += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
    }
    if (i + 1 == in.size()) {
        const uint32_t v = uint32_t(uint8_t(in[i])) << 16;
        o += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
    } else if (i + 2 == in.size()) {
        const uint32_t v = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8);
        o += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
    }
    return o;
}

}  // namespace

bool GgufSource::tokenizer_files(std::string* rank_text, std::string* specials_json, std::string* chat_template,
                                 std::string* why) const {
    std::string model, pre;
    if (!rd_.get_str("tokenizer.ggml.model", &model).is_ok() || model != "gpt2") {
        *why = "tokenizer.ggml.model is '" + model + "', not gpt2 (byte-level BPE)";
        return false;
    }
    if (!rd_.get_str("tokenizer.ggml.pre", &pre).is_ok() || pre != "kimi-k2") {
        *why = "pre-tokenizer '" + pre + "': sluice runs the Kimi pattern (kimi-k2) for these families";
        return false;
    }
    const gguf::Value* toks = rd_.find("tokenizer.ggml.tokens");
    const gguf::Value* types = rd_.find("tokenizer.ggml.token_type");
    if (!toks || toks->type != gguf::ValueType::ARR || toks->elem != gguf::ValueType::STR || !types ||
        types->type != gguf::ValueType::ARR || types->nums.size() != toks->strs.size()) {
        *why = "tokenizer.ggml.tokens / token_type missing or of different lengths";
        return false;
    }
    std::string ranks, bytes;
    ojson specials = ojson::array();
    size_t n_ranks = 0;
    bool ranks_done = false;
    for (size_t id = 0; id < toks->strs.size(); id++) {
        const int type = static_cast<int>(types->nums[id]);
        if (type == 1) {  // normal: a rank, in id order before anything else
            if (ranks_done || !byte_level_to_bytes(toks->strs[id], &bytes)) {
                *why = "token " + std::to_string(id) + " is not a byte-level rank in id order";
                return false;
            }
            ranks += base64(bytes) + " " + std::to_string(n_ranks++) + "\n";
        } else if (type == 3 || type == 4) {  // control, user-defined: a special
            ranks_done = true;
            ojson sp;
            sp["id"] = static_cast<int64_t>(id);
            sp["text"] = toks->strs[id];
            specials.push_back(sp);
        } else {
            ranks_done = true;  // unused or unknown ids: gaps in the vocabulary
        }
    }
    if (n_ranks < 256) {
        *why = "fewer than 256 byte-level ranks";
        return false;
    }
    *rank_text = std::move(ranks);
    *specials_json = specials.dump(1, ' ', false);
    chat_template->clear();
    (void)rd_.get_str("tokenizer.chat_template", chat_template);
    return true;
}

}  // namespace sluice::convert
