// kld report (ranking, self-contained HTML, per-token histograms, refusals)
// and the capture/compare/paired/noise progress display.
#include <algorithm>
#include <cmath>
#include <chrono>
#include <thread>

#include "kld/progress.h"
#include "kld/report/report.h"
#include "kld_test_util.h"

using namespace kt;

namespace {

constexpr int T = 48, V = 400;

// One reference and candidates at increasing distance, compared with
// per-token sidecars. Built once for the whole file.
struct RP {
    std::string d;
    Suite s;
    std::vector<std::vector<float>> ref;
    std::vector<std::string> names = {"same", "near", "mid", "far"};
    std::vector<float> sigma = {0.f, 0.05f, 0.3f, 1.2f};
    std::string receipt(const std::string& n) const { return d + "/" + n + ".json"; }
    std::string tokens(const std::string& n) const { return d + "/" + n + ".safetensors"; }
};

RP& rp() {
    static RP f = [] {
        RP f;
        f.d = tmpdir("report");
        f.s = make_synth_suite(f.d, T, V, {"prose", "code", "instruction"}, 2);
        for (int w = 0; w < 6; ++w) f.ref.push_back(synth_ref(T - 1, V, 300 + uint32_t(w)));
        write_ref(f.s, f.ref, V, f.d + "/ref");
        for (size_t c = 0; c < f.names.size(); ++c) {
            std::vector<std::vector<float>> t;
            for (int w = 0; w < 6; ++w)
                t.push_back(f.sigma[c] == 0 ? f.ref[size_t(w)] : perturb(f.ref[size_t(w)], f.sigma[c], 900 + uint32_t(10 * c + w)));
            write_ref(f.s, t, V, f.d + "/" + f.names[c]);
            std::string out, er;
            EXPECT_EQ(kld({"compare", "--suite", f.d + "/suite", "--reference", f.d + "/ref", "--candidate", f.d + "/" + f.names[c],
                           "--json", f.receipt(f.names[c]), "--tokens", f.tokens(f.names[c]), "--bootstrap-samples", "2000"},
                          &out, &er),
                      0)
                << er;
        }
        return f;
    }();
    return f;
}

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// No output under the final name and no temp file left.
void expect_nothing_written(const std::string& p) {
    EXPECT_FALSE(file_exists(p)) << p;
    EXPECT_FALSE(file_exists(p + ".tmp")) << p;
}

int report(std::vector<std::string> extra, std::string* out, std::string* er) {
    extra.insert(extra.begin(), "report");
    const int rc = kld(extra, out, er);
    std::printf("  report exit %d: %s", rc, er->c_str());
    return rc;
}

// A LogitsEngine hook serving fixed tables (for capture through the CLI).
KldHooks table_hooks(const Suite& s, const std::vector<std::vector<float>>& t, bool tty = false) {
    KldHooks h;
    h.open_engine = [&s, &t](const std::string&, int, std::unique_ptr<LogitsEngine>* e) -> Status {
        *e = std::make_unique<TableEngine>(s, t, V);
        return {};
    };
    h.err_is_tty = tty;
    return h;
}

}  // namespace

