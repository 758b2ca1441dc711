// sluice kld report (see report.h).
#include "kld/report/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "kld/stats/compare.h"
#include "kld/report/report_fmt.h"
#include "format/safetensors.h"

namespace sluice::kld {

using namespace ::sluice::st;  // the safetensors reader and writer

namespace {

using fmt::ci_text;
using fmt::g6;
using fmt::pct;

// ---- receipts ---------------------------------------------------------------

struct Loaded {
    json r;
    ReportCandidate c;
    std::vector<int> win_index;
    std::vector<int64_t> win_pos;
    std::vector<double> win_mean;
};

std::string basename_of(std::string p) {
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    const size_t k = p.find_last_of('/');
    if (k != std::string::npos) p = p.substr(k + 1);
    if (p.size() > 6 && p.compare(p.size() - 6, 6, ".waste") == 0) p.resize(p.size() - 6);
    return p;
}

const json* path_get(const json& j, std::initializer_list<const char*> keys) {
    const json* p = &j;
    for (const char* k : keys) {
        if (!p->is_object() || !p->contains(k)) return nullptr;
        p = &(*p)[k];
    }
    return p;
}

double num_or(const json& j, std::initializer_list<const char*> keys, double d) {
    const json* p = path_get(j, keys);
    return p && p->is_number() ? p->get<double>() : d;
}

bool num_ok(const json& o, const char* k) { return o.is_object() && o.contains(k) && o[k].is_number(); }

// The festr2 §4.7 key set (sluice receipts carry it at the top level too).
Status check_receipt(const std::string& path, const json& r) {
    auto bad = [&](const std::string& what) {
        return err(Code::format, path + ": not a kld compare receipt: " + what);
    };
    if (!r.is_object()) return bad("the JSON is not an object");
    if (!r.contains("direction")) {
        if (r.contains("kind") && r["kind"].is_string())
            return bad("it is a '" + r["kind"].get<std::string>() + "' file (give the receipts written by compare --json)");
        return bad("no 'direction' key");
    }
    if (r["direction"] != "KL(reference || candidate)")
        return bad("direction is " + r["direction"].dump() + ", expected \"KL(reference || candidate)\"");
    auto need_num = [&](std::initializer_list<const char*> keys, const std::string& name) -> Status {
        const json* p = path_get(r, keys);
        if (!p) return bad("missing key '" + name + "'");
        if (!p->is_number()) return bad("'" + name + "' is not a number");
        return {};
    };
    SLUICE_TRY(need_num({"positions"}, "positions"));
    SLUICE_TRY(need_num({"kl_reference_to_candidate", "mean"}, "kl_reference_to_candidate.mean"));
    SLUICE_TRY(need_num({"kl_window_cluster_bootstrap", "ci95_low"}, "kl_window_cluster_bootstrap.ci95_low"));
    SLUICE_TRY(need_num({"kl_window_cluster_bootstrap", "ci95_high"}, "kl_window_cluster_bootstrap.ci95_high"));
    SLUICE_TRY(need_num({"top1_agreement"}, "top1_agreement"));
    if (!r.contains("domains") || !r["domains"].is_object()) return bad("missing object 'domains'");
    for (auto it = r["domains"].begin(); it != r["domains"].end(); ++it)
        if (!num_ok(it.value(), "ci95_low") || !num_ok(it.value(), "ci95_high") || !num_ok(it.value(), "estimate"))
            return bad("domains." + it.key() + " is not a bootstrap object {estimate, ci95_low, ci95_high}");
    if (!r.contains("per_window") || !r["per_window"].is_array() || r["per_window"].empty())
        return bad("missing or empty array 'per_window'");
    int64_t total = 0;
    for (size_t i = 0; i < r["per_window"].size(); ++i) {
        const json& w = r["per_window"][i];
        const std::string at = "per_window[" + std::to_string(i) + "]";
        if (!w.is_object() || !w.contains("window_index") || !w["window_index"].is_number_integer() ||
            !w.contains("positions") || !w["positions"].is_number_integer() || !path_get(w, {"kl_reference_to_candidate", "mean"}) ||
            !w["kl_reference_to_candidate"]["mean"].is_number())
            return bad(at + " lacks window_index, positions or kl_reference_to_candidate.mean");
        total += w["positions"].get<int64_t>();
    }
    if (total != r["positions"].get<int64_t>())
        return bad("per_window positions add up to " + std::to_string(total) + ", 'positions' is " +
                   r["positions"].dump());
    return {};
}

Status load_receipt(const ReportInput& in, Loaded* L) {
    std::string text;
    SLUICE_TRY(read_file(in.receipt, &text));
    SLUICE_TRY(parse_json_py(text, in.receipt, &L->r));
    SLUICE_TRY(check_receipt(in.receipt, L->r));
    SLUICE_TRY(refuse_failed_integrity(L->r, in.receipt));
    const json& r = L->r;
    ReportCandidate& c = L->c;
    c.receipt_path = in.receipt;
    c.receipt_sha256 = sha256_hex(text);
    c.tokens_path = in.tokens;
    c.candidate = r.value("candidate_dir", std::string());
    if (const json* m = path_get(r, {"sluice", "candidate", "model"}); m && m->is_string() && c.candidate.empty())
        c.candidate = m->get<std::string>();
    c.label = !in.label.empty() ? in.label : !c.candidate.empty() ? basename_of(c.candidate) : basename_of(in.receipt);
    c.mean = num_or(r, {"kl_reference_to_candidate", "mean"}, 0);
    c.median = num_or(r, {"kl_reference_to_candidate", "median"}, NAN);
    c.p99 = num_or(r, {"kl_reference_to_candidate", "p99"}, NAN);
    c.max = num_or(r, {"kl_reference_to_candidate", "max"}, NAN);
    c.ci_low = num_or(r, {"kl_window_cluster_bootstrap", "ci95_low"}, 0);
    c.ci_high = num_or(r, {"kl_window_cluster_bootstrap", "ci95_high"}, 0);
    c.se = num_or(r, {"kl_window_cluster_bootstrap", "standard_error"}, NAN);
    c.bootstrap_samples = int(num_or(r, {"kl_window_cluster_bootstrap", "bootstrap_samples"}, 0));
    c.top1 = num_or(r, {"top1_agreement"}, 0);
    c.top1_ci_low = num_or(r, {"sluice", "top1_window_cluster_bootstrap", "ci95_low"}, -1);
    c.top1_ci_high = num_or(r, {"sluice", "top1_window_cluster_bootstrap", "ci95_high"}, -1);
    c.js_mean = num_or(r, {"js", "mean"}, NAN);
    c.ppl_ref = num_or(r, {"sluice", "ppl_ref"}, -1);
    c.ppl_cand = num_or(r, {"sluice", "ppl_cand"}, -1);
    c.positions = r["positions"].get<int64_t>();
    c.windows = int64_t(r["per_window"].size());
    std::map<std::string, std::pair<double, double>> dtop1;  // domain -> (matches, positions)
    std::map<std::string, int64_t> dwin;
    for (const json& w : r["per_window"]) {
        L->win_index.push_back(w["window_index"].get<int>());
        L->win_pos.push_back(w["positions"].get<int64_t>());
        L->win_mean.push_back(w["kl_reference_to_candidate"]["mean"].get<double>());
        const std::string d = w.value("domain", std::string());
        dwin[d]++;
        if (w.contains("top1_agreement") && w["top1_agreement"].is_number()) {
            dtop1[d].first += w["top1_agreement"].get<double>() * double(L->win_pos.back());
            dtop1[d].second += double(L->win_pos.back());
        }
    }
    for (auto it = r["domains"].begin(); it != r["domains"].end(); ++it) {
        ReportDomain d;
        d.name = it.key();
        d.mean = it.value()["estimate"].get<double>();
        d.ci_low = it.value()["ci95_low"].get<double>();
        d.ci_high = it.value()["ci95_high"].get<double>();
        d.windows = dwin.count(d.name) ? dwin[d.name] : 0;
        if (dtop1.count(d.name) && dtop1[d.name].second > 0) d.top1 = dtop1[d.name].first / dtop1[d.name].second;
        c.domains.push_back(d);
    }
    return {};
}

// ---- sidecar -------------------------------------------------------------------

Status load_sidecar(const Loaded& L, const std::vector<double>& edges, ReportCandidate* c) {
    const std::string& p = c->tokens_path;
    const std::string& rp = c->receipt_path;
    StFile f;
    SLUICE_TRY(f.open(p));
    auto fmt = [&](const std::string& what) {
        return err(Code::format, p + ": not a kld compare --tokens sidecar: " + what);
    };
    auto m = f.metadata().find("format");
    if (m != f.metadata().end() && m->second != "sluice-kld-tokens-v1")
        return fmt("metadata format is '" + m->second + "', expected 'sluice-kld-tokens-v1'");
    const TensorInfo* t = f.find("kl");
    if (!t) return fmt("no tensor 'kl'");
    if (t->dt != DType::F32 || t->shape.size() != 1) return fmt("'kl' is not an F32 vector");
    const uint64_t P = t->shape[0];
    if (int64_t(P) != c->positions)
        return err(Code::identity, p + ": " + std::to_string(P) + " per-token KL values, but receipt " + rp + " has " +
                                       std::to_string(c->positions) + " positions (a sidecar of another run?)");
    std::vector<float> kl(P);
    if (P) SLUICE_TRY(f.pread_data(t->begin, kl.data(), P * 4));
    std::vector<int32_t> win;
    if (const TensorInfo* w = f.find("window")) {
        if (w->dt != DType::I32 || w->shape.size() != 1 || w->shape[0] != P) return fmt("'window' is not an I32 vector of length " + std::to_string(P));
        win.resize(P);
        if (P) SLUICE_TRY(f.pread_data(w->begin, win.data(), P * 4));
    }
    for (uint64_t i = 0; i < P; ++i)
        if (std::isnan(kl[i]) || kl[i] == -INFINITY)
            return fmt("'kl' value " + std::to_string(i) + (win.empty() ? "" : " (window " + std::to_string(win[i]) + ")") +
                       " is " + (std::isnan(kl[i]) ? "NaN" : "-inf"));
    // The sidecar must be this receipt's: same windows in the same order
    // with the same row counts, and per-window means that agree (the
    // sidecar holds float32 copies of the unclamped per-token values).
    const json* fo = path_get(L.r, {"sluice", "finite_only"});
    const bool finite_only = fo && fo->is_boolean() && fo->get<bool>();
    size_t off = 0;
    for (size_t k = 0; k < L.win_index.size(); ++k) {
        const size_t n = size_t(L.win_pos[k]);
        const std::string wname = "window " + std::to_string(L.win_index[k]);
        if (!win.empty())
            for (size_t i = off; i < off + n; ++i)
                if (win[i] != L.win_index[k])
                    return err(Code::identity, p + ": value " + std::to_string(i) + " belongs to window " +
                                                   std::to_string(win[i]) + ", receipt " + rp + " expects " + wname +
                                                   " there (a sidecar of another run?)");
        double sum = 0;
        int64_t cnt = 0;
        bool inf = false;
        for (size_t i = off; i < off + n; ++i) {
            if (std::isinf(kl[i])) {
                inf = true;
                if (finite_only) continue;
            }
            sum += double(kl[i]);
            ++cnt;
        }
        const double want = L.win_mean[k];
        const double got = cnt ? sum / double(cnt) : 0.0;
        const bool ok = std::isinf(want) ? (inf && !finite_only) : (!std::isinf(got) && std::fabs(got - want) <= 2e-6 + 1e-5 * std::fabs(want));
        if (!ok) {
            char b[200];
            std::snprintf(b, sizeof b, ": %s mean KL is %.9g in the sidecar but %.9g in receipt ", wname.c_str(), got, want);
            return err(Code::identity, p + b + rp + " (a sidecar of another run?)");
        }
        off += n;
    }
    c->hist = kl_histogram(kl.data(), kl.size(), edges);
    c->has_hist = true;
    return {};
}

// ---- text helpers ----------------------------------------------------------------

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }
std::string lpad(const std::string& s, size_t w) { return s.size() >= w ? s : std::string(w - s.size(), ' ') + s; }

}  // namespace

