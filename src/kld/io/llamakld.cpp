#include "common/checked_file.h"
#include "kld/io/llamakld.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sluice::kld {

uint64_t kld_expected_size(int64_t n_ctx, int64_t n_vocab, int64_t n_chunk) {
    // The fields come from an untrusted header (each up to 2^31 - 1): their
    // products overflow 64 bits (found by fuzz_llamakld), so the size is
    // computed with overflow checks and UINT64_MAX, which no file has, stands
    // for "too large".
    if (n_ctx < 0 || n_vocab < 0 || n_chunk < 0) return UINT64_MAX;
    const uint64_t S = uint64_t(n_ctx - 1 - n_ctx / 2), nv = 2 * ((uint64_t(n_vocab) + 1) / 2) + 4;
    uint64_t tok, rows, total;
    if (__builtin_mul_overflow(uint64_t(n_ctx), uint64_t(n_chunk), &tok) || __builtin_mul_overflow(tok, 4u, &tok) ||
        __builtin_mul_overflow(nv * 2, S, &rows) || __builtin_mul_overflow(rows, uint64_t(n_chunk), &rows) ||
        __builtin_add_overflow(tok, rows, &total) || __builtin_add_overflow(total, 20u, &total))
        return UINT64_MAX;
    return total;
}

Status kld_open(const std::string& path, KldFile* out) {
    KldFile f;
    f.path = path;
    // A FIFO is refused instead of blocking (common/checked_file.h).
    int fd = -1;
    uint64_t fsize = 0;
    if (::sluice::Status s = ::sluice::open_input_file(path, &fd, &fsize); !s) return from_status(s);
    char hdr[20];
    ssize_t n = ::pread(fd, hdr, 20, 0);
    if (n != 20) {
        ::close(fd);
        return err(Code::format, path + ": shorter than the 20-byte .kld header");
    }
    if (std::memcmp(hdr, "_logits_", 8) != 0) {
        ::close(fd);
        return err(Code::format, path + ": bad magic (expected \"_logits_\")");
    }
    std::memcpy(&f.n_ctx, hdr + 8, 4);
    std::memcpy(&f.n_vocab, hdr + 12, 4);
    std::memcpy(&f.n_chunk, hdr + 16, 4);
    if (f.n_ctx < 2 || f.n_vocab < 1 || f.n_chunk < 0) {
        ::close(fd);
        return err(Code::format, path + ": n_ctx " + std::to_string(f.n_ctx) + ", n_vocab " + std::to_string(f.n_vocab) +
                                     ", n_chunk " + std::to_string(f.n_chunk) + " out of range");
    }
    const uint64_t want = kld_expected_size(f.n_ctx, f.n_vocab, f.n_chunk);
    if (want == UINT64_MAX) {
        ::close(fd);
        return err(Code::format, path + ": n_ctx " + std::to_string(f.n_ctx) + ", n_vocab " +
                                     std::to_string(f.n_vocab) + ", n_chunk " + std::to_string(f.n_chunk) +
                                     " describe a file over 2^64 bytes");
    }
    if (fsize != want) {
        ::close(fd);
        return err(Code::format, path + ": file size " + std::to_string(fsize) + " != " + std::to_string(want) +
                                     " from the header (n_ctx " + std::to_string(f.n_ctx) + ", n_vocab " +
                                     std::to_string(f.n_vocab) + ", n_chunk " + std::to_string(f.n_chunk) + ")");
    }
    f.tokens.resize(size_t(f.n_ctx) * size_t(f.n_chunk));
    const size_t tb = f.tokens.size() * 4;
    if (tb && ::pread(fd, f.tokens.data(), tb, 20) != ssize_t(tb)) {
        ::close(fd);
        return err(Code::io, path + ": short read of the token block");
    }
    ::close(fd);
    f.rows_offset = 20 + tb;
    *out = std::move(f);
    return {};
}