TEST(KldReport, HistogramBins) {
    std::vector<double> e;
    ASSERT_TRUE(hist_edges(HistSpec{}, &e).is_ok());
    ASSERT_EQ(e.size(), 37u);  // 1e-8 .. 10: 9 decades x 4 bins
    EXPECT_EQ(e.front(), 1e-8);
    EXPECT_EQ(e.back(), 10.0);
    EXPECT_NEAR(e[4], 1e-7, 1e-20);
    EXPECT_NEAR(e[18], 1e-8 * std::pow(10.0, 4.5), 1e-15);
    // float 1e-8f is 9.99999994e-9, just under the double edge 1e-8.
    const std::vector<float> v = {0.f, -1e-7f, 9.9e-9f, 1e-8f, 1.01e-8f, 2e-8f, 0.05f, 9.99f, 10.f, 1e3f, INFINITY};
    KlHistogram h = kl_histogram(v.data(), v.size(), e);
    EXPECT_EQ(h.total, 11);
    EXPECT_EQ(h.below, 4);  // 0, a negative, 9.9e-9 and 1e-8f
    EXPECT_EQ(h.zeros, 2);
    EXPECT_EQ(h.counts[0], 1);  // [1e-8, 1.78e-8): 1.01e-8; 2e-8 is in bin 1
    EXPECT_EQ(h.counts[1], 1);
    EXPECT_EQ(h.counts[size_t(std::floor((std::log10(0.05) + 8) * 4))], 1);
    EXPECT_EQ(h.counts.back(), 1);  // 9.99
    EXPECT_EQ(h.above, 2);          // 10 and 1000
    EXPECT_EQ(h.inf, 1);
    int64_t sum = h.below + h.above + h.inf;
    for (auto c : h.counts) sum += c;
    EXPECT_EQ(sum, h.total);
    HistSpec bad;
    bad.lo = 0;
    EXPECT_EQ(code_of(hist_edges(bad, &e)), Code::usage);
    bad = HistSpec{};
    bad.bins_per_decade = 0;
    EXPECT_EQ(code_of(hist_edges(bad, &e)), Code::usage);
}

TEST(KldReport, RanksRendersAndCountsEveryToken) {
    auto& f = rp();
    const std::string html = f.d + "/r1.html", rj = f.d + "/r1.json";
    std::string out, er;
    // Given out of order; the report ranks by mean KL.
    ASSERT_EQ(report({"--receipts", f.receipt("far"), f.receipt("same"), f.receipt("mid"), f.receipt("near"), "--tokens",
                      f.tokens("far"), f.tokens("same"), f.tokens("mid"), f.tokens("near"), "--out", html, "--json", rj,
                      "--hist-min", "1e-8", "--hist-max", "10"},  // the fixed range the recount below assumes
                     &out, &er),
              0)
        << er;
    std::printf("%s", out.c_str());
    // stdout: the ranking with CIs, in order of distance.
    size_t at = 0;
    for (const std::string n : {"same", "near", "mid", "far"}) {
        const size_t p = out.find("  " + n + " ", at);
        ASSERT_NE(p, std::string::npos) << n << " not ranked after position " << at;
        at = p;
    }
    EXPECT_TRUE(has(out, "95% CI"));
    EXPECT_TRUE(has(out, "[0, 0]"));  // the identical candidate
    EXPECT_TRUE(has(out, "per-domain mean KL"));
    EXPECT_TRUE(has(out, "report written to " + html));
    json j = json::parse(read_text(rj));
    ASSERT_EQ(j["ranking"].size(), 4u);
    std::vector<std::string> order;
    for (const auto& c : j["ranking"]) order.push_back(c["label"]);
    EXPECT_EQ(order, (std::vector<std::string>{"same", "near", "mid", "far"}));
    for (size_t i = 0; i < 4; ++i) {
        const json& c = j["ranking"][i];
        const json r = json::parse(read_text(f.receipt(c["label"])));
        EXPECT_EQ(c["kl_mean"], r["kl_reference_to_candidate"]["mean"]);
        EXPECT_EQ(c["kl_ci95_low"], r["kl_window_cluster_bootstrap"]["ci95_low"]);
        EXPECT_EQ(c["kl_ci95_high"], r["kl_window_cluster_bootstrap"]["ci95_high"]);
        EXPECT_EQ(c["domains"].size(), 3u);
        EXPECT_EQ(c["domains"]["code"]["mean"], r["domains"]["code"]["estimate"]);
        // Every token lands in exactly one bin; recount from the sidecar.
        const json& h = c["histogram"];
        int64_t sum = h["below"].get<int64_t>() + h["above"].get<int64_t>() + h["inf"].get<int64_t>();
        for (auto n : h["counts"]) sum += n.get<int64_t>();
        EXPECT_EQ(sum, r["positions"].get<int64_t>());
        EXPECT_EQ(h["total"], r["positions"]);
        StFile sf;
        ASSERT_TRUE(sf.open(f.tokens(c["label"])).is_ok());
        const TensorInfo* t = sf.find("kl");
        std::vector<float> kl(t->shape[0]);
        ASSERT_TRUE(sf.pread_data(t->begin, kl.data(), kl.size() * 4).is_ok());
        std::vector<int64_t> counts(36, 0);
        int64_t below = 0;
        for (float x : kl) {
            if (x < 1e-8f) ++below;
            else if (x < 10.f) ++counts[size_t(std::min(35.0, std::floor((std::log10(double(x)) + 8) * 4 + 1e-12)))];
        }
        EXPECT_EQ(h["below"].get<int64_t>(), below);
        EXPECT_EQ(h["counts"].get<std::vector<int64_t>>(), counts) << c["label"];
        if (i + 1 < 4) {
            EXPECT_EQ(c["vs_next"]["verdict"], "lower") << c["label"];
            EXPECT_LT(c["vs_next"]["ci95_high"].get<double>(), 0.0);
        }
    }
    EXPECT_EQ(j["ranking"][0]["kl_mean"].get<double>(), 0.0);
    EXPECT_EQ(j["ranking"][0]["histogram"]["zeros"], j["ranking"][0]["positions"]);
    // The page: self-contained, the three views, the bin table, every name.
    const std::string h = read_text(html);
    EXPECT_EQ(h.rfind("<!DOCTYPE html>", 0), 0u);
    EXPECT_TRUE(has(h, "</html>"));
    EXPECT_TRUE(has(h, "<svg"));
    EXPECT_TRUE(has(h, "id=\"ranking-table\""));
    EXPECT_TRUE(has(h, "id=\"domain-table\""));
    EXPECT_TRUE(has(h, "id=\"kl-histogram\""));
    EXPECT_TRUE(has(h, "per-token KL histogram of far"));
    for (const std::string n : {"same", "near", "mid", "far"}) EXPECT_TRUE(has(h, ">" + n + "<")) << n;
    for (const std::string bad : {"<script", "http://", "https://", "src=", "href=", "@import", "url("})
        EXPECT_FALSE(has(h, bad)) << bad;
    const std::string total = "<tr><td class=\"l\">total</td><td></td><td></td>";
    ASSERT_TRUE(has(h, total));
    EXPECT_TRUE(has(h, total + "<td>282</td><td>282</td><td>282</td><td>282</td></tr>"));  // 6 windows x 47 rows
    EXPECT_FALSE(file_exists(html + ".tmp"));
    // Deterministic: the same inputs give the same page byte for byte.
    ASSERT_EQ(report({"--receipts", f.receipt("far"), f.receipt("same"), f.receipt("mid"), f.receipt("near"), "--tokens",
                      f.tokens("far"), f.tokens("same"), f.tokens("mid"), f.tokens("near"), "--out", html + "2",
                      "--hist-min", "1e-8", "--hist-max", "10"},
                     &out, &er),
              0);
    EXPECT_EQ(read_text(html + "2"), h);
}

