// sluice kld report (see report.h).
#include "eval/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "eval/compare.h"
#include "eval/safetensors.h"

namespace sluice::kld {

namespace {

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
    KLD_TRY(need_num({"positions"}, "positions"));
    KLD_TRY(need_num({"kl_reference_to_candidate", "mean"}, "kl_reference_to_candidate.mean"));
    KLD_TRY(need_num({"kl_window_cluster_bootstrap", "ci95_low"}, "kl_window_cluster_bootstrap.ci95_low"));
    KLD_TRY(need_num({"kl_window_cluster_bootstrap", "ci95_high"}, "kl_window_cluster_bootstrap.ci95_high"));
    KLD_TRY(need_num({"top1_agreement"}, "top1_agreement"));
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
    KLD_TRY(read_file(in.receipt, &text));
    KLD_TRY(parse_json_py(text, in.receipt, &L->r));
    KLD_TRY(check_receipt(in.receipt, L->r));
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
    KLD_TRY(f.open(p));
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
    if (P) KLD_TRY(f.pread_data(t->begin, kl.data(), P * 4));
    std::vector<int32_t> win;
    if (const TensorInfo* w = f.find("window")) {
        if (w->dt != DType::I32 || w->shape.size() != 1 || w->shape[0] != P) return fmt("'window' is not an I32 vector of length " + std::to_string(P));
        win.resize(P);
        if (P) KLD_TRY(f.pread_data(w->begin, win.data(), P * 4));
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

// ---- formatting helpers --------------------------------------------------------

std::string g6(double v, int prec = 6) {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (std::isnan(v)) return "n/a";
    char b[40];
    std::snprintf(b, sizeof b, "%.*g", prec, v);
    return b;
}

std::string pct(double v, int prec = 2) {
    if (!(v >= 0)) return "n/a";
    char b[40];
    std::snprintf(b, sizeof b, "%.*f%%", prec, 100 * v);
    return b;
}

std::string ci_text(double lo, double hi) {
    std::string s = "[";
    s += g6(lo);
    s += ", ";
    s += g6(hi);
    s += "]";
    return s;
}

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }
std::string lpad(const std::string& s, size_t w) { return s.size() >= w ? s : std::string(w - s.size(), ' ') + s; }

std::string esc(const std::string& s) {
    std::string o;
    for (char c : s) {
        switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            case '\'': o += "&#39;"; break;
            default: o += c;
        }
    }
    return o;
}

std::string num(double v) {  // SVG coordinates
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", v);
    return b;
}

std::string edge_label(double e) {
    const double l = std::log10(e);
    if (std::fabs(l - std::round(l)) < 1e-9) {
        const int k = int(std::lround(l));
        if (k == 0) return "1";
        if (k == 1) return "10";
        return "1e" + std::to_string(k);
    }
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", e);
    return b;
}

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
const char* color(size_t i) { return kColors[i % (sizeof kColors / sizeof kColors[0])]; }

// A "nice" upper bound and tick step for a linear axis [0, hi].
void nice_axis(double hi, double* top, double* step) {
    if (!(hi > 0) || std::isinf(hi)) hi = 1;
    const double raw = hi / 5;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double s = mag;
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
        if (m * mag >= raw) {
            s = m * mag;
            break;
        }
    *step = s;
    *top = std::ceil(hi / s - 1e-9) * s;
}

// Horizontal dot-and-whisker rows on a shared linear axis.
struct Row {
    std::string label;
    double mean, lo, hi;
    const char* color;
    bool group_header = false;
};

std::string whisker_svg(const std::vector<Row>& rows, const std::string& title, double xmax_data) {
    const double W = 820, left = 230, right = 30, top = 34, rh = 22, bottom = 40;
    double xmax, step;
    nice_axis(xmax_data, &xmax, &step);
    const double H = top + rh * double(rows.size()) + bottom;
    const double pw = W - left - right;
    auto X = [&](double v) { return left + pw * std::clamp(v / xmax, 0.0, 1.0); };
    std::string s = "<svg class=\"chart\" width=\"" + num(W) + "\" height=\"" + num(H) + "\" viewBox=\"0 0 " + num(W) +
                    " " + num(H) + "\" role=\"img\" aria-label=\"" + esc(title) + "\">\n";
    s += "<text x=\"" + num(left) + "\" y=\"18\" class=\"ttl\">" + esc(title) + "</text>\n";
    const double y1 = top + rh * double(rows.size());
    for (int k = 0; k * step <= xmax * (1 + 1e-9); ++k) {
        const double v = k * step, x = X(v);
        s += "<line x1=\"" + num(x) + "\" y1=\"" + num(top - 4) + "\" x2=\"" + num(x) + "\" y2=\"" + num(y1) +
             "\" class=\"grid\"/>\n";
        s += "<text x=\"" + num(x) + "\" y=\"" + num(y1 + 16) + "\" class=\"tick\" text-anchor=\"middle\">" + g6(v, 4) +
             "</text>\n";
    }
    s += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(y1 + 34) +
         "\" class=\"axis\" text-anchor=\"middle\">mean KL(reference || candidate), nats; bars: window-clustered bootstrap 95% CI</text>\n";
    for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        const double y = top + rh * (double(i) + 0.5);
        if (r.group_header) {
            s += "<text x=\"8\" y=\"" + num(y + 4) + "\" class=\"grp\">" + esc(r.label) + "</text>\n";
            continue;
        }
        s += "<text x=\"" + num(left - 8) + "\" y=\"" + num(y + 4) + "\" class=\"lbl\" text-anchor=\"end\">" + esc(r.label) +
             "</text>\n";
        if (!std::isfinite(r.mean)) {
            s += "<text x=\"" + num(X(xmax) - 4) + "\" y=\"" + num(y + 4) + "\" class=\"lbl\" text-anchor=\"end\" fill=\"" +
                 r.color + "\">mean = " + g6(r.mean) + " &#8594;</text>\n";
            continue;
        }
        const double xm = X(r.mean);
        if (!std::isfinite(r.lo) || !std::isfinite(r.hi)) {  // no usable interval: the mean alone
            s += "<circle cx=\"" + num(xm) + "\" cy=\"" + num(y) + "\" r=\"4.5\" fill=\"" + r.color + "\"><title>" +
                 esc(r.label) + ": mean " + g6(r.mean) + " CI " + ci_text(r.lo, r.hi) + "</title></circle>\n";
            continue;
        }
        const double xl = X(r.lo), xh = X(r.hi);
        s += "<line x1=\"" + num(xl) + "\" y1=\"" + num(y) + "\" x2=\"" + num(xh) + "\" y2=\"" + num(y) + "\" stroke=\"" +
             r.color + "\" stroke-width=\"2\"/>\n";
        for (double xc : {xl, xh})
            s += "<line x1=\"" + num(xc) + "\" y1=\"" + num(y - 6) + "\" x2=\"" + num(xc) + "\" y2=\"" + num(y + 6) +
                 "\" stroke=\"" + r.color + "\" stroke-width=\"2\"/>\n";
        s += "<circle cx=\"" + num(xm) + "\" cy=\"" + num(y) + "\" r=\"4.5\" fill=\"" + r.color + "\"><title>" +
             esc(r.label) + ": mean " + g6(r.mean) + " CI " + ci_text(r.lo, r.hi) + "</title></circle>\n";
    }
    s += "</svg>\n";
    return s;
}