Status kld_read_row(const KldFile& f, int chunk, int j, std::vector<uint16_t>* row) {
    const int S = f.rows_per_chunk(), j0 = f.n_ctx / 2;
    if (chunk < 0 || chunk >= f.n_chunk || j < j0 || j > f.n_ctx - 2) return err(Code::usage, "kld row out of range");
    const size_t nv = size_t(f.row_u16());
    row->resize(nv);
    const uint64_t off = f.rows_offset + (uint64_t(chunk) * uint64_t(S) + uint64_t(j - j0)) * nv * 2;
    int fd = -1;
    if (::sluice::Status s = ::sluice::open_input_file(f.path, &fd); !s) return from_status(s);
    ssize_t n = ::pread(fd, row->data(), nv * 2, off_t(off));
    ::close(fd);
    if (n != ssize_t(nv * 2)) return err(Code::io, f.path + ": short row read");
    // A row is decoded as scale * q + min_log_p: a NaN or infinite header
    // turns every log-probability of the row into NaN (KLD.md §7.9: exit 6).
    float scale, mlp;
    std::memcpy(&scale, row->data(), 4);
    std::memcpy(&mlp, row->data() + 2, 4);
    if (!std::isfinite(scale) || !std::isfinite(mlp))
        return err(Code::nonfinite, f.path + ": chunk " + std::to_string(chunk) + " row " + std::to_string(j) +
                                        ": " + (std::isfinite(scale) ? "min log-prob" : "scale") + " is " +
                                        (std::isnan(std::isfinite(scale) ? mlp : scale) ? "NaN" : "infinite"));
    return {};
}

namespace {
// llama.cpp's nearest_int: exact round-half-even below 2^22.
int nearest_int(float fval) {
    float val = fval + 12582912.f;
    int i;
    std::memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}
}  // namespace

void kld_encode_row(const float* x, int32_t V, uint16_t* out) {
    const size_t nv = size_t(2 * ((V + 1) / 2) + 4);
    std::memset(out, 0, nv * 2);  // the odd-V padding slot stays 0
    float M = x[0], m0 = x[0];
    for (int32_t v = 1; v < V; ++v) {
        M = std::max(M, x[v]);
        m0 = std::min(m0, x[v]);
    }
    const float mn = std::max(m0, M - 16);
    double sum = 0;
    for (int32_t v = 0; v < V; ++v) sum += std::exp(x[v] - M);  // float exp, double sum
    const float lse = float(std::log(sum));
    const float scale = (M - mn) / 65535.f;
    const float min_log_prob = mn - M - lse;
    std::memcpy(out, &scale, 4);
    std::memcpy(out + 2, &min_log_prob, 4);
    uint16_t* q = out + 4;
    if (scale == 0) return;
    const float iscale = 1.f / scale;
    for (int32_t v = 0; v < V; ++v)
        q[v] = x[v] > mn ? uint16_t(std::min(65535, std::max(0, nearest_int(iscale * (x[v] - mn))))) : uint16_t(0);
}

void kld_decode_row(const uint16_t* row, int32_t V, float* logp) {
    float scale, mlp;
    std::memcpy(&scale, row, 4);
    std::memcpy(&mlp, row + 2, 4);
    for (int32_t v = 0; v < V; ++v) logp[v] = scale * row[4 + v] + mlp;
}

Status export_kld(const Suite& s, Operand& ref, const KldWriteOptions& opt, const std::string& out_path,
                  std::string* warning) {
    std::vector<int> pos;
    SLUICE_TRY(select_windows(s, opt.sel, &pos));
    SLUICE_TRY(ref.check_suite(s, pos));
    const int64_t V = ref.vocab();
    const int T = s.context_length;
    if (V > INT32_MAX) return err(Code::format, "vocab too large for .kld");
    std::string buf;
    buf.append("_logits_", 8);
    const int32_t hdr[3] = {T, int32_t(V), int32_t(pos.size())};
    buf.append(reinterpret_cast<const char*>(hdr), 12);
    for (int p : pos) buf.append(reinterpret_cast<const char*>(s.windows[size_t(p)].tokens.data()), size_t(T) * 4);
    const size_t nv = size_t(2 * ((V + 1) / 2) + 4);
    std::vector<float> row(static_cast<size_t>(V));
    std::vector<uint16_t> enc(nv);
    for (int p : pos) {
        std::unique_ptr<RowStream> rs;
        SLUICE_TRY(ref.open_window(s, p, &rs));
        for (int r = 0; r < T - 1; ++r) {
            SLUICE_TRY(rs->read(1, row.data()));
            for (int64_t v = 0; v < V; ++v)
                if (!(row[size_t(v)] < INFINITY))
                    return err(Code::nonfinite, ref.label() + ": window " + std::to_string(s.windows[size_t(p)].index) +
                                                    " row " + std::to_string(r) + " column " + std::to_string(v) + ": NaN or +inf");
            if (r < T / 2) continue;  // llama.cpp scores only the second half
            kld_encode_row(row.data(), int32_t(V), enc.data());
            buf.append(reinterpret_cast<const char*>(enc.data()), nv * 2);
        }
        SLUICE_TRY(rs->finish());
    }
    if (warning)
        *warning = "the suite's windows carry no BOS; a llama.cpp consumer whose vocabulary sets add_bos substitutes BOS "
                   "for token 0 of every chunk and changes the conditioning";
    return write_file_atomic(out_path, buf);
}