TEST(KldReport, LabelsMissingSidecarAndDefaultNames) {
    auto& f = rp();
    const std::string html = f.d + "/r2.html";
    std::string out, er;
    ASSERT_EQ(report({"--receipts", f.receipt("near"), f.receipt("mid"), "--tokens", "-", f.tokens("mid"), "--labels",
                      "q8 <experts>", "q4", "--out", html, "--title", "trunk & experts"},
                     &out, &er),
              0)
        << er;
    std::printf("%s", out.c_str());
    EXPECT_TRUE(has(out, "q8 <experts>"));
    EXPECT_TRUE(has(out, "no per-token sidecar"));
    const std::string h = read_text(html);
    EXPECT_TRUE(has(h, "q8 &lt;experts&gt;: no per-token sidecar was given"));  // said, not drawn
    EXPECT_FALSE(has(h, "per-token KL histogram of q8"));
    EXPECT_TRUE(has(h, "per-token KL histogram of q4"));
    EXPECT_TRUE(has(h, "<title>trunk &amp; experts</title>"));
    EXPECT_FALSE(has(h, "<experts>"));
    // Without --labels the name is the candidate directory's.
    ASSERT_EQ(report({"--receipts", f.receipt("mid"), "--out", html}, &out, &er), 0) << er;
    EXPECT_TRUE(has(out, "   1  mid "));
    EXPECT_TRUE(has(read_text(html), "id=\"ranking-table\""));
    EXPECT_FALSE(has(read_text(html), "id=\"kl-histogram\""));
    // The same receipt twice: told apart, and indistinguishable from itself.
    ASSERT_EQ(report({"--receipts", f.receipt("mid"), f.receipt("mid"), "--out", html}, &out, &er), 0) << er;
    std::printf("%s", out.c_str());
    EXPECT_TRUE(has(out, "mid (mid.json) #2"));
    EXPECT_TRUE(has(out, "0 [0, 0] indistinguishable"));
}

