// The HTML page of `sluice kld report` (see report.h): one self-contained
// file, inline SVG charts, no scripts and no external resources.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kld/report/report.h"
#include "kld/report/report_fmt.h"

namespace sluice::kld {

namespace {

using fmt::ci_text;
using fmt::g6;
using fmt::pct;

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

}  // namespace sluice::kld
