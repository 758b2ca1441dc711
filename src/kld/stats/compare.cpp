#include "kld/stats/compare.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <thread>

#include "format/safetensors.h"
#include "kld/kernels/torch_f32.h"

namespace sluice::kld {

using namespace ::sluice::st;  // the safetensors reader and writer

namespace {

// Scores one window into its slot. Any error names window/row/column.
Status score_window(const Suite& s, Operand& ref, Operand& cand, int pos, const CompareOptions& o, int64_t V,
                    WindowResult* w, ProgressTicker* prog) {
    const SuiteWindow& sw = s.windows[size_t(pos)];
    const int64_t R = s.context_length - 1;
    w->window_index = sw.index;
    w->position = pos;
    w->domain = sw.domain;
    std::unique_ptr<RowStream> rs, cs;
    SLUICE_TRY(ref.open_window(s, pos, &rs));
    SLUICE_TRY(cand.open_window(s, pos, &cs));
    const int64_t B = std::max(1, o.rows_per_block);
    for (auto* v : {&w->kl, &w->js, &w->nll_ref, &w->nll_cand, &w->dp, &w->ae_mean}) v->resize(size_t(R));
    w->top1.resize(size_t(R));
    w->top1_tie.resize(size_t(R));
    w->ref_tied.resize(size_t(R));
    const Numerics mode = o.compat == Compat::festr2_v0 ? Numerics::festr2_v0
                          : o.precision == Precision::fp64 ? Numerics::fp64
                                                           : Numerics::fast;
    for (int64_t r0 = 0; r0 < R;) {
        // Rows straight from the operands' read-ahead buffers where they can
        // (no copy): as many as both streams hold contiguously, at most B.
        const int64_t want = std::min(B, R - r0);
        const float *xp = nullptr, *yp = nullptr;
        int64_t nx = 0, ny = 0;
        SLUICE_TRY(rs->peek(want, V, &xp, &nx));
        SLUICE_TRY(cs->peek(want, V, &yp, &ny));
        const int64_t n = std::min(nx, ny);
        for (int64_t i = 0; i < n; ++i) {
            const int64_t r = r0 + i;
            RowMetrics m;
            int64_t col = 0;
            int side = 0;
            Status st = score_row(xp + i * V, yp + i * V, V, sw.tokens[size_t(r + 1)], mode, o.want_js, &m, &col, &side,
                                  FastIsa::automatic, o.torch_lanes);
            if (!st.is_ok()) {
                const float* row = (side ? yp : xp) + i * V;
                const float bad = row[col];
                return err(code_of(st), std::string(side ? "candidate " + cand.label() : "reference " + ref.label()) +
                                        ": window " + std::to_string(sw.index) + " row " + std::to_string(r) +
                                        " column " + std::to_string(col) + ": " +
                                        (st.message().empty() ? (std::isnan(bad) ? "NaN" : "+inf") : st.message()));
            }
            w->kl[size_t(r)] = m.kl;
            w->js[size_t(r)] = m.js;
            w->nll_ref[size_t(r)] = m.nll_ref;
            w->nll_cand[size_t(r)] = m.nll_cand;
            w->dp[size_t(r)] = m.dp;
            w->ae_mean[size_t(r)] = m.abs_err_mean;
            w->ae_max = std::max(w->ae_max, m.abs_err_max);
            w->top1[size_t(r)] = m.top1;
            w->top1_tie[size_t(r)] = m.top1_tie_aware;
            w->ref_tied[size_t(r)] = m.ref_tied;
            hash_row_pair(*rs, xp + i * V, *cs, yp + i * V, V * 4);  // while the rows are in cache
        }
        rs->consume(n);
        cs->consume(n);
        r0 += n;
        if (prog->active()) {
            prog->add_rows(n);
            prog->add_bytes(uint64_t(n) * (rs->bytes_per_row() + cs->bytes_per_row()));
        }
    }
    SLUICE_TRY(rs->finish());
    SLUICE_TRY(cs->finish());
    prog->window_done();
    return {};
}

json stats5(const Summary& s) {
    return json{{"mean", s.mean}, {"median", s.median}, {"p95", s.p95}, {"p99", s.p99}, {"max", s.max}};
}
json stats_full(const Summary& s) {
    return json{{"mean", s.mean}, {"median", s.median}, {"p90", s.p90}, {"p95", s.p95}, {"p99", s.p99},
                {"p99_9", s.p99_9}, {"max", s.max}, {"min", s.min}};
}
json boot_json(const Bootstrap& b) {
    return json{{"estimate", b.estimate}, {"standard_error", b.standard_error}, {"ci95_low", b.ci95_low},
                {"ci95_high", b.ci95_high}, {"bootstrap_samples", b.samples}, {"cluster_unit", b.unit}};
}
double mean_u8(const std::vector<uint8_t>& v) {
    int64_t c = 0;
    for (auto x : v) c += x;
    return v.empty() ? 0 : double(c) / double(v.size());
}
double fsum(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s;
}

// Statistic view of the per-token KL/JS (§7.4 clamping): values in [-tau, 0)
// become 0 and are counted; more negative values are kept and warned about.
std::vector<double> clamp_view(WindowResult& w, const std::vector<double>& v, double tau, bool count) {
    std::vector<double> o(v);
    for (size_t r = 0; r < o.size(); ++r) {
        if (o[r] < 0 && o[r] >= -tau) {
            o[r] = 0;
            if (count) ++w.clamped;
        } else if (o[r] < -tau && count) {
            w.warnings.push_back("window " + std::to_string(w.window_index) + " row " + std::to_string(r) +
                                 ": KL " + std::to_string(o[r]) + " below -tolerance");
        }
    }
    return o;
}

}  // namespace

json strip_timing(json r) {
    if (r.contains("sluice") && r["sluice"].is_object()) r["sluice"].erase("timing");
    return r;
}

Status run_compare(const Suite& s, Operand& ref, Operand& cand, const CompareOptions& opt, CompareResult* out) {
    const auto t0 = std::chrono::steady_clock::now();
    CompareOptions o = opt;
    // Without AVX2, AVX-512 or NEON the fast path would run its scalar
    // definition (software fmaf on x86: ~0.06 GB/s/core, slower than fp64's
    // ~0.2), so fp64 it is.
    const bool no_simd = !fast_isa_available(FastIsa::avx2) && !fast_isa_available(FastIsa::avx512) &&
                         !fast_isa_available(FastIsa::neon);
    if (o.precision == Precision::fast && no_simd) o.precision = Precision::fp64;
    if (o.compat == Compat::festr2_v0 && !torchf32::lanes_supported(o.torch_lanes))
        return err(Code::usage, "--torch-lanes: 8 (torch AVX2) or 16 (torch AVX-512), not " + std::to_string(o.torch_lanes));
    std::vector<int> pos;
    SLUICE_TRY(select_windows(s, o.sel, &pos));
    const int64_t V = ref.vocab();
    if (cand.vocab() != V)
        return err(Code::identity, "vocab mismatch: reference " + ref.label() + " has V = " + std::to_string(V) +
                                       ", candidate " + cand.label() + " has V = " + std::to_string(cand.vocab()));
    SLUICE_TRY(check_suite_vocab(s, V));
    SLUICE_TRY(ref.check_suite(s, pos));
    SLUICE_TRY(cand.check_suite(s, pos));
    if (o.bootstrap_samples < 2) return err(Code::usage, "--bootstrap-samples must be > 1");
    int threads = std::max(1, o.threads);
    if (!ref.concurrent() || !cand.concurrent()) threads = 1;
    threads = std::min<int>(threads, int(pos.size()));
    const int64_t R = s.context_length - 1;
    // §7.8 plan: per worker, row blocks of both operands (and a widening
    // scratch) plus each operand stream's read-ahead ring; per-token vectors.
    const int64_t rows = int64_t(threads) * 2 * std::max(1, o.rows_per_block) * V * 4 * 2;
    const int64_t ahead = int64_t(threads) * int64_t(ref.stream_buffer_bytes() + cand.stream_buffer_bytes());
    const int64_t plan = rows + ahead + int64_t(pos.size()) * R * 64;
    if (plan > o.max_ram)
        return err(Code::resource, "RAM plan " + std::to_string(plan) + " bytes (row blocks " + std::to_string(rows) +
                                       ", read-ahead " + std::to_string(ahead) + ") exceeds --max-ram " +
                                       std::to_string(o.max_ram));

    std::vector<WindowResult> res(pos.size());
    std::vector<Status> errs(pos.size());
    std::optional<ProgressTicker> own;  // unless the caller's ticker spans this pass
    ProgressTicker* prog = o.shared_progress;
    if (!prog)
        prog = &own.emplace(o.progress, "compare", "read", int64_t(pos.size()), int64_t(pos.size()) * R,
                            o.progress_interval_s);
    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};
    auto worker = [&]() {
        for (;;) {
            size_t i = next.fetch_add(1);
            if (i >= pos.size() || stop.load()) return;
            errs[i] = score_window(s, ref, cand, pos[i], o, V, &res[i], prog);
            // An integrity (hash) failure is reported after the pass; anything else stops the run.
            if (!errs[i].is_ok() && code_of(errs[i]) != Code::identity) stop = true;
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
    if (own) own->stop(std::all_of(errs.begin(), errs.end(), [](const Status& e) { return e.is_ok(); }));
    Status hash_err;
    for (size_t i = 0; i < pos.size(); ++i) {  // lowest window first: deterministic error choice
        if (errs[i].is_ok()) continue;
        if (code_of(errs[i]) == Code::identity && errs[i].message().find("sha256") != std::string::npos) {
            if (hash_err.is_ok()) hash_err = errs[i];
            continue;
        }
        return errs[i];
    }

    const bool compat = o.compat == Compat::festr2_v0;
    // §7.4 clamp tolerance: the fast path's fp32 exp shifts a row's KL by
    // up to ~1e-7, so an exact 0 can come out slightly negative.
    const bool fast = o.precision == Precision::fast;
    const double tau = fast ? 1e-6 : 1e-12;
    json per_window = json::array(), sl_per_window = json::array();
    std::vector<double> all_kl, all_js, all_klraw, wmeans, wsums, wcounts, js_sums, t1_sums, dnll_sums;
    std::map<std::string, std::vector<size_t>> by_domain;
    int64_t inf_tokens = 0, clamped = 0, tied = 0, t1 = 0, t1t = 0, P = 0;
    std::vector<std::string> inf_named, warns;
    double nll_r = 0, nll_c = 0, dps = 0, dp2 = 0, aes = 0, aemax = 0;
    for (size_t i = 0; i < res.size(); ++i) {
        WindowResult& w = res[i];
        by_domain[w.domain].push_back(i);
        std::vector<double> kl = compat ? w.kl : clamp_view(w, w.kl, tau, true);
        std::vector<double> js = compat ? w.js : clamp_view(w, w.js, tau, false);
        if (!compat)
            for (size_t r = 0; r < kl.size(); ++r)
                if (std::isinf(kl[r])) {
                    ++inf_tokens;
                    if (inf_named.size() < 20) inf_named.push_back("window " + std::to_string(w.window_index) + " row " + std::to_string(r));
                }
        std::vector<double> klf;  // the statistic vector (finite-only drops +inf tokens)
        if (o.finite_only) {
            for (double v : kl)
                if (!std::isinf(v)) klf.push_back(v);
        } else {
            klf = kl;
        }
        Summary ks = summarize(klf), jss = summarize(js);
        const double top1 = mean_u8(w.top1);
        wmeans.push_back(ks.mean);
        wsums.push_back(fsum(klf));
        wcounts.push_back(double(klf.size()));
        js_sums.push_back(fsum(js));
        double t1s = 0, dn = 0;
        for (size_t r = 0; r < w.top1.size(); ++r) {
            t1s += w.top1[r];
            dn += w.nll_cand[r] - w.nll_ref[r];
        }
        t1_sums.push_back(t1s);
        dnll_sums.push_back(dn);
        all_kl.insert(all_kl.end(), klf.begin(), klf.end());
        all_js.insert(all_js.end(), js.begin(), js.end());
        per_window.push_back(json{{"window_index", w.window_index}, {"domain", w.domain}, {"positions", int64_t(w.kl.size())},
                                  {"kl_reference_to_candidate", stats5(ks)}, {"js", stats5(jss)}, {"top1_agreement", top1}});
        double wdp = 0, wdp2 = 0;
        for (size_t r = 0; r < w.kl.size(); ++r) {
            nll_r += w.nll_ref[r];
            nll_c += w.nll_cand[r];
            dps += w.dp[r];
            dp2 += w.dp[r] * w.dp[r];
            wdp += w.dp[r];
            wdp2 += w.dp[r] * w.dp[r];
            aes += w.ae_mean[r];
            t1 += w.top1[r];
            t1t += w.top1_tie[r];
            tied += w.ref_tied[r];
        }
        aemax = std::max(aemax, w.ae_max);
        clamped += w.clamped;
        for (auto& m : w.warnings) warns.push_back(m);
        P += int64_t(w.kl.size());
        const double n = double(w.kl.size());
        sl_per_window.push_back(json{{"window_index", w.window_index}, {"domain", w.domain}, {"kl", stats_full(ks)},
                                     {"js", stats_full(jss)}, {"top1", top1}, {"top1_tie_aware", mean_u8(w.top1_tie)},
                                     {"nll_ref", fsum(w.nll_ref) / n}, {"nll_cand", fsum(w.nll_cand) / n},
                                     {"dp_mean", wdp / n}, {"dp_rms", std::sqrt(wdp2 / n)},
                                     {"logit_abs_err_mean", fsum(w.ae_mean) / n}, {"logit_abs_err_max", w.ae_max},
                                     {"clamped", w.clamped}});
    }
    const Summary gk = summarize(all_kl), gj = summarize(all_js);
    const int B = o.bootstrap_samples;
    json rc;
    rc["direction"] = "KL(reference || candidate)";
    rc["reference_dir"] = ref.label();
    rc["candidate_dir"] = cand.label();
    rc["positions"] = P;
    rc["windows"] = int64_t(res.size());
    rc["window_range"] = {pos.front(), pos.back() + 1};
    rc["kl_reference_to_candidate"] = stats5(gk);
    rc["js"] = stats5(gj);
    rc["top1_agreement"] = double(t1) / double(P);
    rc["per_window"] = per_window;
    Bootstrap kb = compat ? bootstrap_window_means(wmeans, B, o.seed) : bootstrap_ratio(wsums, wcounts, B, o.seed);
    rc["kl_window_cluster_bootstrap"] = boot_json(kb);
    json domains = json::object(), sl_domains = json::object();
    double macro = 0;
    for (auto& [d, idx] : by_domain) {  // std::map: sorted domain order, fresh generator each (festr2)
        std::vector<double> m, su, co;
        double js_s = 0, t1_s = 0, t1t_s = 0;
        for (size_t i : idx) {
            m.push_back(wmeans[i]);
            su.push_back(wsums[i]);
            co.push_back(wcounts[i]);
            js_s += js_sums[i];
            t1_s += t1_sums[i];
            t1t_s += mean_u8(res[i].top1_tie) * double(res[i].top1_tie.size());
        }
        Bootstrap db = compat ? bootstrap_window_means(m, B, o.seed) : bootstrap_ratio(su, co, B, o.seed);
        domains[d] = boot_json(db);
        const double ntok = fsum(co);
        const double wmean = np_mean(m);
        macro += wmean;
        sl_domains[d] = json{{"windows", int64_t(idx.size())}, {"positions", ntok}, {"kl_token_mean", fsum(su) / ntok},
                             {"kl_window_mean", wmean}, {"js_token_mean", js_s / ntok}, {"top1", t1_s / ntok},
                             {"top1_tie_aware", t1t_s / ntok}};
    }
    rc["domains"] = domains;

    json sl;
    sl["compat"] = compat ? "festr2-v0" : "none";
    sl["numerics"] = compat ? "torch float32 CPU arithmetic (festr2 v0): log_softmax, exp, logaddexp and sum(-1) in "
                              "torch's order, no clamping"
                     : fast ? "fast: fp32 exp/log1p, fp64 sums in 16 fixed lanes, clamp [-1e-6, 0) to 0"
                            : "fp64, fixed 8-lane blocked sums, clamp [-1e-12, 0) to 0";
    sl["precision"] = compat ? "festr2-v0" : fast ? "fast" : "fp64";
    if (compat) sl["torch_lanes"] = o.torch_lanes;  // 8: torch AVX2 capability, 16: AVX-512
    // The ISA changes speed only: scalar, AVX2 and AVX-512 rows are bit-identical.
    if (fast && !compat) sl["kernel"] = fast_isa_name(fast_isa());
    if (opt.precision == Precision::fast && !fast && !compat)
        sl["precision_note"] = "fast path needs AVX2 or AVX-512; fp64 used";
    sl["rng"] = "numpy-pcg64-seedsequence";
    sl["seed"] = o.seed;
    sl["determinism"] = "receipt is bit-identical for any thread count (one worker per window, sequential global reduction)";
    sl["suite"] = json{{"path", s.manifest_path}, {"suite_token_hash_sha256", s.suite_hash}, {"manifest_sha256", s.manifest_sha256}};
    sl["reference"] = ref.identity();
    sl["candidate"] = cand.identity();
    sl["kl"] = stats_full(gk);
    sl["js"] = stats_full(gj);
    sl["js_bits_mean"] = gj.mean / std::log(2.0);
    sl["top1"] = double(t1) / double(P);
    sl["top1_tie_aware"] = double(t1t) / double(P);
    sl["ref_tied_rows"] = tied;
    sl["nll_ref_mean"] = nll_r / double(P);
    sl["nll_cand_mean"] = nll_c / double(P);
    sl["ppl_ref"] = std::exp(nll_r / double(P));
    sl["ppl_cand"] = std::exp(nll_c / double(P));
    sl["dp_mean"] = dps / double(P);
    sl["dp_rms"] = std::sqrt(dp2 / double(P));
    sl["logit_abs_err_mean"] = aes / double(P);
    sl["logit_abs_err_max"] = aemax;
    sl["clamped"] = clamped;
    sl["numerical_warnings"] = warns;
    sl["inf_kl_tokens"] = inf_tokens;
    sl["inf_kl_named"] = inf_named;
    sl["finite_only"] = o.finite_only;
    sl["domains"] = sl_domains;
    sl["macro_domain_mean_kl"] = by_domain.empty() ? 0.0 : macro / double(by_domain.size());
    sl["js_window_cluster_bootstrap"] = boot_json(bootstrap_ratio(js_sums, wcounts, B, o.seed));
    sl["top1_window_cluster_bootstrap"] = boot_json(bootstrap_ratio(t1_sums, wcounts, B, o.seed));
    sl["nll_diff_window_cluster_bootstrap"] = boot_json(bootstrap_ratio(dnll_sums, wcounts, B, o.seed));
    sl["per_window"] = sl_per_window;
    std::vector<size_t> order(res.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return wmeans[a] > wmeans[b]; });
    json worst = json::array(), disc = json::array();
    for (size_t k = 0; k < order.size() && k < 20; ++k) worst.push_back(json{{"window_index", res[order[k]].window_index}, {"kl_mean", wmeans[order[k]]}});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t1_sums[a] / wcounts[a] < t1_sums[b] / wcounts[b]; });
    for (size_t k = 0; k < order.size() && k < 20; ++k) disc.push_back(json{{"window_index", res[order[k]].window_index}, {"top1", mean_u8(res[order[k]].top1)}});
    sl["high_kld_windows"] = worst;
    sl["top1_discordant_windows"] = disc;
    sl["integrity"] = !hash_err.is_ok()                                       ? "failed"
                      : ref.hashes_unchecked() || cand.hashes_unchecked() ? "not checked (--verify-hashes off)"
                                                                          : "verified";
    std::string text;
    char line[512];
    std::snprintf(line, sizeof line,
                  "windows %zu  positions %lld  mean KL %.9g  CI95 [%.9g, %.9g]  median %.6g  p99 %.6g  max %.6g\n"
                  "JS %.9g nats  top-1 %.4f%%  tie-aware %.4f%%  PPL ref %.6g  cand %.6g\n",
                  res.size(), (long long)P, gk.mean, kb.ci95_low, kb.ci95_high, gk.median, gk.p99, gk.max, gj.mean,
                  100.0 * double(t1) / double(P), 100.0 * double(t1t) / double(P), std::exp(nll_r / double(P)),
                  std::exp(nll_c / double(P)));
    text += line;
    if (!o.noise_receipt.empty()) {
        std::string nt;
        json nr;
        SLUICE_TRY(read_file(o.noise_receipt, &nt));
        SLUICE_TRY(parse_json(nt, o.noise_receipt, &nr));
        if (!nr.contains("noise_floor_kl")) return err(Code::format, o.noise_receipt + ": not a noise receipt");
        const double nhi = nr["noise_floor_kl"].value("ci95_high", 0.0);
        sl["noise"] = json{{"noise_floor_kl", nr["noise_floor_kl"]}, {"noise_floor_top1", nr.value("noise_floor_top1", json(nullptr))},
                           {"candidate_ci_low_exceeds_noise_ci_high", kb.ci95_low > nhi}};
        std::snprintf(line, sizeof line, "noise floor KL CI high %.6g: candidate %s the noise floor\n", nhi,
                      kb.ci95_low > nhi ? "is above" : "is NOT distinguishable from");
        text += line;
    }
    if (o.llamacpp_block) {
        std::vector<LlamaToken> lt;
        for (auto& w : res)
            for (size_t r = 0; r < w.kl.size(); ++r) {
                if (o.llamacpp_second_half && int64_t(r) < s.context_length / 2) continue;
                lt.push_back({w.nll_cand[r], w.nll_ref[r], w.kl[r], w.dp[r], w.top1[r] != 0});
            }
        const std::string blk = llamacpp_block(lt);
        sl["llamacpp_block"] = blk;
        text += blk;
        std::snprintf(line, sizeof line, "window-clustered 95%% CI: Mean KLD [%.6f, %.6f]  Same top p [%.3f, %.3f] %%\n",
                      kb.ci95_low, kb.ci95_high, 100 * json(sl["top1_window_cluster_bootstrap"])["ci95_low"].get<double>(),
                      100 * json(sl["top1_window_cluster_bootstrap"])["ci95_high"].get<double>());
        text += line;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sl["timing"] = json{{"seconds", secs}, {"threads", threads}, {"ram_plan_bytes", plan}};
    rc["sluice"] = sl;
    out->receipt = rc;
    out->text = text;
    out->warnings = ref.warnings();
    for (auto& w : cand.warnings()) out->warnings.push_back(w);
    for (auto& w : warns) out->warnings.push_back(w);
    out->integrity_failed = !hash_err.is_ok();
    if (o.keep_tokens) out->windows = std::move(res);
    if (!hash_err.is_ok()) return err(Code::identity, hash_err.message() + " (integrity: failed; receipt marked)");
    return {};
}