TEST(KldReport, InfiniteKlCandidateRanksLast) {
    auto& f = rp();
    // -inf in the candidate where the reference has mass: KL = +inf there.
    std::vector<std::vector<float>> t;
    for (int w = 0; w < 6; ++w) t.push_back(perturb(f.ref[size_t(w)], 0.05f, 1234 + uint32_t(w)));
    float* row = t[1].data() + 3 * V;
    const size_t am = size_t(std::max_element(f.ref[1].data() + 3 * V, f.ref[1].data() + 4 * V) - (f.ref[1].data() + 3 * V));
    row[am] = -INFINITY;
    write_ref(f.s, t, V, f.d + "/holed");
    std::string out, er;
    ASSERT_EQ(kld({"compare", "--suite", f.d + "/suite", "--reference", f.d + "/ref", "--candidate", f.d + "/holed", "--json",
                   f.d + "/holed.json", "--tokens", f.d + "/holed.safetensors", "--bootstrap-samples", "2000"},
                  &out, &er),
              0)
        << er;
    ASSERT_TRUE(has(read_text(f.d + "/holed.json"), "Infinity"));  // Python's literal, as festr2 writes it
    const std::string html = f.d + "/r3.html", rj = f.d + "/r3.json";
    ASSERT_EQ(report({"--receipts", f.d + "/holed.json", f.receipt("far"), "--tokens", f.d + "/holed.safetensors", f.tokens("far"),
                      "--out", html, "--json", rj},
                     &out, &er),
              0)
        << er;
    std::printf("%s", out.c_str());
    std::string rjt = read_text(rj);
    json j;
    ASSERT_TRUE(parse_json_py(rjt, rj, &j).is_ok());
    EXPECT_EQ(j["ranking"][0]["label"], "far");
    EXPECT_EQ(j["ranking"][1]["label"], "holed");
    EXPECT_TRUE(std::isinf(j["ranking"][1]["kl_mean"].get<double>()));
    EXPECT_EQ(j["ranking"][1]["histogram"]["inf"], 1);
    EXPECT_TRUE(has(read_text(html), "mean = inf"));
}