// ---- histogram -------------------------------------------------------------------

Status hist_edges(const HistSpec& h, std::vector<double>* edges) {
    if (!(h.lo > 0) || !(h.hi > h.lo) || std::isinf(h.hi))
        return err(Code::usage, "histogram range: need 0 < min < max (got " + g6(h.lo) + ", " + g6(h.hi) + ")");
    if (h.bins_per_decade < 1 || h.bins_per_decade > 100) return err(Code::usage, "--bins-per-decade: 1 to 100");
    const double decades = std::log10(h.hi / h.lo);
    const int n = std::max(1, int(std::lround(decades * h.bins_per_decade)));
    if (n > 2000) return err(Code::usage, "histogram: more than 2000 bins");
    edges->assign(size_t(n) + 1, 0);
    for (int k = 0; k <= n; ++k) (*edges)[size_t(k)] = h.lo * std::pow(10.0, decades * k / n);
    edges->front() = h.lo;
    edges->back() = h.hi;
    return {};
}

KlHistogram kl_histogram(const float* v, size_t n, const std::vector<double>& edges) {
    KlHistogram h;
    h.edges = edges;
    h.counts.assign(edges.size() - 1, 0);
    for (size_t i = 0; i < n; ++i) {
        const double x = double(v[i]);
        ++h.total;
        if (std::isinf(x)) {
            ++h.inf;
        } else if (x < edges.front()) {
            ++h.below;
            if (x <= 0) ++h.zeros;
        } else if (x >= edges.back()) {
            ++h.above;
        } else {  // edges[b] <= x < edges[b+1]
            const size_t b = size_t(std::upper_bound(edges.begin(), edges.end(), x) - edges.begin()) - 1;
            ++h.counts[b];
        }
    }
    return h;
}