Status write_token_sidecar(const CompareResult& r, const std::string& path) {
    std::vector<float> kl, js, nr, nc, dp, ae;
    std::vector<uint8_t> t1, t1t;
    std::vector<int32_t> win, row;
    for (const auto& w : r.windows)
        for (size_t i = 0; i < w.kl.size(); ++i) {
            kl.push_back(float(w.kl[i]));
            js.push_back(float(w.js[i]));
            nr.push_back(float(w.nll_ref[i]));
            nc.push_back(float(w.nll_cand[i]));
            dp.push_back(float(w.dp[i]));
            ae.push_back(float(w.ae_mean[i]));
            t1.push_back(w.top1[i]);
            t1t.push_back(w.top1_tie[i]);
            win.push_back(w.window_index);
            row.push_back(int32_t(i));
        }
    const uint64_t P = kl.size();
    std::vector<TensorOut> t = {
        {"kl", "F32", {P}, kl.data()}, {"js", "F32", {P}, js.data()}, {"nll_ref", "F32", {P}, nr.data()},
        {"nll_cand", "F32", {P}, nc.data()}, {"dp", "F32", {P}, dp.data()}, {"logit_abs_err_mean", "F32", {P}, ae.data()},
        {"top1", "U8", {P}, t1.data()}, {"top1_tie_aware", "U8", {P}, t1t.data()}, {"window", "I32", {P}, win.data()},
        {"row", "I32", {P}, row.data()}};
    return from_status(write_safetensors(path, {{"format", "sluice-kld-tokens-v1"}}, t));
}

}  // namespace sluice::kld