TEST(KldReport, RefusalsNameTheFileAndLeaveNothing) {
    auto& f = rp();
    const std::string html = f.d + "/bad.html", rj = f.d + "/bad.json";
    std::string out, er;
    // Usage (2).
    EXPECT_EQ(report({"--receipts", f.receipt("near")}, &out, &er), 2);  // no --out
    EXPECT_EQ(report({"--out", html}, &out, &er), 2);                   // no receipts
    EXPECT_EQ(report({"--receipts", f.receipt("near"), f.receipt("mid"), "--tokens", f.tokens("near"), "--out", html}, &out, &er), 2);
    EXPECT_EQ(report({"--receipts", f.receipt("near"), "--out", html, "--bins-per-decade", "0"}, &out, &er), 2);
    EXPECT_EQ(report({"--receipts", f.receipt("near"), "--out", html, "--hist-min", "10", "--hist-max", "1"}, &out, &er), 2);
    expect_nothing_written(html);
    // I/O (5): a missing receipt, a missing sidecar.
    EXPECT_EQ(report({"--receipts", f.receipt("near"), f.d + "/nope.json", "--out", html, "--json", rj}, &out, &er), 5);
    EXPECT_TRUE(has(er, f.d + "/nope.json"));
    expect_nothing_written(html);
    expect_nothing_written(rj);
    EXPECT_EQ(report({"--receipts", f.receipt("near"), "--tokens", f.d + "/nope.safetensors", "--out", html}, &out, &er), 5);
    EXPECT_TRUE(has(er, "nope.safetensors"));
    expect_nothing_written(html);
    // Format (4): not JSON; JSON that is not a compare receipt; a receipt
    // without its CI; a sidecar that is a logits file.
    write_text(f.d + "/garbage.json", "{not json");
    EXPECT_EQ(report({"--receipts", f.d + "/garbage.json", "--out", html}, &out, &er), 4);
    EXPECT_TRUE(has(er, "garbage.json"));
    EXPECT_EQ(report({"--receipts", f.receipt("near"), f.d + "/suite/suite-manifest.json", "--out", html}, &out, &er), 4);
    EXPECT_TRUE(has(er, "suite-manifest.json: not a kld compare receipt"));
    ASSERT_EQ(kld({"paired", "--receipts", f.receipt("near"), f.receipt("mid"), "--json", f.d + "/paired.json"}), 0);
    EXPECT_EQ(report({"--receipts", f.d + "/paired.json", "--out", html}, &out, &er), 4);
    EXPECT_TRUE(has(er, "'sluice kld paired (receipts)' file"));
    json r = json::parse(read_text(f.receipt("near")));
    r.erase("kl_window_cluster_bootstrap");
    write_text(f.d + "/noci.json", dump_py(r));
    EXPECT_EQ(report({"--receipts", f.d + "/noci.json", "--out", html}, &out, &er), 4);
    EXPECT_TRUE(has(er, "noci.json: not a kld compare receipt: missing key 'kl_window_cluster_bootstrap.ci95_low'"));
    EXPECT_EQ(report({"--receipts", f.receipt("near"), "--tokens", f.d + "/ref/logits_000.safetensors", "--out", html}, &out, &er), 4);
    EXPECT_TRUE(has(er, "logits_000.safetensors: not a kld compare --tokens sidecar"));
    expect_nothing_written(html);
    // Identity (3): a sidecar of another run (fewer positions; swapped
    // candidates with the same windows), receipts of different experiments.
    ASSERT_EQ(kld({"compare", "--suite", f.d + "/suite", "--reference", f.d + "/ref", "--candidate", f.d + "/near", "--windows",
                   "0-3", "--json", f.d + "/near4.json", "--tokens", f.d + "/near4.safetensors"}),
              0);
    EXPECT_EQ(report({"--receipts", f.receipt("near"), "--tokens", f.d + "/near4.safetensors", "--out", html}, &out, &er), 3);
    EXPECT_TRUE(has(er, "near4.safetensors: 188 per-token KL values, but receipt " + f.receipt("near") + " has 282 positions"));
    EXPECT_EQ(report({"--receipts", f.receipt("near"), f.receipt("far"), "--tokens", f.tokens("far"), f.tokens("near"), "--out", html},
                     &out, &er),
              3);
    EXPECT_TRUE(has(er, "far.safetensors: window 0 mean KL is"));
    EXPECT_EQ(report({"--receipts", f.receipt("near"), f.d + "/near4.json", "--out", html}, &out, &er), 3);
    EXPECT_TRUE(has(er, "near4.json: window set (4 windows, 188 positions) differs"));
    ASSERT_EQ(kld({"compare", "--suite", f.d + "/suite", "--reference", f.d + "/mid", "--candidate", f.d + "/far", "--json",
                   f.d + "/other-ref.json"}),
              0);
    EXPECT_EQ(report({"--receipts", f.receipt("near"), f.d + "/other-ref.json", "--out", html}, &out, &er), 3);
    EXPECT_TRUE(has(er, "different reference identity"));
    expect_nothing_written(html);
    expect_nothing_written(rj);
}