Suite suite_from_kld(const KldFile& f, int32_t bos) {
    Suite s;
    s.dir.assign(1, '.');  // not = ".": GCC 12's false -Wrestrict (PR 105329) once inlined here
    s.manifest_path = f.path;
    s.context_length = f.n_ctx;
    std::vector<std::string> hs;
    for (int c = 0; c < f.n_chunk; ++c) {
        SuiteWindow w;
        w.index = c;
        w.domain = "kld";
        w.domain_index = c;
        w.num_tokens = f.n_ctx;
        w.tokens.assign(f.tokens.begin() + int64_t(c) * f.n_ctx, f.tokens.begin() + int64_t(c + 1) * f.n_ctx);
        if (bos >= 0 && !w.tokens.empty()) w.tokens[0] = bos;
        w.token_hash = token_ids_hash(w.tokens);
        hs.push_back(w.token_hash);
        s.windows.push_back(std::move(w));
    }
    s.suite_hash = suite_token_hash(hs);
    return s;
}

Status compare_kld(const KldFile& f, Operand& cand, json* receipt, std::string* text, int32_t bos) {
    if (cand.vocab() != f.n_vocab)  // llama.cpp only warns; sluice refuses
        return err(Code::identity, f.path + ": n_vocab " + std::to_string(f.n_vocab) + " != candidate V " +
                                       std::to_string(cand.vocab()));
    if (bos >= f.n_vocab) return err(Code::usage, "--bos " + std::to_string(bos) + " is outside the vocabulary");
    Suite s = suite_from_kld(f, bos);
    std::vector<int> pos;
    for (int c = 0; c < f.n_chunk; ++c) pos.push_back(c);
    SLUICE_TRY(cand.check_suite(s, pos));
    const int V = f.n_vocab, T = f.n_ctx;
    std::vector<float> y(static_cast<size_t>(V)), lb(static_cast<size_t>(V));
    std::vector<uint16_t> enc;
    std::vector<LlamaToken> toks;
    for (int c = 0; c < f.n_chunk; ++c) {
        std::unique_ptr<RowStream> cs;
        SLUICE_TRY(cand.open_window(s, c, &cs));
        for (int j = 0; j < T - 1; ++j) {
            SLUICE_TRY(cs->read(1, y.data()));
            if (j < T / 2) continue;
            for (int v = 0; v < V; ++v)
                if (!(y[size_t(v)] < INFINITY))
                    return err(Code::nonfinite, cand.label() + ": chunk " + std::to_string(c) + " row " + std::to_string(j) +
                                                    " column " + std::to_string(v) + ": NaN or +inf");
            SLUICE_TRY(kld_read_row(f, c, j, &enc));
            const int tok = s.windows[size_t(c)].tokens[size_t(j + 1)];
            // llama.cpp log_softmax(): first-index max, float exp, double sum, float lse.
            float M = y[0];
            int imax = 0;
            for (int v = 1; v < V; ++v)
                if (y[size_t(v)] > M) { M = y[size_t(v)]; imax = v; }
            double se = 0;
            for (int v = 0; v < V; ++v) se += std::exp(y[size_t(v)] - M);
            const float lse = float(std::log(se));
            float scale, mlp;
            std::memcpy(&scale, enc.data(), 4);
            std::memcpy(&mlp, enc.data() + 2, 4);
            const uint16_t* q = enc.data() + 4;
            const float nll = M + lse - y[size_t(tok)];
            const float nll_base = -(scale * q[tok] + mlp);
            const float Ml = M + lse;
            double sum = 0;
            int imax_base = -1;
            float pmax = 0;
            for (int v = 0; v < V; ++v) {
                const float lp = scale * q[v] + mlp;
                if (imax_base < 0 || lp > pmax) { pmax = lp; imax_base = v; }
                if (lp > -16.f) sum += std::exp(lp) * (lp - y[size_t(v)] + Ml);
            }
            const float dp = std::exp(-nll) - std::exp(-nll_base);
            toks.push_back({double(nll), double(nll_base), sum, double(dp), imax == imax_base});
        }
        SLUICE_TRY(cs->finish());
    }
    *text = llamacpp_block(toks);
    json r;
    r["kind"] = "sluice kld compare against a llama.cpp .kld base";
    r["base"] = f.path;
    r["n_ctx"] = f.n_ctx;
    r["n_vocab"] = f.n_vocab;
    r["n_chunk"] = f.n_chunk;
    r["positions"] = toks.size();
    r["candidate"] = cand.identity();
    double kl = 0, same = 0;
    for (auto& t : toks) {
        kl += t.kld;
        same += t.same_top;
    }
    r["kld_mean"] = toks.empty() ? 0.0 : kl / double(toks.size());
    r["same_top_p"] = toks.empty() ? 0.0 : same / double(toks.size());
    r["llamacpp_block"] = *text;
    *receipt = r;
    return {};
}