// ---- build -------------------------------------------------------------------------

Status build_report(const std::vector<ReportInput>& in, const ReportOptions& opt, Report* out) {
    if (in.empty()) return err(Code::usage, "report needs at least one receipt");
    Report rep;
    if (!opt.title.empty()) rep.title = opt.title;
    rep.hist = opt.hist;
    std::vector<double> edges;
    SLUICE_TRY(hist_edges(opt.hist, &edges));
    std::vector<Loaded> L(in.size());
    for (size_t i = 0; i < in.size(); ++i) SLUICE_TRY(load_receipt(in[i], &L[i]));
    // One experiment: the same compat mode, suite, reference and windows.
    const json& r0 = L[0].r;
    auto sl = [](const json& r, const char* k) -> json {
        const json* p = path_get(r, {"sluice", k});
        return p ? *p : json(nullptr);
    };
    auto ref_id = [&](const json& r) -> std::string {
        const json id = sl(r, "reference");
        if (id.is_null()) return "";
        return id.is_object() && id.contains("manifest_sha256") ? id["manifest_sha256"].dump() : id.dump();
    };
    const std::string f0 = in[0].receipt;
    bool unchecked_ref = ref_id(r0).empty();
    for (size_t i = 1; i < L.size(); ++i) {
        const json& r = L[i].r;
        const std::string fi = in[i].receipt;
        const json c0 = sl(r0, "compat"), ci = sl(r, "compat");
        if (c0 != ci)
            return err(Code::identity, fi + ": compat mode " + (ci.is_null() ? std::string("festr2 (no sluice block)") : ci.dump()) +
                                           " differs from " + f0 + "'s " +
                                           (c0.is_null() ? std::string("festr2 (no sluice block)") : c0.dump()));
        const json* h0 = path_get(r0, {"sluice", "suite", "suite_token_hash_sha256"});
        const json* hi = path_get(r, {"sluice", "suite", "suite_token_hash_sha256"});
        if (h0 && hi && *h0 != *hi)
            return err(Code::identity, fi + ": suite hash " + hi->get<std::string>() + " differs from " + f0 + "'s " +
                                           h0->get<std::string>() + " (receipts of different suites cannot be ranked)");
        const std::string a = ref_id(r0), b = ref_id(r);
        if (a.empty() || b.empty()) unchecked_ref = true;
        else if (a != b)
            return err(Code::identity, fi + ": reference " + r.value("reference_dir", std::string("?")) +
                                           " is not the reference of " + f0 + " (" + r0.value("reference_dir", std::string("?")) +
                                           "): different reference identity");
        if (L[i].win_index != L[0].win_index || L[i].win_pos != L[0].win_pos)
            return err(Code::identity, fi + ": window set (" + std::to_string(L[i].win_index.size()) + " windows, " +
                                           std::to_string(L[i].c.positions) + " positions) differs from " + f0 + "'s (" +
                                           std::to_string(L[0].win_index.size()) + " windows, " +
                                           std::to_string(L[0].c.positions) + " positions)");
    }
    if (unchecked_ref && L.size() > 1)
        rep.warnings.push_back("a receipt records no reference identity (festr2 receipt?): that all candidates were "
                               "compared against one reference is assumed, not checked");
    if (opt.hist.auto_range) {
        // A first pass over 1e-30..1e30 finds the decades the data uses.
        HistSpec wide{1e-30, 1e30, 1, false};
        std::vector<double> we;
        SLUICE_TRY(hist_edges(wide, &we));
        int first = -1, last = -1;
        for (size_t i = 0; i < L.size(); ++i) {
            if (L[i].c.tokens_path.empty()) continue;
            ReportCandidate c = L[i].c;
            SLUICE_TRY(load_sidecar(L[i], we, &c));
            for (int b = 0; b < int(c.hist.counts.size()); ++b)
                if (c.hist.counts[size_t(b)]) {
                    if (first < 0 || b < first) first = b;
                    if (b > last) last = b;
                }
        }
        if (first >= 0) {
            rep.hist.lo = we[size_t(first)];
            rep.hist.hi = we[size_t(last) + 1];
            SLUICE_TRY(hist_edges(rep.hist, &edges));
        }
    }
    for (size_t i = 0; i < L.size(); ++i)
        if (!L[i].c.tokens_path.empty()) SLUICE_TRY(load_sidecar(L[i], edges, &L[i].c));
    // Labels must tell candidates apart.
    std::map<std::string, int> seen;
    for (auto& l : L) seen[l.c.label]++;
    for (auto& l : L)
        if (seen[l.c.label] > 1) l.c.label += " (" + basename_of(l.c.receipt_path) + ")";
    std::map<std::string, int> again;  // the same receipt twice: number them
    for (auto& l : L)
        if (int k = again[l.c.label]++; k > 0) l.c.label += " #" + std::to_string(k + 1);
    rep.direction = r0.value("direction", "");
    const json c0 = sl(r0, "compat");
    rep.compat = c0.is_string() ? c0.get<std::string>() : "festr2 receipt";
    if (const json* h = path_get(r0, {"sluice", "suite", "suite_token_hash_sha256"}); h && h->is_string())
        rep.suite_hash = h->get<std::string>();
    rep.reference = r0.value("reference_dir", std::string());
    std::set<std::string> doms;
    for (auto& l : L)
        for (auto& d : l.c.domains) doms.insert(d.name);
    rep.domains.assign(doms.begin(), doms.end());

    std::vector<size_t> order(L.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto key = [&](size_t i) { return std::isnan(L[i].c.mean) ? INFINITY : L[i].c.mean; };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
    for (size_t k = 0; k < order.size(); ++k) {
        ReportCandidate c = L[order[k]].c;
        if (k + 1 < order.size()) {  // paired window bootstrap against the next one
            const Loaded& nb = L[order[k + 1]];
            PairedOptions po;
            po.cmp.bootstrap_samples = std::max(2, std::min(c.bootstrap_samples > 1 ? c.bootstrap_samples : 10000,
                                                            nb.c.bootstrap_samples > 1 ? nb.c.bootstrap_samples : 10000));
            po.cmp.seed = uint64_t(num_or(r0, {"sluice", "seed"}, 1));
            json pr;
            std::string pt;
            if (std::isfinite(c.mean) && std::isfinite(nb.c.mean) &&
                run_paired_receipts(L[order[k]].r, nb.r, po, &pr, &pt).is_ok()) {
                c.has_next = true;
                c.next_delta = pr["kl_difference"]["bootstrap"]["estimate"].get<double>();
                c.next_ci_low = pr["kl_difference"]["bootstrap"]["ci95_low"].get<double>();
                c.next_ci_high = pr["kl_difference"]["bootstrap"]["ci95_high"].get<double>();
                const std::string v = pr["verdict"]["verdict"].get<std::string>();
                c.next_verdict = v == "A better" ? "lower" : v == "B better" ? "higher" : "indistinguishable";
            }
        }
        rep.ranked.push_back(std::move(c));
    }
    for (const auto& c : rep.ranked)
        if (c.tokens_path.empty())
            rep.warnings.push_back(c.label + ": no per-token sidecar (compare --tokens); its KL distribution is not drawn");
    *out = std::move(rep);
    return {};
}

// ---- text ----------------------------------------------------------------------------

std::string report_text(const Report& r) {
    std::string o;
    const ReportCandidate& f = r.ranked.front();
    o += "ranking by mean KL(reference || candidate), " + std::to_string(r.ranked.size()) + " candidates, " +
         std::to_string(f.windows) + " windows, " + std::to_string(f.positions) + " positions";
    if (!r.suite_hash.empty()) o += ", suite " + r.suite_hash.substr(0, 12);
    o += "\n";
    if (!r.reference.empty()) o += "reference: " + r.reference + "\n";
    size_t lw = 9;
    for (const auto& c : r.ranked) lw = std::max(lw, c.label.size());
    std::vector<std::string> cis;
    size_t cw = 26;
    for (const auto& c : r.ranked) {
        cis.push_back(ci_text(c.ci_low, c.ci_high));
        cw = std::max(cw, cis.back().size());
    }
    o += "rank  " + pad("candidate", lw) + "  " + lpad("mean KL", 12) + "  " + pad("95% CI (window bootstrap)", cw) + "  " +
         lpad("top-1", 8) + "  " + lpad("JS", 11) + "  vs next (paired delta, 95% CI)\n";
    for (size_t i = 0; i < r.ranked.size(); ++i) {
        const ReportCandidate& c = r.ranked[i];
        std::string nx = "-";
        if (c.has_next)
            nx = g6(c.next_delta, 4) + " " + ci_text(c.next_ci_low, c.next_ci_high) + " " + c.next_verdict;
        else if (i + 1 < r.ranked.size())
            nx = "n/a";
        o += lpad(std::to_string(i + 1), 4) + "  " + pad(c.label, lw) + "  " + lpad(g6(c.mean), 12) + "  " + pad(cis[i], cw) +
             "  " + lpad(pct(c.top1), 8) + "  " + lpad(g6(c.js_mean, 5), 11) + "  " + nx + "\n";
    }
    if (!r.domains.empty()) {
        o += "per-domain mean KL [95% CI]:\n";
        std::vector<std::vector<std::string>> cells(r.ranked.size());
        std::vector<size_t> w(r.domains.size());
        for (size_t d = 0; d < r.domains.size(); ++d) w[d] = r.domains[d].size();
        for (size_t i = 0; i < r.ranked.size(); ++i)
            for (size_t d = 0; d < r.domains.size(); ++d) {
                std::string s = "-";
                for (const auto& dm : r.ranked[i].domains)
                    if (dm.name == r.domains[d]) s = g6(dm.mean, 5) + " " + ci_text(dm.ci_low, dm.ci_high);
                cells[i].push_back(s);
                w[d] = std::max(w[d], s.size());
            }
        o += "      " + pad("candidate", lw);
        for (size_t d = 0; d < r.domains.size(); ++d)
            o += "  " + (d + 1 < r.domains.size() ? pad(r.domains[d], w[d]) : r.domains[d]);
        o += "\n";
        for (size_t i = 0; i < r.ranked.size(); ++i) {
            o += "      " + pad(r.ranked[i].label, lw);
            for (size_t d = 0; d < r.domains.size(); ++d)
                o += "  " + (d + 1 < r.domains.size() ? pad(cells[i][d], w[d]) : cells[i][d]);
            o += "\n";
        }
    }
    for (const auto& w : r.warnings) o += "note: " + w + "\n";
    return o;
}

json report_json(const Report& r) {
    json j;
    j["kind"] = "sluice kld report";
    j["direction"] = r.direction;
    j["compat"] = r.compat;
    j["suite_token_hash_sha256"] = r.suite_hash;
    j["reference"] = r.reference;
    j["warnings"] = r.warnings;
    j["histogram_bins"] = json{{"min", r.hist.lo}, {"max", r.hist.hi}, {"bins_per_decade", r.hist.bins_per_decade}};
    json arr = json::array();
    for (size_t i = 0; i < r.ranked.size(); ++i) {
        const auto& c = r.ranked[i];
        json x;
        x["rank"] = i + 1;
        x["label"] = c.label;
        x["candidate"] = c.candidate;
        x["receipt"] = c.receipt_path;
        x["receipt_sha256"] = c.receipt_sha256;
        x["tokens"] = c.tokens_path.empty() ? json(nullptr) : json(c.tokens_path);
        x["kl_mean"] = c.mean;
        x["kl_ci95_low"] = c.ci_low;
        x["kl_ci95_high"] = c.ci_high;
        x["top1_agreement"] = c.top1;
        x["windows"] = c.windows;
        x["positions"] = c.positions;
        json d = json::object();
        for (const auto& dm : c.domains)
            d[dm.name] = json{{"mean", dm.mean}, {"ci95_low", dm.ci_low}, {"ci95_high", dm.ci_high}, {"windows", dm.windows}};
        x["domains"] = d;
        if (c.has_next)
            x["vs_next"] = json{{"delta", c.next_delta}, {"ci95_low", c.next_ci_low}, {"ci95_high", c.next_ci_high},
                                {"verdict", c.next_verdict}};
        if (c.has_hist)
            x["histogram"] = json{{"edges", c.hist.edges}, {"counts", c.hist.counts}, {"below", c.hist.below},
                                  {"zeros", c.hist.zeros}, {"above", c.hist.above}, {"inf", c.hist.inf},
                                  {"total", c.hist.total}};
        arr.push_back(x);
    }
    j["ranking"] = arr;
    return j;
}

}  // namespace sluice::kld