TEST(KldProgress, FormatAndTicker) {
    ProgressInfo p;
    p.phase = "compare";
    p.windows_done = 3;
    p.windows_total = 8;
    p.rows_done = 50;
    p.rows_total = 100;
    p.bytes = 2'500'000'000;
    p.elapsed_s = 2;
    const std::string s = format_progress(p, 10);
    std::printf("%s\n", s.c_str());
    EXPECT_EQ(s, "compare [#####-----] 3/8 windows  2.50 GB read  1.25 GB/s  25 tok/s  ETA 0:02");
    p.final = p.completed = true;
    EXPECT_TRUE(has(format_progress(p, 0), "done in 0:02"));
    // The ticker reports from its own thread while work runs, then once more.
    std::vector<ProgressInfo> seen;
    std::mutex mu;
    {
        ProgressTicker t(
            [&](const ProgressInfo& i) {
                std::lock_guard<std::mutex> lk(mu);
                seen.push_back(i);
            },
            "capture", "written", 2, 20, 0.05);
        for (int k = 0; k < 4; ++k) {
            t.add_rows(5);
            t.add_bytes(100);
            std::this_thread::sleep_for(std::chrono::milliseconds(40));
        }
        t.window_done();
        t.window_skipped(0);
        t.stop(true);
        t.stop(true);  // once only
    }
    ASSERT_GE(seen.size(), 2u);
    EXPECT_TRUE(seen.back().final && seen.back().completed);
    EXPECT_EQ(seen.back().rows_done, 20);
    EXPECT_EQ(seen.back().windows_done, 2);
    EXPECT_EQ(seen.back().bytes, 400u);
    for (size_t i = 0; i + 1 < seen.size(); ++i) EXPECT_FALSE(seen[i].final);
    // No callback: no thread, nothing reported.
    ProgressTicker off(nullptr, "compare", "read", 1, 1, 0.05);
    EXPECT_FALSE(off.active());
}

TEST(KldProgress, OnStderrOnlyNeverChangesResults) {
    auto& f = rp();
    const std::vector<std::string> base = {"compare", "--suite", f.d + "/suite", "--reference", f.d + "/ref", "--candidate",
                                           f.d + "/mid", "--bootstrap-samples", "500", "--threads", "2"};
    auto run = [&](const std::string& tag, std::vector<std::string> extra, const KldHooks& h, std::string* out, std::string* er) {
        std::vector<std::string> w = base;
        w.insert(w.end(), {"--json", f.d + "/prog-" + tag + ".json", "--tokens", f.d + "/prog-" + tag + ".safetensors"});
        w.insert(w.end(), extra.begin(), extra.end());
        return kld(w, out, er, h);
    };
    std::string o0, e0, o1, e1, o2, e2, o3, e3, o4, e4;
    KldHooks tty;
    tty.err_is_tty = true;
    ASSERT_EQ(run("plain", {}, {}, &o0, &e0), 0) << e0;
    ASSERT_EQ(run("forced", {"--progress"}, {}, &o1, &e1), 0) << e1;
    ASSERT_EQ(run("off", {"--no-progress"}, {}, &o2, &e2), 0) << e2;
    ASSERT_EQ(run("tty", {}, tty, &o3, &e3), 0) << e3;
    ASSERT_EQ(run("ttyoff", {"--no-progress"}, tty, &o4, &e4), 0) << e4;
    std::printf("forced: %s", e1.c_str());
    // Not a terminal and not asked for: nothing. --progress: whole lines.
    EXPECT_FALSE(has(e0, "progress"));
    EXPECT_FALSE(has(e2, "progress"));
    EXPECT_FALSE(has(e4, "compare ["));
    EXPECT_TRUE(has(e1, "progress: compare ["));
    EXPECT_TRUE(has(e1, "6/6 windows"));
    EXPECT_TRUE(has(e1, "MB read"));
    EXPECT_TRUE(has(e1, "done in"));
    EXPECT_FALSE(has(e1, "\r"));
    // A terminal: redrawn in place, ended with a newline.
    EXPECT_TRUE(has(e3, "\rcompare ["));
    EXPECT_TRUE(has(e3, "\x1b[K"));
    EXPECT_EQ(e3.back(), '\n');
    // stdout, receipt (apart from its timing block) and sidecar: byte-identical.
    for (const std::string* o : {&o1, &o2, &o3, &o4}) EXPECT_EQ(*o, o0);
    EXPECT_FALSE(has(o1, "progress"));
    json r0 = strip_timing(json::parse(read_text(f.d + "/prog-plain.json")));
    for (const std::string tag : {"forced", "off", "tty", "ttyoff"}) {
        EXPECT_EQ(dump_py(strip_timing(json::parse(read_text(f.d + "/prog-" + tag + ".json")))), dump_py(r0)) << tag;
        EXPECT_FALSE(has(read_text(f.d + "/prog-" + tag + ".json"), "progress")) << tag;
        EXPECT_EQ(read_text(f.d + "/prog-" + tag + ".safetensors"), read_text(f.d + "/prog-plain.safetensors")) << tag;
    }
    std::string er;
    EXPECT_EQ(run("both", {"--progress", "--no-progress"}, {}, nullptr, &er), 2);
    // capture: the same display, bytes written.
    std::string out;
    ASSERT_EQ(kld({"capture", "--model", "table", "--suite", f.d + "/suite", "--out", f.d + "/cap-prog", "--progress"}, &out, &er,
                  table_hooks(f.s, f.ref)),
              0)
        << er;
    std::printf("capture: %s", er.c_str());
    EXPECT_TRUE(has(er, "progress: capture ["));
    EXPECT_TRUE(has(er, "6/6 windows"));
    EXPECT_TRUE(has(er, "MB written"));
    EXPECT_FALSE(has(out, "progress"));
    EXPECT_FALSE(has(read_text(f.d + "/cap-prog/manifest.json"), "progress"));
    // The capture equals the reference written without a display.
    for (int w = 0; w < 6; ++w) {
        char n[40];
        std::snprintf(n, sizeof n, "/logits_%03d.safetensors", w);
        EXPECT_EQ(read_text(f.d + "/cap-prog" + n), read_text(f.d + "/ref" + n)) << n;
    }
    // Resumed: every window skipped, still reported as done.
    ASSERT_EQ(kld({"capture", "--model", "table", "--suite", f.d + "/suite", "--out", f.d + "/cap-prog", "--progress"}, &out, &er,
                  table_hooks(f.s, f.ref)),
              0);
    EXPECT_TRUE(has(er, "6/6 windows"));
}

