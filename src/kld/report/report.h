// sluice kld report: ranks candidates from their compare receipts and
// renders one self-contained HTML page (inline SVG, no scripts, no external
// resources): mean KL(reference || candidate) with the window-clustered 95%
// CI, per-domain means with CIs, and the per-token KL distribution as a
// histogram over log-spaced bins (from the compare --tokens sidecars).
//
// The receipts must describe one experiment: the same suite, reference,
// window set and compat mode (otherwise the ranking would compare unlike
// things), checked like `paired --receipts`. A sidecar must belong to its
// receipt: same positions, same windows in the same order, and per-window
// means that agree with the receipt's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kld/kld_common.h"

namespace sluice::kld {

struct ReportInput {
    std::string receipt;  // compare --json output
    std::string tokens;   // compare --tokens sidecar; empty: none
    std::string label;    // empty: derived from the receipt's candidate
};

// Log-spaced bins [lo, hi): edges lo * (hi/lo)^(k/n), n = bins.
struct HistSpec {
    double lo = 1e-8, hi = 10;
    int bins_per_decade = 4;
    // lo and hi from the data: the whole decades its finite positive values
    // occupy (lo, hi above are the fallback when there is no such value).
    bool auto_range = false;
};

struct KlHistogram {
    std::vector<double> edges;    // bins + 1
    std::vector<int64_t> counts;  // bins
    int64_t below = 0;            // KL < lo (exact zeros and negatives included)
    int64_t zeros = 0;            // of those, KL <= 0
    int64_t above = 0;            // finite KL >= hi
    int64_t inf = 0;              // KL = +inf
    int64_t total = 0;
};

Status hist_edges(const HistSpec& h, std::vector<double>* edges);
// Counts per-token KL values (NaN is refused by the caller beforehand).
KlHistogram kl_histogram(const float* v, size_t n, const std::vector<double>& edges);

struct ReportDomain {
    std::string name;
    double mean = 0, ci_low = 0, ci_high = 0;
    int64_t windows = 0;
    double top1 = -1;  // < 0: not in the receipt
};

struct ReportCandidate {
    std::string label, receipt_path, receipt_sha256, tokens_path, candidate;
    double mean = 0, ci_low = 0, ci_high = 0, se = 0, median = 0, p99 = 0, max = 0;
    double top1 = 0, top1_ci_low = -1, top1_ci_high = -1, js_mean = 0;
    double ppl_ref = -1, ppl_cand = -1;
    int64_t windows = 0, positions = 0;
    int bootstrap_samples = 0;
    std::vector<ReportDomain> domains;
    bool has_hist = false;
    KlHistogram hist;
    // Paired window bootstrap against the next candidate in the ranking
    // (rank i minus rank i+1); has_next is false for the last one or when
    // the receipts cannot be paired.
    bool has_next = false;
    double next_delta = 0, next_ci_low = 0, next_ci_high = 0;
    std::string next_verdict;
};

struct Report {
    std::string title = "sluice KLD report";
    std::string direction, compat, suite_hash, reference;
    std::vector<std::string> domains;        // union, sorted
    std::vector<ReportCandidate> ranked;     // ascending mean KL; ties keep input order
    HistSpec hist;
    std::vector<std::string> warnings;
};

struct ReportOptions {
    HistSpec hist;
    std::string title;
};

// Reads and checks the receipts and sidecars and ranks the candidates.
// Errors name the file: I/O (5) for a missing or unreadable file, format (4)
// for a file that is not a compare receipt or a per-token sidecar, identity
// (3) for receipts of different experiments or a sidecar of another run.
Status build_report(const std::vector<ReportInput>& in, const ReportOptions& opt, Report* out);

std::string report_text(const Report& r);   // the ranking table for stdout
std::string report_html(const Report& r);   // the self-contained page
json report_json(const Report& r);          // the same numbers, machine-readable

}  // namespace sluice::kld
