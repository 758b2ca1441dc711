// sluice kld paired (§7.6) and noise (§7.7).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kld/stats/compare.h"

namespace sluice::kld {

namespace {

struct Sides {
    std::vector<double> sa, sb, n, js_a, js_b, t1_a, t1_b, nll_a, nll_b;
    std::vector<int> index;
    std::vector<std::string> domain;
    int64_t tok_a_better = 0, tok_total = 0;
};

double sum(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s;
}

// A v0 reference without sluice's capture tag came from the vLLM hook.
bool vllm_captured(const json& id) {
    if (id.value("kind", "") != "v0-dir") return false;
    const json& rt = id.contains("runtime") ? id["runtime"] : json();
    return !(rt.is_object() && rt.value("capture_tool", "") == "sluice kld capture");
}

json verdict_block(const Bootstrap& b, double noise_diff, const std::string& noise_source, std::string* line) {
    std::string v;
    if (b.ci95_high < -noise_diff) v = "A better";
    else if (b.ci95_low > noise_diff) v = "B better";
    else v = "indistinguishable at this suite size";
    char buf[256];
    std::snprintf(buf, sizeof buf, "verdict: %s (CI [%.6g, %.6g] against noise_diff %.6g from %s)\n", v.c_str(), b.ci95_low,
                  b.ci95_high, noise_diff, noise_source.c_str());
    *line = buf;
    return json{{"verdict", v}, {"noise_diff", noise_diff}, {"noise_diff_source", noise_source}};
}

Status resolve_noise(const PairedOptions& o, const json& ref_id, double* nd, std::string* src) {
    if (o.noise_diff >= 0) {
        *nd = o.noise_diff;
        *src = "--noise-diff";
    } else if (!o.cmp.noise_receipt.empty()) {
        std::string t;
        json r;
        SLUICE_TRY(read_file(o.cmp.noise_receipt, &t));
        SLUICE_TRY(parse_json(t, o.cmp.noise_receipt, &r));
        if (!r.contains("noise_diff") || !r["noise_diff"].is_number())
            return err(Code::format, o.cmp.noise_receipt + ": no numeric noise_diff");
        *nd = r["noise_diff"].get<double>();
        *src = "noise receipt " + o.cmp.noise_receipt;
    } else if (vllm_captured(ref_id)) {
        *nd = kVllmNoiseDiff;
        *src = "default for vLLM-captured references (publisher's repeat-noise rule)";
    } else {
        *nd = 0;
        *src = "none (deterministic sluice reference)";
    }
    return {};
}

json paired_json(const Sides& d, const PairedOptions& o, double p_below, const Bootstrap& b) {
    std::vector<double> dw;
    int64_t wa = 0, wb = 0, ties = 0;
    for (size_t i = 0; i < d.sa.size(); ++i) {
        dw.push_back((d.sa[i] - d.sb[i]) / d.n[i]);
        if (dw.back() < -o.tie_tolerance) ++wa;
        else if (dw.back() > o.tie_tolerance) ++wb;
        else ++ties;
    }
    const double N = sum(d.n);
    json per = json::array();
    for (size_t i = 0; i < dw.size(); ++i)
        per.push_back(json{{"window_index", d.index[i]}, {"domain", d.domain[i]}, {"kl_a", d.sa[i] / d.n[i]},
                           {"kl_b", d.sb[i] / d.n[i]}, {"difference", dw[i]}});
    json j;
    j["kl_difference"] = json{{"mean", (sum(d.sa) - sum(d.sb)) / N}, {"median_window_difference", np_median(dw)},
                              {"bootstrap", json{{"estimate", b.estimate}, {"standard_error", b.standard_error},
                                                 {"ci95_low", b.ci95_low}, {"ci95_high", b.ci95_high},
                                                 {"bootstrap_samples", b.samples}, {"cluster_unit", "window"},
                                                 {"p_delta_below_zero", p_below}}}};
    j["win_count"] = json{{"a", wa}, {"b", wb}, {"ties", ties}, {"tie_tolerance", o.tie_tolerance}};
    if (d.tok_total) j["token_fraction_a_lower"] = double(d.tok_a_better) / double(d.tok_total);
    if (!d.js_a.empty()) {
        j["js_difference"] = (sum(d.js_a) - sum(d.js_b)) / N;
        j["top1_difference"] = (sum(d.t1_a) - sum(d.t1_b)) / N;
        j["nll_difference"] = (sum(d.nll_a) - sum(d.nll_b)) / N;
    }
    j["per_window"] = per;
    return j;
}

}  // namespace

Status run_paired(const Suite& s, Operand& ref, Operand& a, Operand& b, const PairedOptions& o, json* receipt,
                  std::string* text) {
    // One display for both passes (reference vs A, then vs B): 2 x windows.
    // A bad selection is left for run_compare to report.
    std::vector<int> pos;
    if (!select_windows(s, o.cmp.sel, &pos).is_ok()) pos.clear();
    const int64_t W = int64_t(pos.size()), R = s.context_length - 1;
    ProgressTicker prog(o.cmp.progress, "paired", "read", 2 * W, 2 * W * R, o.cmp.progress_interval_s);
    CompareOptions co = o.cmp;
    co.shared_progress = &prog;
    CompareResult ra, rb;
    Status st = run_compare(s, ref, a, co, &ra);
    if (st.is_ok()) st = run_compare(s, ref, b, co, &rb);
    prog.stop(st.is_ok());
    SLUICE_TRY(st);
    Sides d;
    for (size_t i = 0; i < ra.windows.size(); ++i) {
        const WindowResult &wa = ra.windows[i], &wb = rb.windows[i];
        double sa = 0, sb = 0, ja = 0, jb = 0, ta = 0, tb = 0, na = 0, nb = 0;
        for (size_t r = 0; r < wa.kl.size(); ++r) {
            sa += wa.kl[r]; sb += wb.kl[r];
            ja += wa.js[r]; jb += wb.js[r];
            ta += wa.top1[r]; tb += wb.top1[r];
            na += wa.nll_cand[r]; nb += wb.nll_cand[r];
            d.tok_a_better += wa.kl[r] < wb.kl[r];
        }
        d.tok_total += int64_t(wa.kl.size());
        d.sa.push_back(sa); d.sb.push_back(sb);
        d.js_a.push_back(ja); d.js_b.push_back(jb);
        d.t1_a.push_back(ta); d.t1_b.push_back(tb);
        d.nll_a.push_back(na); d.nll_b.push_back(nb);
        d.n.push_back(double(wa.kl.size()));
        d.index.push_back(wa.window_index);
        d.domain.push_back(wa.domain);
    }
    double pb = 0;
    Bootstrap bs = bootstrap_ratio_diff(d.sa, d.sb, d.n, o.cmp.bootstrap_samples, o.cmp.seed, &pb);
    double nd;
    std::string src, line;
    SLUICE_TRY(resolve_noise(o, ref.identity(), &nd, &src));
    json j = paired_json(d, o, pb, bs);
    j["kind"] = "sluice kld paired";
    j["direction"] = "KL(reference || A) - KL(reference || B)";
    j["reference"] = ref.identity();
    j["candidate_a"] = a.identity();
    j["candidate_b"] = b.identity();
    j["suite_token_hash_sha256"] = s.suite_hash;
    j["kl_a"] = ra.receipt["kl_reference_to_candidate"]["mean"];
    j["kl_b"] = rb.receipt["kl_reference_to_candidate"]["mean"];
    j["verdict"] = verdict_block(bs, nd, src, &line);
    char buf[256];
    std::snprintf(buf, sizeof buf, "KL A %.9g  KL B %.9g  delta %.9g  CI95 [%.9g, %.9g]  P(delta<0) %.4f\n",
                  j["kl_a"].get<double>(), j["kl_b"].get<double>(), bs.estimate, bs.ci95_low, bs.ci95_high, pb);
    *text = std::string(buf) + line;
    *receipt = j;
    return {};
}

Status run_paired_receipts(const json& ra, const json& rb, const PairedOptions& o, json* receipt, std::string* text) {
    auto field = [](const json& r, const char* k) -> json {
        return r.contains("sluice") && r["sluice"].contains(k) ? r["sluice"][k] : json(nullptr);
    };
    for (const json* r : {&ra, &rb})
        if (r->value("direction", "") != "KL(reference || candidate)" || !r->contains("per_window"))
            return err(Code::format, "paired --receipts: a receipt is not a sluice/festr2 compare report");
    const json ida = field(ra, "reference"), idb = field(rb, "reference");
    if (ida.is_null() || idb.is_null())
        return err(Code::identity, "paired --receipts: a receipt records no reference identity (festr2 receipts cannot be paired safely)");
    if (ida.value("manifest_sha256", ida.dump()) != idb.value("manifest_sha256", idb.dump()))
        return err(Code::identity, "paired --receipts: different reference identity");
    if (field(ra, "suite")["suite_token_hash_sha256"] != field(rb, "suite")["suite_token_hash_sha256"])
        return err(Code::identity, "paired --receipts: different suite");
    if (field(ra, "compat") != field(rb, "compat")) return err(Code::identity, "paired --receipts: different compat mode");
    const json &pa = ra["per_window"], &pb = rb["per_window"];
    if (pa.size() != pb.size()) return err(Code::identity, "paired --receipts: different window sets");
    Sides d;
    for (size_t i = 0; i < pa.size(); ++i) {
        if (pa[i]["window_index"] != pb[i]["window_index"] || pa[i]["positions"] != pb[i]["positions"])
            return err(Code::identity, "paired --receipts: different window sets");
        const double n = pa[i]["positions"].get<double>();
        d.sa.push_back(pa[i]["kl_reference_to_candidate"]["mean"].get<double>() * n);
        d.sb.push_back(pb[i]["kl_reference_to_candidate"]["mean"].get<double>() * n);
        d.n.push_back(n);
        d.index.push_back(pa[i]["window_index"]);
        d.domain.push_back(pa[i].value("domain", ""));
    }
    double p_below = 0;
    Bootstrap bs = bootstrap_ratio_diff(d.sa, d.sb, d.n, o.cmp.bootstrap_samples, o.cmp.seed, &p_below);
    double nd;
    std::string src, line;
    SLUICE_TRY(resolve_noise(o, ida, &nd, &src));
    json j = paired_json(d, o, p_below, bs);
    j["kind"] = "sluice kld paired (receipts)";
    j["reference"] = ida;
    j["verdict"] = verdict_block(bs, nd, src, &line);
    char buf[200];
    std::snprintf(buf, sizeof buf, "delta %.9g  CI95 [%.9g, %.9g]\n", bs.estimate, bs.ci95_low, bs.ci95_high);
    *text = std::string(buf) + line;
    *receipt = j;
    return {};
}

Status run_noise(const Suite& s, const std::vector<Operand*>& runs, Operand* reference, const CompareOptions& o,
                 json* receipt, std::string* text) {
    if (runs.size() < 2) return err(Code::usage, "kld noise needs two or more runs");
    std::vector<int> pos;
    SLUICE_TRY(select_windows(s, o.sel, &pos));
    // One display for the whole run, in windows: the raw-hash pass over every
    // run, each run against the reference (if any), then every pair.
    const int64_t W = int64_t(pos.size()), R = s.context_length - 1, n = int64_t(runs.size());
    const int64_t passes = n + (reference ? n : 0) + n * (n - 1) / 2;
    ProgressTicker prog(o.progress, "noise", "read", passes * W, passes * W * R, o.progress_interval_s);
    CompareOptions oc = o;
    oc.shared_progress = &prog;
    std::vector<std::vector<std::string>> raw(runs.size());
    for (size_t i = 0; i < runs.size(); ++i) {
        SLUICE_TRY(runs[i]->check_suite(s, pos));
        for (int p : pos) {
            std::string h;
            uint64_t nb = 0;
            SLUICE_TRY(runs[i]->raw_tensor_sha256(s, p, &h, &nb));
            raw[i].push_back(h);
            prog.add_rows(R);
            prog.add_bytes(nb);
            prog.window_done();
        }
    }
    std::vector<CompareResult> vs_ref(runs.size());
    if (reference)
        for (size_t i = 0; i < runs.size(); ++i) SLUICE_TRY(run_compare(s, *reference, *runs[i], oc, &vs_ref[i]));
    json pairs = json::array();
    double floor_mean = 0, floor_lo = 0, floor_hi = 0, floor_t1 = 1, noise_diff = 0;
    bool all_identical = true;
    std::string t;
    char buf[320];
    for (size_t i = 0; i < runs.size(); ++i)
        for (size_t k = i + 1; k < runs.size(); ++k) {
            const bool ident = !raw[i].empty() && !raw[i][0].empty() && raw[i] == raw[k];
            all_identical &= ident;
            CompareResult c;
            SLUICE_TRY(run_compare(s, *runs[i], *runs[k], oc, &c));
            const json& kb = c.receipt["kl_window_cluster_bootstrap"];
            json pj{{"run_i", runs[i]->label()}, {"run_j", runs[k]->label()}, {"bit_identical", ident},
                    {"kl_run_i_to_run_j", c.receipt["kl_reference_to_candidate"]}, {"kl_bootstrap", kb},
                    {"top1", c.receipt["top1_agreement"]}, {"js_mean", c.receipt["js"]["mean"]}};
            const double m = c.receipt["kl_reference_to_candidate"]["mean"];
            if (m >= floor_mean) {
                floor_mean = m;
                floor_lo = kb["ci95_low"];
                floor_hi = kb["ci95_high"];
            }
            floor_t1 = std::min(floor_t1, c.receipt["top1_agreement"].get<double>());
            double pair_nd = kb["ci95_high"].get<double>();  // without a reference: KL(run||run) upper bound
            if (reference) {
                std::vector<double> sa, sb, n;
                for (size_t w = 0; w < vs_ref[i].windows.size(); ++w) {
                    double a = 0, b = 0;
                    for (double x : vs_ref[i].windows[w].kl) a += x;
                    for (double x : vs_ref[k].windows[w].kl) b += x;
                    sa.push_back(a);
                    sb.push_back(b);
                    n.push_back(double(vs_ref[i].windows[w].kl.size()));
                }
                double pbz = 0;
                Bootstrap db = bootstrap_ratio_diff(sa, sb, n, o.bootstrap_samples, o.seed, &pbz);
                pj["spread_vs_reference"] = json{{"kl_ref_run_i", vs_ref[i].receipt["kl_reference_to_candidate"]["mean"]},
                                                 {"kl_ref_run_j", vs_ref[k].receipt["kl_reference_to_candidate"]["mean"]},
                                                 {"difference", db.estimate}, {"abs_difference", std::fabs(db.estimate)},
                                                 {"ci95_low", db.ci95_low}, {"ci95_high", db.ci95_high}};
                pair_nd = std::max(std::fabs(db.ci95_low), std::fabs(db.ci95_high));
            }
            noise_diff = std::max(noise_diff, pair_nd);
            std::snprintf(buf, sizeof buf, "%s vs %s: %s  KL %.9g CI95 [%.9g, %.9g]  top-1 %.4f%%\n",
                          runs[i]->label().c_str(), runs[k]->label().c_str(), ident ? "bit-identical" : "differ", m,
                          kb["ci95_low"].get<double>(), kb["ci95_high"].get<double>(),
                          100 * c.receipt["top1_agreement"].get<double>());
            t += buf;
            pairs.push_back(pj);
        }
    prog.stop(true);
    json j;
    j["kind"] = "sluice kld noise receipt";
    j["suite_token_hash_sha256"] = s.suite_hash;
    j["pairs"] = pairs;
    j["bit_identical"] = all_identical;
    j["noise_floor_kl"] = json{{"mean", floor_mean}, {"ci95_low", floor_lo}, {"ci95_high", floor_hi}};
    j["noise_floor_top1"] = floor_t1;
    j["noise_diff"] = noise_diff;
    j["noise_diff_rule"] = reference ? "max over pairs of the |CI bound| of KL(ref||run_i) - KL(ref||run_j)"
                                     : "max over pairs of the CI upper bound of KL(run_i||run_j)";
    std::snprintf(buf, sizeof buf, "noise floor KL %.9g [%.9g, %.9g]  noise_diff %.9g  %s\n", floor_mean, floor_lo,
                  floor_hi, noise_diff, all_identical ? "all runs bit-identical" : "runs differ");
    t += buf;
    *text = t;
    *receipt = j;
    return {};
}

}  // namespace sluice::kld