// paired and noise: one display over all their passes, same flags, same
// guarantee (stdout and receipts byte-identical with and without it).
TEST(KldProgress, PairedAndNoiseOnStderrOnly) {
    auto& f = rp();
    struct Cmd {
        std::string name;
        std::vector<std::string> args;
        std::string total;  // windows done/total at the end
    };
    const std::vector<Cmd> cmds = {
        // reference vs A, then vs B: 2 x 6 windows.
        {"paired",
         {"paired", "--suite", f.d + "/suite", "--reference", f.d + "/ref", "--a", f.d + "/near", "--b", f.d + "/mid",
          "--bootstrap-samples", "500", "--threads", "2"},
         "12/12 windows"},
        // raw-hash pass over 3 runs + 3 pairs: 6 x 6 windows.
        {"noise",
         {"noise", "--suite", f.d + "/suite", "--runs", f.d + "/near", f.d + "/mid", f.d + "/far", "--bootstrap-samples",
          "500"},
         "36/36 windows"},
        // with a reference: 2 hash passes + 2 runs vs the reference + 1 pair: 5 x 6.
        {"noise",
         {"noise", "--suite", f.d + "/suite", "--runs", f.d + "/near", f.d + "/mid", "--reference", f.d + "/ref",
          "--bootstrap-samples", "500"},
         "30/30 windows"},
    };
    KldHooks tty;
    tty.err_is_tty = true;
    int k = 0;
    for (const Cmd& c : cmds) {
        const std::string pre = f.d + "/prog-" + c.name + std::to_string(k++) + "-";
        auto run = [&](const std::string& tag, std::vector<std::string> extra, const KldHooks& h, std::string* out,
                       std::string* er) {
            std::vector<std::string> w = c.args;
            w.insert(w.end(), {"--json", pre + tag + ".json"});
            w.insert(w.end(), extra.begin(), extra.end());
            return kld(w, out, er, h);
        };
        std::string o0, e0, o1, e1, o2, e2, o3, e3;
        ASSERT_EQ(run("plain", {}, {}, &o0, &e0), 0) << e0;
        ASSERT_EQ(run("forced", {"--progress"}, {}, &o1, &e1), 0) << e1;
        ASSERT_EQ(run("off", {"--no-progress"}, {}, &o2, &e2), 0) << e2;
        ASSERT_EQ(run("tty", {}, tty, &o3, &e3), 0) << e3;
        std::printf("%s forced: %s", c.name.c_str(), e1.c_str());
        EXPECT_FALSE(has(e0, "progress")) << c.name;
        EXPECT_FALSE(has(e2, "progress")) << c.name;
        // --progress: whole lines under the command's own name, ending at
        // every window of every pass; no per-pass "compare" display.
        EXPECT_TRUE(has(e1, "progress: " + c.name + " [")) << c.name;
        EXPECT_TRUE(has(e1, c.total)) << c.name;
        EXPECT_TRUE(has(e1, "MB read")) << c.name;
        EXPECT_TRUE(has(e1, "done in")) << c.name;
        EXPECT_FALSE(has(e1, "compare [")) << c.name;
        EXPECT_FALSE(has(e1, "\r")) << c.name;
        std::istringstream lines(e1);
        for (std::string l; std::getline(lines, l);) EXPECT_EQ(l.rfind("progress: " + c.name + " [", 0), 0u) << l;
        // A terminal: redrawn in place, ended with a newline.
        EXPECT_TRUE(has(e3, "\r" + c.name + " [")) << c.name;
        EXPECT_TRUE(has(e3, "\x1b[K")) << c.name;
        EXPECT_EQ(e3.back(), '\n') << c.name;
        // stdout and receipt: byte-identical.
        for (const std::string* o : {&o1, &o2, &o3}) EXPECT_EQ(*o, o0) << c.name;
        EXPECT_FALSE(has(o1, "progress")) << c.name;
        const std::string r0 = read_text(pre + "plain.json");
        for (const std::string tag : {"forced", "off", "tty"}) {
            EXPECT_EQ(read_text(pre + tag + ".json"), r0) << c.name << " " << tag;
            EXPECT_FALSE(has(read_text(pre + tag + ".json"), "progress")) << c.name << " " << tag;
        }
        std::string er;
        EXPECT_EQ(run("both", {"--progress", "--no-progress"}, {}, nullptr, &er), 2) << c.name;
        EXPECT_TRUE(has(er, "give --progress or --no-progress, not both")) << c.name;
    }
}

