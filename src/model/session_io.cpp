// Session state files: the decoding state of one context, restorable into a
// context of the same model. Every shape the state depends on is recorded
// and checked on load, with the mismatching field named.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/checked_file.h"
#include "format/io_fault.h"
#include "format/file_sha256.h"
#include "format/file.h"
#include "model/engine.h"

namespace sluice {
namespace {

constexpr uint32_t kMagic = 0x53534C53u;  // "SLSS"
constexpr uint32_t kVersion = 1;

struct Header {
    uint32_t magic, version;
    int32_t n_layers, hidden, vocab, kda_heads, kda_dim, conv_kernel, n_heads, kv_lora, d_rope, attn_res_block;
    int32_t pos, reserved;
    char manifest_sha256[64];
};

Header make_header(const ModelConfig &c, int pos, const std::string &sha) {
    Header h;
    std::memset(&h, 0, sizeof h);
    h.magic = kMagic;
    h.version = kVersion;
    h.n_layers = c.n_layers;
    h.hidden = c.hidden;
    h.vocab = c.vocab;
    h.kda_heads = c.kda_heads;
    h.kda_dim = c.kda_dim;
    h.conv_kernel = c.conv_kernel;
    h.n_heads = c.n_heads;
    h.kv_lora = c.kv_lora;
    h.d_rope = c.d_rope;
    h.attn_res_block = c.attn_res_block;
    h.pos = pos;
    std::memcpy(h.manifest_sha256, sha.data(), std::min<size_t>(64, sha.size()));
    return h;
}

}  // namespace

Status Engine::save_state(const std::string &path) {
    if (std::string why = output_inside_reason(path, c_.dir(), "the model"); !why.empty()) return io_error(why);
    SLUICE_TRY(settle());  // the file holds the state at n_past
    std::string sha;
    SLUICE_TRY(sha256_file(c_.dir() + "/manifest.json", &sha));
    const Header h = make_header(c_.config(), pos_, sha);
    OutputFile out;
    SLUICE_TRY(out.create(path));
    const std::string tmp = out.temp_path();
    FILE *f = out.stream();
    if (!f) return io_error(path + ": cannot create the state file");
    // An empty session's MLA cache is an empty vector whose data() is null:
    // fwrite's buffer is declared non-null, so passing it even with a zero
    // count is undefined (UBSan aborted `/save` of a fresh chat).
    const auto put = [f](const std::vector<float> &v) {
        return v.empty() || std::fwrite(v.data(), 4, v.size(), f) == v.size();
    };
    bool ok = std::fwrite(&h, sizeof h, 1, f) == 1;
    for (int L = 0; ok && L < c_.config().n_layers; L++) {
        if (c_.config().is_kda[(size_t)L]) {
            const KdaState &k = kda_[(size_t)L];
            ok = put(k.S) && put(k.ring);
        } else {
            const MlaState &m = mla_[(size_t)L];
            const int32_t len = m.len;
            ok = std::fwrite(&len, 4, 1, f) == 1 && put(m.cache);
        }
    }
    int werr = ok ? 0 : errno;
    if (ok && (werr = hooked_write_error(tmp)) != 0) ok = false;  // fault injection (tests)
    // Rename only a complete file, so a failure never leaves a state file
    // that looks valid.
    if (!ok) {
        out.discard();
        return io_error(path + ": cannot write the state file" + (werr ? std::string(": ") + std::strerror(werr) : ""));
    }
    return out.commit(false);
}

Status Engine::load_state(const std::string &path) {
    File f;
    SLUICE_TRY(f.open_read(path));
    Header h;
    if (f.size() < sizeof h) return format_error(path + ": too short to be a sluice state file");
    SLUICE_TRY(f.pread_all(&h, sizeof h, 0));
    if (h.magic != kMagic) return format_error(path + ": not a sluice state file (bad magic)");
    if (h.version != kVersion) return format_error(path + ": state file version " + std::to_string(h.version) +
                                                   " is not supported (expected 1)");
    std::string sha;
    SLUICE_TRY(sha256_file(c_.dir() + "/manifest.json", &sha));
    const Header want = make_header(c_.config(), 0, sha);
    struct Field {
        const char *name;
        int32_t got, want;
    } fields[] = {{"n_layers", h.n_layers, want.n_layers},          {"hidden", h.hidden, want.hidden},
                  {"vocab", h.vocab, want.vocab},                   {"kda_heads", h.kda_heads, want.kda_heads},
                  {"kda_head_dim", h.kda_dim, want.kda_dim},        {"conv_kernel", h.conv_kernel, want.conv_kernel},
                  {"mla_heads", h.n_heads, want.n_heads},           {"kv_lora_rank", h.kv_lora, want.kv_lora},
                  {"qk_rope_head_dim", h.d_rope, want.d_rope},      {"attn_res_block", h.attn_res_block, want.attn_res_block}};
    for (const Field &fd : fields)
        if (fd.got != fd.want)
            return format_error(path + ": saved for a different model: " + fd.name + " is " + std::to_string(fd.got) +
                                ", this model has " + std::to_string(fd.want));
    if (std::memcmp(h.manifest_sha256, want.manifest_sha256, 64) != 0)
        return format_error(path + ": saved for a different container (manifest.json sha256 differs)");
    if (h.pos < 0 || h.pos > opt_.max_context)
        return format_error(path + ": position " + std::to_string(h.pos) + " is outside [0, max_context " +
                            std::to_string(opt_.max_context) + "]");
    // Read into fresh state and swap in only when everything checked out.
    const ModelConfig &c = c_.config();
    std::vector<KdaState> kda((size_t)c.n_layers);
    std::vector<MlaState> mla((size_t)c.n_layers);
    uint64_t off = sizeof h;
    const int64_t row = c.kv_lora + c.d_rope;
    // Every read is checked against the file size first, so a cut file is a
    // format error naming the layer (not a bare short read), and a lying
    // position never sizes a buffer the file cannot fill.
    auto take = [&](std::vector<float> *dst, uint64_t count, int L, const char *what) -> Status {
        if (count > (f.size() - off) / 4)
            return format_error(path + ": truncated: layer " + std::to_string(L) + " needs " +
                                std::to_string(count * 4) + " bytes of " + what + " at offset " + std::to_string(off) +
                                ", the file has " + std::to_string(f.size()));
        dst->resize((size_t)count);
        if (count == 0) return Status::ok();  // data() may be null: nothing to read into
        SLUICE_TRY(f.pread_all(dst->data(), (size_t)count * 4, off));
        off += count * 4;
        return Status::ok();
    };
    for (int L = 0; L < c.n_layers; L++) {
        if (c.is_kda[(size_t)L]) {
            const uint64_t H = (uint64_t)c.kda_heads, D = (uint64_t)c.kda_dim, K = (uint64_t)c.conv_kernel;
            SLUICE_TRY(take(&kda[(size_t)L].S, H * D * D, L, "KDA state"));
            SLUICE_TRY(take(&kda[(size_t)L].ring, 3 * H * D * (K - 1), L, "conv ring"));
        } else {
            int32_t len = 0;
            if (f.size() - off < 4)
                return format_error(path + ": truncated: layer " + std::to_string(L) +
                                    " needs its MLA cache length at offset " + std::to_string(off) +
                                    ", the file has " + std::to_string(f.size()));
            SLUICE_TRY(f.pread_all(&len, 4, off));
            off += 4;
            if (len != h.pos)
                return format_error(path + ": layer " + std::to_string(L) + " holds " + std::to_string(len) +
                                    " cached positions, the header says " + std::to_string(h.pos));
            mla[(size_t)L].len = len;
            SLUICE_TRY(take(&mla[(size_t)L].cache, (uint64_t)len * (uint64_t)row, L, "MLA cache"));
        }
    }
    if (off != f.size()) return format_error(path + ": " + std::to_string(f.size() - off) + " trailing bytes");
    // A saved session is finite (eval refuses a non-finite hidden state), so
    // NaN/Inf here is damage: refused now, naming the layer, rather than
    // accepted and surfacing as a non-finite error on the next eval.
    for (int L = 0; L < c.n_layers; L++) {
        const auto finite = [](const std::vector<float> &v) {
            return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
        };
        const bool ok = c.is_kda[(size_t)L] ? finite(kda[(size_t)L].S) && finite(kda[(size_t)L].ring)
                                             : finite(mla[(size_t)L].cache);
        if (!ok) return format_error(path + ": layer " + std::to_string(L) + " holds a NaN or infinite value");
    }
    kda_.swap(kda);
    mla_.swap(mla);
    pos_ = h.pos;
    // The file holds no token ids: no position of it can be matched for
    // prompt reuse, and no checkpoint of the former session applies.
    tokens_.assign((size_t)h.pos, -1);
    pending_.clear();
    due_.clear();
    log_lo_ = log_hi_ = pos_;  // the file holds no log
    drop_checkpoints_after(0);
    return Status::ok();
}

}  // namespace sluice