// One candidate's histogram: the under-range bin, the log-spaced bins, the
// over-range bin and the +inf bin (the range bins set off by a gap slot), as
// fractions of its tokens on a y axis shared by all candidates (ymax).
std::string hist_svg(const ReportCandidate& c, const char* col, double ymax) {
    const KlHistogram& h = c.hist;
    const double W = 820, left = 56, right = 16, top = 30, ph = 150, bottom = 58;
    const size_t nb = h.counts.size();
    const size_t slots = nb + 5;  // below, gap, bins..., gap, above, inf
    const double pw = W - left - right, bw = pw / double(slots);
    const double H = top + ph + bottom;
    const double tot = double(std::max<int64_t>(1, h.total));
    auto SX = [&](double slot) { return left + bw * slot; };
    std::string s = "<svg class=\"chart\" width=\"" + num(W) + "\" height=\"" + num(H) + "\" viewBox=\"0 0 " + num(W) +
                    " " + num(H) + "\" role=\"img\" aria-label=\"per-token KL histogram of " + esc(c.label) + "\">\n";
    s += "<text x=\"" + num(left) + "\" y=\"18\" class=\"ttl\">" + esc(c.label) + ": " + std::to_string(h.total) +
         " tokens, " + std::to_string(h.zeros) + " with KL &#8804; 0</text>\n";
    for (int k = 0; k <= 4; ++k) {
        const double f = ymax * k / 4, y = top + ph - ph * k / 4;
        s += "<line x1=\"" + num(left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(W - right) + "\" y2=\"" + num(y) +
             "\" class=\"grid\"/>\n";
        s += "<text x=\"" + num(left - 6) + "\" y=\"" + num(y + 4) + "\" class=\"tick\" text-anchor=\"end\">" +
             g6(100 * f, 3) + "%</text>\n";
    }
    auto bar = [&](double slot, int64_t n, const char* fill, const std::string& tip) {
        if (n == 0) return;
        const double hgt = std::max(1.0, ph * std::min(1.0, (double(n) / tot) / ymax));
        s += "<rect x=\"" + num(SX(slot) + 0.5) + "\" y=\"" + num(top + ph - hgt) + "\" width=\"" +
             num(std::max(1.0, bw - 1)) + "\" height=\"" + num(hgt) + "\" fill=\"" + fill + "\"><title>" + esc(tip) + ": " +
             std::to_string(n) + " tokens (" + pct(double(n) / tot) + ")</title></rect>\n";
    };
    bar(0, h.below, "#999999", "KL < " + edge_label(h.edges.front()));
    for (size_t b = 0; b < nb; ++b)
        bar(double(b + 2), h.counts[b], col, "KL in [" + edge_label(h.edges[b]) + ", " + edge_label(h.edges[b + 1]) + ")");
    bar(double(nb + 3), h.above, "#999999", "KL >= " + edge_label(h.edges.back()));
    bar(double(nb + 4), h.inf, "#000000", "KL = +inf");
    // x labels: every decade edge on the first row, the range bins below
    const double yl = top + ph + 14, yl2 = yl + 13;
    for (size_t e = 0; e <= nb; ++e) {
        const double l = std::log10(h.edges[e]);
        if (std::fabs(l - std::round(l)) > 1e-9 && e != 0 && e != nb) continue;
        const double x = SX(double(e + 2));
        s += "<line x1=\"" + num(x) + "\" y1=\"" + num(top + ph) + "\" x2=\"" + num(x) + "\" y2=\"" + num(top + ph + 4) +
             "\" class=\"axisline\"/>\n";
        s += "<text x=\"" + num(x) + "\" y=\"" + num(yl) + "\" class=\"tick\" text-anchor=\"middle\">" + edge_label(h.edges[e]) +
             "</text>\n";
    }
    s += "<text x=\"" + num(SX(0.5)) + "\" y=\"" + num(yl2) + "\" class=\"tick\" text-anchor=\"middle\">&lt;" +
         edge_label(h.edges.front()) + "</text>\n";
    s += "<text x=\"" + num(SX(double(nb) + 3.5)) + "\" y=\"" + num(yl2) + "\" class=\"tick\" text-anchor=\"middle\">&#8805;" +
         edge_label(h.edges.back()) + "</text>\n";
    s += "<text x=\"" + num(SX(double(nb) + 4.5)) + "\" y=\"" + num(yl) +
         "\" class=\"tick\" text-anchor=\"middle\">inf</text>\n";
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(top + ph) + "\" x2=\"" + num(W - right) + "\" y2=\"" + num(top + ph) +
         "\" class=\"axisline\"/>\n";
    s += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(top + ph + 48) +
         "\" class=\"axis\" text-anchor=\"middle\">per-token KL, nats (log-spaced bins; grey: outside the range); y: share of tokens</text>\n";
    s += "</svg>\n";
    return s;
}

// Cumulative share of tokens with KL below each bin edge, all candidates
// on one log-x plot (the histogram's comparison view).
std::string cdf_svg(const Report& r) {
    const double W = 820, left = 56, right = 160, top = 30, ph = 200, bottom = 44;
    const double H = top + ph + bottom, pw = W - left - right;
    const ReportCandidate* first = nullptr;
    for (const auto& c : r.ranked)
        if (c.has_hist) {
            first = &c;
            break;
        }
    if (!first) return "";
    const std::vector<double>& edges = first->hist.edges;
    const double l0 = std::log10(edges.front()), l1 = std::log10(edges.back());
    auto X = [&](double edge) { return left + pw * (std::log10(edge) - l0) / (l1 - l0); };
    auto Y = [&](double f) { return top + ph * (1 - f); };
    std::string s = "<svg class=\"chart\" width=\"" + num(W) + "\" height=\"" + num(H) + "\" viewBox=\"0 0 " + num(W) +
                    " " + num(H) + "\" role=\"img\" aria-label=\"cumulative per-token KL\">\n";
    s += "<text x=\"" + num(left) + "\" y=\"18\" class=\"ttl\">share of tokens with KL below x (all candidates)</text>\n";
    for (int k = 0; k <= 4; ++k) {
        const double y = Y(k / 4.0);
        s += "<line x1=\"" + num(left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(left + pw) + "\" y2=\"" + num(y) +
             "\" class=\"grid\"/>\n";
        s += "<text x=\"" + num(left - 6) + "\" y=\"" + num(y + 4) + "\" class=\"tick\" text-anchor=\"end\">" +
             std::to_string(25 * k) + "%</text>\n";
    }
    for (double ed : edges) {
        const double l = std::log10(ed);
        if (std::fabs(l - std::round(l)) > 1e-9) continue;
        s += "<line x1=\"" + num(X(ed)) + "\" y1=\"" + num(top) + "\" x2=\"" + num(X(ed)) + "\" y2=\"" + num(top + ph) +
             "\" class=\"grid\"/>\n";
        s += "<text x=\"" + num(X(ed)) + "\" y=\"" + num(top + ph + 14) + "\" class=\"tick\" text-anchor=\"middle\">" +
             edge_label(ed) + "</text>\n";
    }
    s += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(top + ph + 34) +
         "\" class=\"axis\" text-anchor=\"middle\">per-token KL x, nats (log scale)</text>\n";
    size_t li = 0;
    for (size_t i = 0; i < r.ranked.size(); ++i) {
        const ReportCandidate& c = r.ranked[i];
        if (!c.has_hist) continue;
        const double tot = double(std::max<int64_t>(1, c.hist.total));
        double cum = double(c.hist.below);
        std::string pts = num(X(edges[0])) + "," + num(Y(cum / tot));
        auto point = [&](double x, double y) {
            pts += ' ';
            pts += num(x);
            pts += ',';
            pts += num(y);
        };
        for (size_t b = 0; b < c.hist.counts.size(); ++b) {
            point(X(edges[b + 1]), Y(cum / tot));
            cum += double(c.hist.counts[b]);
            point(X(edges[b + 1]), Y(cum / tot));
        }
        s += "<polyline fill=\"none\" stroke=\"" + std::string(color(i)) + "\" stroke-width=\"2\" points=\"" + pts + "\"/>\n";
        const double ly = top + 12 + 18 * double(li++);
        s += "<line x1=\"" + num(left + pw + 12) + "\" y1=\"" + num(ly - 4) + "\" x2=\"" + num(left + pw + 30) + "\" y2=\"" +
             num(ly - 4) + "\" stroke=\"" + color(i) + "\" stroke-width=\"3\"/>\n";
        s += "<text x=\"" + num(left + pw + 34) + "\" y=\"" + num(ly) + "\" class=\"lbl\">" + esc(c.label) + "</text>\n";
    }
    s += "</svg>\n";
    return s;
}

const char* kCss =
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:900px;color:#222}"
    "h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}"
    "table{border-collapse:collapse;font-size:0.85em;margin:8px 0}"
    "th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f3f3f3}"
    "td.l,th.l{text-align:left}.sw{display:inline-block;width:10px;height:10px;margin-right:5px}"
    ".note{color:#555;font-size:0.85em}.missing{color:#a33}.warn{color:#a60}"
    "svg .ttl{font-size:13px;font-weight:600}svg .lbl{font-size:12px}svg .grp{font-size:12px;font-weight:600}"
    "svg .tick{font-size:10px;fill:#555}svg .axis{font-size:11px;fill:#333}"
    "svg .grid{stroke:#e4e4e4;stroke-width:1}svg .axisline{stroke:#888;stroke-width:1}"
    "code{font-size:0.9em}";

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
    KLD_TRY(hist_edges(opt.hist, &edges));
    std::vector<Loaded> L(in.size());
    for (size_t i = 0; i < in.size(); ++i) KLD_TRY(load_receipt(in[i], &L[i]));
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
    for (size_t i = 0; i < L.size(); ++i)
        if (!L[i].c.tokens_path.empty()) KLD_TRY(load_sidecar(L[i], edges, &L[i].c));
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
                run_paired_receipts(L[order[k]].r, nb.r, po, &pr, &pt).ok()) {
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

// ---- HTML ------------------------------------------------------------------------------

std::string report_html(const Report& r) {
    std::string h;
    h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + esc(r.title) +
         "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n";
    h += "<h1>" + esc(r.title) + "</h1>\n";
    const ReportCandidate& f = r.ranked.front();
    h += "<p class=\"note\">" + std::to_string(r.ranked.size()) + " candidates, " + std::to_string(f.windows) +
         " windows, " + std::to_string(f.positions) + " scored positions; direction " + esc(r.direction) +
         "; compat " + esc(r.compat) + (r.suite_hash.empty() ? "" : "; suite <code>" + esc(r.suite_hash) + "</code>") +
         (r.reference.empty() ? "" : "; reference <code>" + esc(r.reference) + "</code>") + ".</p>\n";
    for (const auto& w : r.warnings) h += "<p class=\"warn\">note: " + esc(w) + "</p>\n";

    // Ranking
    h += "<h2 id=\"ranking\">Ranking</h2>\n";
    double xmax = 0;
    for (const auto& c : r.ranked) {
        if (std::isfinite(c.ci_high)) xmax = std::max(xmax, c.ci_high);
        if (std::isfinite(c.mean)) xmax = std::max(xmax, c.mean);
    }
    std::vector<Row> rows;
    for (size_t i = 0; i < r.ranked.size(); ++i) {
        const auto& c = r.ranked[i];
        rows.push_back({std::to_string(i + 1) + ". " + c.label, c.mean, c.ci_low, c.ci_high, color(i)});
    }
    h += whisker_svg(rows, "mean KL with 95% CI (window-clustered bootstrap)", xmax);
    h += "<table id=\"ranking-table\">\n<tr><th>rank</th><th class=\"l\">candidate</th><th>mean KL</th><th>95% CI</th>"
         "<th>SE</th><th>median</th><th>p99</th><th>max</th><th>top-1</th><th>top-1 95% CI</th><th>JS</th>"
         "<th>PPL cand / ref</th><th>vs next (paired &#916;, 95% CI)</th></tr>\n";
    for (size_t i = 0; i < r.ranked.size(); ++i) {
        const auto& c = r.ranked[i];
        std::string nx = c.has_next ? g6(c.next_delta, 4) + " " + ci_text(c.next_ci_low, c.next_ci_high) + " " + c.next_verdict
                                    : (i + 1 < r.ranked.size() ? "n/a" : "");
        h += "<tr><td>" + std::to_string(i + 1) + "</td><td class=\"l\"><span class=\"sw\" style=\"background:" +
             color(i) + "\"></span>" + esc(c.label) + "</td><td>" + g6(c.mean) + "</td><td>" + ci_text(c.ci_low, c.ci_high) +
             "</td><td>" + g6(c.se, 3) + "</td><td>" + g6(c.median, 4) + "</td><td>" + g6(c.p99, 4) + "</td><td>" +
             g6(c.max, 4) + "</td><td>" + pct(c.top1) + "</td><td>" +
             (c.top1_ci_low >= 0 ? "[" + pct(c.top1_ci_low) + ", " + pct(c.top1_ci_high) + "]" : "n/a") + "</td><td>" +
             g6(c.js_mean, 4) + "</td><td>" +
             (c.ppl_cand > 0 ? g6(c.ppl_cand, 5) + " / " + g6(c.ppl_ref, 5) : "n/a") + "</td><td>" + esc(nx) +
             "</td></tr>\n";
    }
    h += "</table>\n<p class=\"note\">CI: percentile interval of the window-clustered bootstrap in each receipt "
         "(<code>kl_window_cluster_bootstrap</code>). &#8220;vs next&#8221;: paired window bootstrap of "
         "KL(this) &#8722; KL(next in the ranking) over the same windows (as <code>kld paired --receipts</code>); "
         "&#8220;lower&#8221; when its CI lies below 0.</p>\n";

    // Per domain
    h += "<h2 id=\"domains\">Per-domain mean KL</h2>\n";
    std::vector<Row> drows;
    double dmax = 0;
    for (const auto& d : r.domains) {
        drows.push_back({d, 0, 0, 0, "#000", true});
        for (size_t i = 0; i < r.ranked.size(); ++i)
            for (const auto& dm : r.ranked[i].domains)
                if (dm.name == d) {
                    drows.push_back({r.ranked[i].label, dm.mean, dm.ci_low, dm.ci_high, color(i)});
                    if (std::isfinite(dm.ci_high)) dmax = std::max(dmax, dm.ci_high);
                    if (std::isfinite(dm.mean)) dmax = std::max(dmax, dm.mean);
                }
    }
    h += whisker_svg(drows, "per-domain mean KL with 95% CI", dmax);
    h += "<table id=\"domain-table\">\n<tr><th class=\"l\">candidate</th>";
    for (const auto& d : r.domains) h += "<th>" + esc(d) + " mean</th><th>95% CI</th><th>top-1</th>";
    h += "</tr>\n";
    for (size_t i = 0; i < r.ranked.size(); ++i) {
        h += "<tr><td class=\"l\">" + esc(r.ranked[i].label) + "</td>";
        for (const auto& d : r.domains) {
            const ReportDomain* dm = nullptr;
            for (const auto& x : r.ranked[i].domains)
                if (x.name == d) dm = &x;
            if (!dm) {
                h += "<td>-</td><td>-</td><td>-</td>";
                continue;
            }
            h += "<td>" + g6(dm->mean) + "</td><td>" + ci_text(dm->ci_low, dm->ci_high) + "</td><td>" + pct(dm->top1) + "</td>";
        }
        h += "</tr>\n";
    }
    h += "</table>\n";
    std::string wc;
    for (const auto& d : r.domains) {
        for (const auto& x : f.domains)
            if (x.name == d) wc += (wc.empty() ? "" : ", ") + esc(d) + ": " + std::to_string(x.windows) + " windows";
    }
    h += "<p class=\"note\">Per-domain values and CIs are the receipts' <code>domains</code> bootstraps (" + wc +
         "). Few windows per domain make wide intervals.</p>\n";

    // Distribution
    h += "<h2 id=\"distribution\">Per-token KL distribution</h2>\n";
    double ymax = 0;
    bool any = false;
    for (const auto& c : r.ranked) {
        if (!c.has_hist) continue;
        any = true;
        const double tot = double(std::max<int64_t>(1, c.hist.total));
        ymax = std::max({ymax, double(c.hist.below) / tot, double(c.hist.above) / tot, double(c.hist.inf) / tot});
        for (auto n : c.hist.counts) ymax = std::max(ymax, double(n) / tot);
    }
    ymax = ymax > 0 ? std::min(1.0, std::ceil(ymax * 20 - 1e-9) / 20) : 1.0;
    for (size_t i = 0; i < r.ranked.size(); ++i) {
        const auto& c = r.ranked[i];
        if (c.has_hist) h += hist_svg(c, color(i), ymax);
        else
            h += "<p class=\"missing\">" + esc(c.label) +
                 ": no per-token sidecar was given (<code>kld compare --tokens OUT.safetensors</code>, then "
                 "<code>kld report --tokens</code>), so its distribution is not drawn.</p>\n";
    }
    if (any) {
        h += cdf_svg(r);
        const std::vector<double>* edges = nullptr;
        for (const auto& c : r.ranked)
            if (c.has_hist) {
                edges = &c.hist.edges;
                break;
            }
        h += "<p class=\"note\">Token counts per bin (bins are [low, high); the first row also holds KL = 0 and "
             "the clamped small negative values).</p>\n";
        h += "<table id=\"kl-histogram\">\n<tr><th>bin</th><th>KL low</th><th>KL high</th>";
        for (const auto& c : r.ranked)
            if (c.has_hist) h += "<th>" + esc(c.label) + "</th>";
        h += "</tr>\n";
        auto row = [&](const std::string& name, const std::string& lo, const std::string& hi, auto get) {
            h += "<tr><td class=\"l\">" + name + "</td><td>" + lo + "</td><td>" + hi + "</td>";
            for (const auto& c : r.ranked)
                if (c.has_hist) h += "<td>" + std::to_string(get(c.hist)) + "</td>";
            h += "</tr>\n";
        };
        row("below", "-inf", g6((*edges).front(), 6), [](const KlHistogram& x) { return x.below; });
        for (size_t b = 0; b + 1 < edges->size(); ++b)
            row(std::to_string(b), g6((*edges)[b], 6), g6((*edges)[b + 1], 6),
                [b](const KlHistogram& x) { return x.counts[b]; });
        row("above", g6(edges->back(), 6), "inf", [](const KlHistogram& x) { return x.above; });
        row("inf", "inf", "inf", [](const KlHistogram& x) { return x.inf; });
        row("total", "", "", [](const KlHistogram& x) { return x.total; });
        row("of which KL &lt;= 0", "", "", [](const KlHistogram& x) { return x.zeros; });
        h += "</table>\n";
    }

    // Inputs
    h += "<h2 id=\"inputs\">Inputs</h2>\n<table id=\"inputs-table\">\n<tr><th class=\"l\">candidate</th><th "
         "class=\"l\">candidate path</th><th class=\"l\">receipt</th><th class=\"l\">receipt sha256</th><th "
         "class=\"l\">per-token sidecar</th></tr>\n";
    for (const auto& c : r.ranked)
        h += "<tr><td class=\"l\">" + esc(c.label) + "</td><td class=\"l\"><code>" + esc(c.candidate) +
             "</code></td><td class=\"l\"><code>" + esc(c.receipt_path) + "</code></td><td class=\"l\"><code>" +
             esc(c.receipt_sha256) + "</code></td><td class=\"l\">" +
             (c.tokens_path.empty() ? std::string("none") : "<code>" + esc(c.tokens_path) + "</code>") + "</td></tr>\n";
    h += "</table>\n<p class=\"note\">Written by <code>sluice kld report</code>; self-contained (inline SVG, no scripts, "
         "no external resources).</p>\n</body>\n</html>\n";
    return h;
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