// ---- §6.5 statistics block -------------------------------------------------
namespace {
// printf into a string with the format checked at compile time (a lambda
// forwarding its format argument defeats -Wformat: clang flagged it).
__attribute__((format(printf, 2, 3))) void appendf(std::string& o, const char* fmt, ...) {
    char b[256];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    o += b;
}
std::pair<double, double> mu(double sum, double sum2, size_t n) {
    if (n < 1) return {0, 0};
    const double f = sum / double(n);
    const double var = sum2 / double(n) - f * f;
    const double u = (n > 10 && var > 0) ? std::sqrt(var / double(n - 1)) : 0.0;
    return {f, u};
}
float pct(const std::vector<float>& v, float f) {
    if (f <= 0) return v.front();
    if (f >= 1) return v.back();
    const float t = f * float(v.size() - 1);
    const size_t i = size_t(t);
    const float g = t - float(i);
    return (1 - g) * v[i] + g * v[std::min(i + 1, v.size() - 1)];
}
float median_f(const std::vector<float>& v) {
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

std::string llamacpp_block(const std::vector<LlamaToken>& toks) {
    const size_t n = toks.size();
    if (n < 100) return "llama.cpp statistics: fewer than 100 positions, block not printed (as llama.cpp)\n";
    double snll = 0, snll2 = 0, sb = 0, sb2 = 0, snb = 0, sk = 0, sk2 = 0, sp = 0, sp2 = 0, sp4 = 0;
    size_t same = 0;
    std::vector<float> kv, pv;
    for (const auto& t : toks) {
        snll += t.nll; snll2 += t.nll * t.nll;
        sb += t.nll_base; sb2 += t.nll_base * t.nll_base;
        snb += t.nll * t.nll_base;
        sk += t.kld; sk2 += t.kld * t.kld;
        sp += t.dp; sp2 += t.dp * t.dp; sp4 += t.dp * t.dp * t.dp * t.dp;
        same += t.same_top;
        kv.push_back(float(t.kld));
        pv.push_back(float(t.dp));
    }
    std::sort(kv.begin(), kv.end());
    std::sort(pv.begin(), pv.end());
    auto [fq, uq] = mu(snll, snll2, n);
    auto [fb, ub] = mu(sb, sb2, n);
    const double cov = n < 10 ? 0.0 : (snb / double(n) - fq * fb) / double(n - 1);
    const double cor = (uq > 0 && ub > 0) ? cov / (uq * ub) : 0.0;
    const double ppl_q = std::exp(fq), ppl_b = std::exp(fb);
    const double lr = fq - fb, lr_u = std::sqrt(std::max(0.0, uq * uq + ub * ub - 2 * cov));
    const double pr = std::exp(lr);
    const double pd_u = std::sqrt(std::max(0.0, ppl_q * uq * ppl_q * uq + ppl_b * ub * ppl_b * ub - 2 * ppl_q * ppl_b * cov));
    auto [km, ku] = mu(sk, sk2, n);
    auto [pm, pu] = mu(sp, sp2, n);
    auto [p2m, p2u] = mu(sp2, sp4, n);
    const double rms = std::sqrt(p2m), rms_u = rms > 0 ? 0.5 / rms * p2u : 0.0;
    const double st = double(same) / double(n);
    std::string o;
    appendf(o, "====== Perplexity statistics ======\n");
    appendf(o, "Mean PPL(Q)                   : %10.6lf ± %10.6lf\n", ppl_q, ppl_q * uq);
    appendf(o, "Mean PPL(base)                : %10.6lf ± %10.6lf\n", ppl_b, ppl_b * ub);
    appendf(o, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2lf%%\n", 100.0 * cor);
    appendf(o, "Mean ln(PPL(Q)/PPL(base))     : %10.6lf ± %10.6lf\n", lr, lr_u);
    appendf(o, "Mean PPL(Q)/PPL(base)         : %10.6lf ± %10.6lf\n", pr, pr * lr_u);
    appendf(o, "Mean PPL(Q)-PPL(base)         : %10.6lf ± %10.6lf\n", ppl_q - ppl_b, pd_u);
    appendf(o, "\n====== KL divergence statistics ======\n");
    appendf(o, "Mean    KLD: %10.6lf ± %10.6lf\n", km, ku);
    appendf(o, "Maximum KLD: %10.6f\n", double(kv.back()));
    appendf(o, "99.9%%   KLD: %10.6f\n", double(pct(kv, 0.999f)));
    appendf(o, "99.0%%   KLD: %10.6f\n", double(pct(kv, 0.990f)));
    appendf(o, "95.0%%   KLD: %10.6f\n", double(pct(kv, 0.950f)));
    appendf(o, "90.0%%   KLD: %10.6f\n", double(pct(kv, 0.900f)));
    appendf(o, "Median  KLD: %10.6f\n", double(median_f(kv)));
    appendf(o, "10.0%%   KLD: %10.6f\n", double(pct(kv, 0.100f)));
    appendf(o, " 5.0%%   KLD: %10.6f\n", double(pct(kv, 0.050f)));
    appendf(o, " 1.0%%   KLD: %10.6f\n", double(pct(kv, 0.010f)));
    appendf(o, " 0.1%%   KLD: %10.6f\n", double(pct(kv, 0.001f)));
    appendf(o, "Minimum KLD: %10.6f\n", double(kv.front()));
    appendf(o, "\n====== Token probability statistics ======\n");
    appendf(o, "Mean    Δp: %6.3lf ± %5.3lf %%\n", 100.0 * pm, 100.0 * pu);
    appendf(o, "Maximum Δp: %6.3lf%%\n", 100.0 * pv.back());
    appendf(o, "99.9%%   Δp: %6.3lf%%\n", 100.0 * pct(pv, 0.999f));
    appendf(o, "99.0%%   Δp: %6.3lf%%\n", 100.0 * pct(pv, 0.990f));
    appendf(o, "95.0%%   Δp: %6.3lf%%\n", 100.0 * pct(pv, 0.950f));
    appendf(o, "90.0%%   Δp: %6.3lf%%\n", 100.0 * pct(pv, 0.900f));
    appendf(o, "75.0%%   Δp: %6.3lf%%\n", 100.0 * pct(pv, 0.750f));
    appendf(o, "Median  Δp: %6.3lf%%\n", 100.0 * median_f(pv));
    appendf(o, "25.0%%   Δp: %6.3lf%%\n", 100.0 * pct(pv, 0.250f));
    appendf(o, "10.0%%   Δp: %6.3lf%%\n", 100.0 * pct(pv, 0.100f));
    appendf(o, " 5.0%%   Δp: %6.3lf%%\n", 100.0 * pct(pv, 0.050f));
    appendf(o, " 1.0%%   Δp: %6.3lf%%\n", 100.0 * pct(pv, 0.010f));
    appendf(o, " 0.1%%   Δp: %6.3lf%%\n", 100.0 * pct(pv, 0.001f));
    appendf(o, "Minimum Δp: %6.3lf%%\n", 100.0 * pv.front());
    appendf(o, "RMS Δp    : %6.3lf ± %5.3lf %%\n", 100.0 * rms, 100.0 * rms_u);
    appendf(o, "Same top p: %6.3lf ± %5.3lf %%\n", 100.0 * st, 100.0 * std::sqrt(st * (1.0 - st) / double(n - 1)));
    return o;
}

}  // namespace sluice::kld