// Without --hist-min/--hist-max the histogram spans the decades the data
// occupies: no empty decades at either end, every token still counted.
TEST(KldReport, HistogramRangeFollowsTheData) {
    auto& f = rp();
    const std::string html = f.d + "/auto.html", rj = f.d + "/auto.json";
    std::string out, er;
    ASSERT_EQ(report({"--receipts", f.receipt("near"), f.receipt("far"), "--tokens", f.tokens("near"), f.tokens("far"),
                      "--out", html, "--json", rj},
                     &out, &er),
              0)
        << er;
    json j = json::parse(read_text(rj));
    const double lo = j["histogram_bins"]["min"], hi = j["histogram_bins"]["max"];
    double mn = 1e300, mx = 0;
    for (const char* n : {"near", "far"}) {
        StFile sf;
        ASSERT_TRUE(sf.open(f.tokens(n)).is_ok());
        const TensorInfo* t = sf.find("kl");
        std::vector<float> kl(t->shape[0]);
        ASSERT_TRUE(sf.pread_data(t->begin, kl.data(), kl.size() * 4).is_ok());
        for (float x : kl)
            if (x > 0 && std::isfinite(x)) mn = std::min(mn, double(x)), mx = std::max(mx, double(x));
    }
    std::printf("data in [%g, %g]; histogram range [%g, %g]\n", mn, mx, lo, hi);
    EXPECT_LE(lo, mn);
    EXPECT_GT(hi, mx);
    EXPECT_GT(lo * 10, mn);  // no empty decade below the data
    EXPECT_LE(hi / 10, mx);  // nor above it
    for (const auto& c : j["ranking"]) {
        const json& h = c["histogram"];
        EXPECT_EQ(h["above"], 0) << c["label"];
        EXPECT_EQ(h["below"], h["zeros"]) << c["label"];  // only zeros fall below
    }
}
