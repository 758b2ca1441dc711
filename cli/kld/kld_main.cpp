#include "cli/kld/kld_main.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "kld/stats/compare.h"
#include "kld/io/llamakld.h"
#include "kld/progress.h"
#include "kld/report/report.h"
#include "eval/safetensors.h"

namespace sluice::kld {

namespace {

const char* kUsage =
    "usage: sluice kld <command> ...\n"
    "  suite make   --out DIR --context T (--source NAME=FILE:W | --tokens-source NAME=FILE:W)...\n"
    "               [--tokenizer CONTAINER]\n"
    "  suite verify SUITE [--expect-suite-hash HEX] [--vocab V]\n"
    "  inspect      FILE...\n"
    "  capture      --model CONTAINER --suite SUITE --out DIR [SEL] [--align 8|4096] [--chunk N] [--run-name NAME]\n"
    "               [--progress | --no-progress]\n"
    "  compare      --suite SUITE --reference REF (--candidate CAND | --model CONTAINER) [SEL]\n"
    "               [--compat festr2-v0|none] [--torch-lanes 8|16] [--bootstrap-samples N] [--seed S]\n"
    "               [--threads N] [--json OUT] [--tokens OUT.safetensors]\n"
    "               [--llamacpp-block] [--llamacpp-positions all|second-half]\n"
    "               [--noise RECEIPT] [--verify-hashes on|off] [--finite-only] [--no-js] [--max-ram BYTES]\n"
    "               [--precision fast|fp64] [--io direct|buffered] [--read-chunk BYTES]\n"
    "               [--progress | --no-progress]\n"
    "  compare      --reference BASE.kld (--candidate CAND | --model CONTAINER) [--json OUT]\n"
    "  paired       --suite SUITE --reference REF --a A --b B [SEL] [--noise RECEIPT] [--noise-diff X] [--json OUT]\n"
    "               [--progress | --no-progress]\n"
    "  paired       --receipts A.json B.json [--noise-diff X] [--json OUT]\n"
    "  noise        --suite SUITE --runs RUN1 RUN2 [RUN...] [--reference REF] [SEL] [--json OUT]\n"
    "               [--progress | --no-progress]\n"
    "  export-kld   --suite SUITE --reference REF --out BASE.kld [SEL]\n"
    "  report       --receipts A.json [B.json ...] --out REPORT.html [--tokens A.safetensors|- ...]\n"
    "               [--labels NAME ...] [--json OUT] [--title TEXT]\n"
    "               [--hist-min 1e-8] [--hist-max 10] [--bins-per-decade 4]\n"
    "progress (capture, compare, paired, noise): a bar on stderr when it is a terminal; --progress forces it\n"
    "(plain lines when not a terminal), --no-progress turns it off. Never on stdout or in receipts.\n"
    "SEL: --windows 0-7,16 | --start-window A --stop-window B | --quick\n"
    "suite make sources: NAME=FILE:W takes W windows of --context T tokens from FILE (UTF-8 text for\n"
    "  --source, tokenized with --tokenizer CONTAINER; token ids for --tokens-source) and labels them\n"
    "  with the domain NAME, e.g. --source prose=book.txt:8 --source code=main.c:4\n"
    "report: without --hist-min/--hist-max the histogram spans the decades the data occupies\n";
// After a usage error: the error first (finish), then where the options are.
const char* kUsageHint = "(`sluice kld help` lists every command's options)\n";

// Every option that takes a value, across the subcommands.
const std::vector<std::string> kValueFlags = {
    "--a", "--align", "--b", "--bins-per-decade", "--bootstrap-samples", "--candidate", "--chunk", "--compat",
    "--context", "--expect-suite-hash", "--hist-max", "--hist-min", "--io", "--json", "--llamacpp-positions",
    "--max-ram", "--model", "--noise", "--noise-diff", "--out", "--output", "--precision", "--read-chunk",
    "--reference", "--row-block", "--run-name", "--seed", "--source", "--start-window", "--stop-window", "--suite",
    "--threads", "--tie-tolerance", "--title", "--tokenizer", "--tokens", "--tokens-source", "--torch-lanes",
    "--verify-hashes", "--vocab", "--windows"};

// Flag parser: --name value, --flag, and positionals.
struct Args {
    std::map<std::string, std::vector<std::string>> kv;
    std::vector<std::string> pos;
    std::string bad;
    bool has(const std::string& k) const { return kv.count(k) != 0; }
    std::string get(const std::string& k, const std::string& d = "") const {
        auto it = kv.find(k);
        return it == kv.end() || it->second.empty() ? d : it->second.back();
    }
};

Args parse(int argc, char** argv, int from, const std::vector<std::string>& flags,
           const std::vector<std::string>& multi = {}) {
    Args a;
    auto is = [](const std::vector<std::string>& v, const std::string& s) {
        return std::find(v.begin(), v.end(), s) != v.end();
    };
    for (int i = from; i < argc; ++i) {
        std::string s = argv[i];
        if (s.rfind("--", 0) != 0) { a.pos.push_back(s); continue; }
        if (is(flags, s)) { a.kv[s]; continue; }
        // A misspelt option (--windoes) must not be ignored: it would run
        // with the default instead of what the user asked for.
        if (!is(kValueFlags, s) && !is(multi, s)) { a.bad = "unknown option " + s; break; }
        if (is(multi, s)) {  // takes every following non-flag word
            auto& v = a.kv[s];
            while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) v.push_back(argv[++i]);
            continue;
        }
        if (i + 1 >= argc) { a.bad = s + " needs a value"; break; }
        a.kv[s].push_back(argv[++i]);
    }
    return a;
}

// --k VALUE as an int64_t or a double (whole string, else a usage error).
template <class T>
Status to_number(const Args& a, const std::string& k, T def, T* out) {
    std::string v = a.get(k);
    if (v.empty()) { *out = def; return {}; }
    try {
        size_t n = 0;
        if constexpr (std::is_integral_v<T>) *out = std::stoll(v, &n);
        else *out = std::stod(v, &n);
        if (n != v.size()) throw 1;
    } catch (...) {
        return err(Code::usage, k + (std::is_integral_v<T> ? ": not an integer: '" : ": not a number: '") + v + "'");
    }
    return {};
}

Status to_int64(const Args& a, const std::string& k, int64_t def, int64_t* out) { return to_number(a, k, def, out); }

Status selection(const Args& a, WindowSel* sel) {
    sel->list = a.get("--windows");
    sel->quick = a.has("--quick");
    int64_t v;
    SLUICE_TRY(to_int64(a, "--start-window", 0, &v));
    sel->start = int(v);
    SLUICE_TRY(to_int64(a, "--stop-window", -1, &v));
    sel->stop = int(v);
    return {};
}

Status write_receipt(const Args& a, const json& r) {
    for (const char* k : {"--json", "--output"})
        if (a.has(k)) SLUICE_TRY(write_file_atomic(a.get(k), dump_py(r, true)));
    return {};
}

// Streaming options (§7.8): --io direct|buffered, --read-chunk BYTES.
Status io_opts(const Args& a, ReadAheadOptions* io) {
    const std::string m = a.get("--io", "direct");
    if (m == "buffered") io->mode = IoMode::buffered;
    else if (m == "direct") io->mode = IoMode::direct;
    else return err(Code::usage, "--io: '" + m + "' (direct or buffered)");
    int64_t v;
    SLUICE_TRY(to_int64(a, "--read-chunk", int64_t(io->chunk), &v));
    if (v < 4096 || v > (int64_t(1) << 30)) return err(Code::usage, "--read-chunk: 4096 to 1 GiB");
    io->chunk = uint64_t(v);
    return {};
}

Status open_operand(const Args& a, const std::string& path, bool verify, std::unique_ptr<Operand>* o) {
    ReadAheadOptions io;
    SLUICE_TRY(io_opts(a, &io));
    return open_v0_dir(path, verify, io, o);
}

Status compare_opts(const Args& a, CompareOptions* o) {
    SLUICE_TRY(selection(a, &o->sel));
    int64_t v;
    SLUICE_TRY(to_int64(a, "--bootstrap-samples", 10000, &v));
    o->bootstrap_samples = int(v);
    SLUICE_TRY(to_int64(a, "--seed", 1, &v));
    o->seed = uint64_t(v);
    SLUICE_TRY(to_int64(a, "--threads", 1, &v));
    o->threads = int(v);
    SLUICE_TRY(to_int64(a, "--max-ram", int64_t(1) << 30, &v));
    o->max_ram = v;
    SLUICE_TRY(to_int64(a, "--row-block", 8, &v));
    o->rows_per_block = int(v);
    const std::string pr = a.get("--precision", "fast");
    if (pr == "fp64") o->precision = Precision::fp64;
    else if (pr != "fast") return err(Code::usage, "--precision: '" + pr + "' (fast or fp64)");
    const std::string c = a.get("--compat", "none");
    if (c == "festr2-v0") o->compat = Compat::festr2_v0;
    else if (c != "none") return err(Code::usage, "--compat: '" + c + "' is not implemented (festr2-v0 or none)");
    SLUICE_TRY(to_int64(a, "--torch-lanes", 8, &v));
    if (v != 8 && v != 16) return err(Code::usage, "--torch-lanes: 8 (torch AVX2) or 16 (torch AVX-512)");
    if (a.has("--torch-lanes") && o->compat != Compat::festr2_v0)
        return err(Code::usage, "--torch-lanes applies to --compat festr2-v0 only");
    o->torch_lanes = int(v);
    o->llamacpp_block = a.has("--llamacpp-block");
    const std::string lp = a.get("--llamacpp-positions", "all");
    if (lp != "all" && lp != "second-half") return err(Code::usage, "--llamacpp-positions: all or second-half");
    o->llamacpp_second_half = lp == "second-half";
    o->noise_receipt = a.get("--noise");
    o->finite_only = a.has("--finite-only");
    o->want_js = !a.has("--no-js");
    return {};
}

const std::vector<std::string> kFlags = {"--quick", "--llamacpp-block", "--finite-only", "--no-js", "--progress",
                                         "--no-progress"};

Status to_double(const Args& a, const std::string& k, double def, double* out) { return to_number(a, k, def, out); }

// The progress display (KLD.md §7 Scale): a bar redrawn in place on a
// terminal (4 per second), whole lines (1 per second) when --progress is
// forced onto a pipe or file. Only ever the err stream.
Status progress_fn(const Args& a, const KldHooks& h, std::ostream& e, ProgressFn* fn, double* interval) {
    if (a.has("--progress") && a.has("--no-progress")) return err(Code::usage, "give --progress or --no-progress, not both");
    const bool on = a.has("--progress") || (h.err_is_tty && !a.has("--no-progress"));
    if (!on) return {};
    const bool tty = h.err_is_tty;
    *interval = tty ? 0.25 : 1.0;
    *fn = [&e, tty](const ProgressInfo& p) {
        const std::string line = format_progress(p);
        if (tty) e << "\r" << line << "\x1b[K" << (p.final ? "\n" : "");
        else e << "progress: " << line << "\n";
        e.flush();
    };
    return {};
}

int finish(const Status& st, std::ostream& e) {
    if (st.is_ok()) return 0;
    e << "sluice kld: error (" << code_name(code_of(st)) << "): " << st.message() << "\n";
    return exit_code(st);
}

Status cmd_suite(int argc, char** argv, std::ostream& out, const KldHooks& h) {
    if (argc < 3) return err(Code::usage, "suite: make or verify");
    const std::string sub = argv[2];
    Args a = parse(argc, argv, 3, {"--force"});
    if (!a.bad.empty()) return err(Code::usage, a.bad);
    if (sub == "verify") {
        if (a.pos.size() != 1) return err(Code::usage, "suite verify SUITE_DIR");
        SuiteCheck chk;
        chk.expect_suite_hash = a.get("--expect-suite-hash");
        SLUICE_TRY(to_int64(a, "--vocab", 0, &chk.vocab));
        Suite s;
        SLUICE_TRY(load_suite(a.pos[0], chk, &s));
        std::map<std::string, int> dc;
        for (auto& w : s.windows) dc[w.domain]++;
        out << "suite OK: " << s.windows.size() << " windows x " << s.context_length << " tokens, suite hash "
            << s.suite_hash << "\n";
        for (auto& [d, c] : dc) out << "  " << d << ": " << c << " windows\n";
        return {};
    }
    if (sub != "make") return err(Code::usage, "suite: make or verify");
    MakeOptions m;
    m.out_dir = a.get("--out");
    m.force = a.has("--force");
    int64_t T;
    SLUICE_TRY(to_int64(a, "--context", 2048, &T));
    m.context_length = int(T);
    if (m.out_dir.empty()) return err(Code::usage, "suite make needs --out");
    // Sources keep their command-line order (it fixes the window numbering).
    for (int i = 3; i + 1 < argc; ++i) {
        std::string f = argv[i];
        if (f == "--source" || f == "--tokens-source") {
            SourceSpec sp;
            SLUICE_TRY(parse_source_spec(argv[i + 1], f == "--tokens-source", &sp));
            m.sources.push_back(sp);
        }
    }
    if (a.has("--tokenizer")) {
        if (!h.open_tokenizer) return err(Code::usage, "--tokenizer: this build has no tokenizer hook");
        m.model_tokenizer = a.get("--tokenizer");
        SLUICE_TRY(h.open_tokenizer(m.model_tokenizer, &m.tokenize, &m.tokenizer_class));
    } else {
        m.tokenizer_class = "none (token sources)";
    }
    Suite s;
    SLUICE_TRY(make_suite(m, &s));
    out << "suite written to " << m.out_dir << ": " << s.windows.size() << " windows, suite hash " << s.suite_hash << "\n";
    return {};
}

Status cmd_inspect(const Args& a, std::ostream& out) {
    if (a.pos.empty()) return err(Code::usage, "inspect FILE...");
    for (const auto& p : a.pos) {
        if (p.size() > 4 && p.compare(p.size() - 4, 4, ".kld") == 0) {
            KldFile f;
            SLUICE_TRY(kld_open(p, &f));
            out << p << ": llama.cpp .kld n_ctx " << f.n_ctx << " n_vocab " << f.n_vocab << " n_chunk " << f.n_chunk
                << " rows/chunk " << f.rows_per_chunk() << "\n";
            continue;
        }
        StFile f;
        SLUICE_TRY(f.open(p));
        out << p << ": safetensors, header " << f.data_start() - 8 << " bytes, data at " << f.data_start() << "\n";
        for (auto& [k, v] : f.metadata()) out << "  meta " << k << " = " << v << "\n";
        for (auto& t : f.tensors()) {
            out << "  tensor " << t.name << " " << t.dtype << " [";
            for (size_t i = 0; i < t.shape.size(); ++i) out << (i ? "," : "") << t.shape[i];
            out << "]";
            if (t.dt == DType::F32 && t.shape.size() == 2) {  // BF16-exactness scan (§1.9, §7.11 item 3)
                uint64_t bad = 0, n = t.shape[0] * t.shape[1];
                std::vector<uint32_t> buf(1 << 20);
                for (uint64_t i = 0; i < n; i += buf.size()) {
                    uint64_t k = std::min<uint64_t>(buf.size(), n - i);
                    SLUICE_TRY(f.pread_data(t.begin + i * 4, buf.data(), k * 4));
                    for (uint64_t j = 0; j < k; ++j) bad += (buf[j] & 0xffff) != 0;
                }
                out << (bad ? "  not BF16-exact (" + std::to_string(bad) + " values)" : std::string("  BF16-exact"));
            }
            out << "\n";
        }
    }
    return {};
}

Status cmd_compare(const Args& a, std::ostream& out, std::ostream& e, const KldHooks& h) {
    CompareOptions o;
    SLUICE_TRY(compare_opts(a, &o));
    const bool verify = a.get("--verify-hashes", "on") != "off";
    const std::string refp = a.get("--reference");
    if (refp.empty()) return err(Code::usage, "compare needs --reference");
    std::unique_ptr<LogitsEngine> eng;
    std::unique_ptr<Operand> cand;
    if (a.has("--model")) {
        if (a.has("--candidate")) return err(Code::usage, "give --candidate or --model, not both");
        if (!h.open_engine) return err(Code::usage, "--model: this build has no engine hook");
        SLUICE_TRY(h.open_engine(a.get("--model"), o.threads, &eng));
        cand = engine_operand(eng.get(), a.get("--model"));
    } else {
        if (!a.has("--candidate")) return err(Code::usage, "compare needs --candidate or --model");
        SLUICE_TRY(open_operand(a, a.get("--candidate"), verify, &cand));
    }
    if (refp.size() > 4 && refp.compare(refp.size() - 4, 4, ".kld") == 0) {  // llama.cpp flow
        KldFile f;
        SLUICE_TRY(kld_open(refp, &f));
        json r;
        std::string text;
        SLUICE_TRY(compare_kld(f, *cand, &r, &text));
        out << text;
        return write_receipt(a, r);
    }
    if (!a.has("--suite")) return err(Code::usage, "compare needs --suite");
    Suite s;
    SLUICE_TRY(load_suite(a.get("--suite"), SuiteCheck{a.get("--expect-suite-hash"), 0}, &s));
    std::unique_ptr<Operand> ref;
    SLUICE_TRY(open_operand(a, refp, verify, &ref));
    o.keep_tokens = a.has("--tokens");
    SLUICE_TRY(progress_fn(a, h, e, &o.progress, &o.progress_interval_s));
    CompareResult r;
    Status st = run_compare(s, *ref, *cand, o, &r);
    for (auto& w : r.warnings) e << "warning: " << w << "\n";
    if (!r.receipt.is_null()) {
        // The per-window lines (festr2's stdout) only with --json; otherwise
        // a summary table: the totals, then one row per domain.
        if (a.has("--json"))
            for (const auto& w : r.receipt["per_window"]) out << w.dump() << "\n";
        out << r.text;
        if (!a.has("--json") && r.receipt.contains("domains") && r.receipt["domains"].is_object()) {
            const json* sd = r.receipt.contains("sluice") ? &r.receipt["sluice"] : nullptr;
            char row[256];
            std::snprintf(row, sizeof row, "%-16s %8s %14s %28s %9s\n", "domain", "windows", "mean KL", "95% CI", "top-1");
            out << row;
            for (const auto& [d, b] : r.receipt["domains"].items()) {
                const json* x = sd && sd->contains("domains") && (*sd)["domains"].contains(d) ? &(*sd)["domains"][d] : nullptr;
                std::snprintf(row, sizeof row, "%-16s %8lld %14.6g [%12.6g, %12.6g] %8.3f%%\n", d.c_str(),
                              x ? (long long)x->value("windows", int64_t(0)) : 0LL, b.value("estimate", 0.0),
                              b.value("ci95_low", 0.0), b.value("ci95_high", 0.0), x ? 100 * x->value("top1", 0.0) : 0.0);
                out << row;
            }
        }
        SLUICE_TRY(write_receipt(a, r.receipt));
        if (st.is_ok() && a.has("--tokens")) SLUICE_TRY(write_token_sidecar(r, a.get("--tokens")));
    }
    return st;
}

Status cmd_report(const Args& a, std::ostream& out) {
    if (!a.has("--receipts") || a.kv.at("--receipts").empty())
        return err(Code::usage, "report needs --receipts A.json [B.json ...]");
    if (a.get("--out").empty()) return err(Code::usage, "report needs --out REPORT.html");
    if (!a.pos.empty()) return err(Code::usage, "report: unexpected argument '" + a.pos[0] + "'");
    const auto& rs = a.kv.at("--receipts");
    std::vector<std::string> toks, labels;
    if (a.has("--tokens")) toks = a.kv.at("--tokens");
    if (a.has("--labels")) labels = a.kv.at("--labels");
    if (!toks.empty() && toks.size() != rs.size())
        return err(Code::usage, "--tokens: " + std::to_string(toks.size()) + " sidecars for " + std::to_string(rs.size()) +
                                    " receipts (one per receipt, in the same order; '-' for none)");
    if (!labels.empty() && labels.size() != rs.size())
        return err(Code::usage, "--labels: " + std::to_string(labels.size()) + " names for " + std::to_string(rs.size()) +
                                    " receipts");
    std::vector<ReportInput> in;
    for (size_t i = 0; i < rs.size(); ++i) {
        ReportInput x;
        x.receipt = rs[i];
        if (!toks.empty() && toks[i] != "-") x.tokens = toks[i];
        if (!labels.empty()) x.label = labels[i];
        in.push_back(x);
    }
    ReportOptions ro;
    ro.title = a.get("--title");
    SLUICE_TRY(to_double(a, "--hist-min", 1e-8, &ro.hist.lo));
    SLUICE_TRY(to_double(a, "--hist-max", 10, &ro.hist.hi));
    // Neither given: the range follows the data (the fixed 1e-8..10 left
    // most of the chart empty when the data sat in 1e-2..1).
    ro.hist.auto_range = !a.has("--hist-min") && !a.has("--hist-max");
    int64_t bpd;
    SLUICE_TRY(to_int64(a, "--bins-per-decade", 4, &bpd));
    if (bpd < 1 || bpd > 100) return err(Code::usage, "--bins-per-decade: 1 to 100");
    ro.hist.bins_per_decade = int(bpd);
    Report rep;
    SLUICE_TRY(build_report(in, ro, &rep));
    const std::string html = report_html(rep);
    const std::string outp = a.get("--out");
    SLUICE_TRY(write_file_atomic(outp, html));
    if (a.has("--json")) {
        Status st = write_file_atomic(a.get("--json"), dump_py(report_json(rep), true));
        if (!st.is_ok()) {
            std::remove(outp.c_str());  // all outputs or none
            return st;
        }
    }
    out << report_text(rep);
    out << "report written to " << outp << "\n";
    return {};
}

int main_kld_checked(int argc, char** argv, std::ostream& out, std::ostream& e, const KldHooks& h);

}  // namespace

// Receipts, suite and operand manifests are untrusted JSON read by many
// field accessors; a field of the wrong type (mean: true, domain: 1e300)
// throws from nlohmann. Each is a malformed input (exit 4), never an abort.
int main_kld(int argc, char** argv, std::ostream& out, std::ostream& e, const KldHooks& h) {
    try {
        return main_kld_checked(argc, argv, out, e, h);
    } catch (const nlohmann::json::exception& ex) {
        std::string files;
        for (int i = 2; i < argc; ++i)
            if (argv[i][0] != '-') files += std::string(files.empty() ? "" : ", ") + argv[i];
        return finish(err(Code::format, "a JSON input (" + files + ") has a field of the wrong type or range: " +
                                            ex.what()),
                      e);
    } catch (const std::exception& ex) {
        return finish(err(Code::format, std::string("malformed input: ") + ex.what()), e);
    }
}

namespace {

int main_kld_checked(int argc, char** argv, std::ostream& out, std::ostream& e, const KldHooks& h) {
    if (argc < 2) {
        e << kUsage;
        return 2;
    }
    const std::string cmd = argv[1];
    if (cmd == "-h" || cmd == "--help" || cmd == "help") {
        out << kUsage;
        return 0;
    }
    // `sluice kld suite make --help` and the like: the options, exit 0.
    for (int i = 2; i < argc; ++i)
        if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
            out << kUsage;
            return 0;
        }
    if (cmd == "suite") {
        Status st = cmd_suite(argc, argv, out, h);
        const int rc = finish(st, e);
        if (code_of(st) == Code::usage) e << kUsageHint;
        return rc;
    }
    Args a = cmd == "report" ? parse(argc, argv, 2, kFlags, {"--receipts", "--tokens", "--labels"})
                             : parse(argc, argv, 2, kFlags, {"--runs", "--receipts"});
    if (!a.bad.empty()) return finish(err(Code::usage, a.bad), e);
    Status st;
    if (cmd == "inspect") {
        st = cmd_inspect(a, out);
    } else if (cmd == "compare") {
        st = cmd_compare(a, out, e, h);
    } else if (cmd == "capture") {
        st = [&]() -> Status {
            if (!a.has("--model") || !a.has("--suite") || !a.has("--out"))
                return err(Code::usage, "capture needs --model, --suite and --out");
            if (!h.open_engine) return err(Code::usage, "--model: this build has no engine hook");
            WindowSel sel;
            SLUICE_TRY(selection(a, &sel));
            Suite s;
            SLUICE_TRY(load_suite(a.get("--suite"), SuiteCheck{}, &s));
            std::vector<int> pos;
            SLUICE_TRY(select_windows(s, sel, &pos));
            int64_t v;
            CaptureOptions co;
            SLUICE_TRY(to_int64(a, "--align", 8, &v));
            co.align = size_t(v);
            if (co.align != 8 && co.align != 4096) return err(Code::usage, "--align: 8 or 4096");
            SLUICE_TRY(to_int64(a, "--chunk", 256, &v));
            co.chunk_rows = int(v);
            co.run_name = a.get("--run-name");
            SLUICE_TRY(progress_fn(a, h, e, &co.progress, &co.progress_interval_s));
            SLUICE_TRY(to_int64(a, "--threads", 0, &v));
            std::unique_ptr<LogitsEngine> eng;
            SLUICE_TRY(h.open_engine(a.get("--model"), int(v), &eng));
            CaptureReport rep;
            SLUICE_TRY(capture(eng.get(), s, pos, a.get("--out"), co, &rep));
            out << "captured " << rep.captured.size() << " windows (" << rep.bytes_written << " bytes), skipped "
                << rep.skipped.size() << " already verified\n";
            return {};
        }();
    } else if (cmd == "paired") {
        st = [&]() -> Status {
            PairedOptions po;
            SLUICE_TRY(compare_opts(a, &po.cmp));
            po.cmp.keep_tokens = true;
            SLUICE_TRY(progress_fn(a, h, e, &po.cmp.progress, &po.cmp.progress_interval_s));
            if (a.has("--noise-diff")) SLUICE_TRY(to_double(a, "--noise-diff", po.noise_diff, &po.noise_diff));
            if (a.has("--tie-tolerance")) SLUICE_TRY(to_double(a, "--tie-tolerance", po.tie_tolerance, &po.tie_tolerance));
            json r;
            std::string text;
            if (a.has("--receipts")) {
                const auto& rs = a.kv.at("--receipts");
                if (rs.size() != 2) return err(Code::usage, "--receipts A.json B.json");
                json ra, rb;
                std::string t;
                SLUICE_TRY(read_file(rs[0], &t));
                SLUICE_TRY(parse_json(t, rs[0], &ra));
                SLUICE_TRY(read_file(rs[1], &t));
                SLUICE_TRY(parse_json(t, rs[1], &rb));
                SLUICE_TRY(run_paired_receipts(ra, rb, po, &r, &text));
            } else {
                if (!a.has("--suite") || !a.has("--reference") || !a.has("--a") || !a.has("--b"))
                    return err(Code::usage, "paired needs --suite, --reference, --a and --b");
                const bool verify = a.get("--verify-hashes", "on") != "off";
                Suite s;
                SLUICE_TRY(load_suite(a.get("--suite"), SuiteCheck{}, &s));
                std::unique_ptr<Operand> ref, ca, cb;
                SLUICE_TRY(open_operand(a, a.get("--reference"), verify, &ref));
                SLUICE_TRY(open_operand(a, a.get("--a"), verify, &ca));
                SLUICE_TRY(open_operand(a, a.get("--b"), verify, &cb));
                SLUICE_TRY(run_paired(s, *ref, *ca, *cb, po, &r, &text));
            }
            out << text;
            return write_receipt(a, r);
        }();
    } else if (cmd == "noise") {
        st = [&]() -> Status {
            CompareOptions o;
            SLUICE_TRY(compare_opts(a, &o));
            o.keep_tokens = true;
            SLUICE_TRY(progress_fn(a, h, e, &o.progress, &o.progress_interval_s));
            if (!a.has("--suite") || !a.has("--runs")) return err(Code::usage, "noise needs --suite and --runs");
            const bool verify = a.get("--verify-hashes", "on") != "off";
            Suite s;
            SLUICE_TRY(load_suite(a.get("--suite"), SuiteCheck{}, &s));
            std::vector<std::unique_ptr<Operand>> runs;
            std::vector<Operand*> rp;
            for (const auto& p : a.kv.at("--runs")) {
                runs.emplace_back();
                SLUICE_TRY(open_operand(a, p, verify, &runs.back()));
                rp.push_back(runs.back().get());
            }
            std::unique_ptr<Operand> ref;
            if (a.has("--reference")) SLUICE_TRY(open_operand(a, a.get("--reference"), verify, &ref));
            json r;
            std::string text;
            SLUICE_TRY(run_noise(s, rp, ref.get(), o, &r, &text));
            out << text;
            return write_receipt(a, r);
        }();
    } else if (cmd == "report") {
        st = cmd_report(a, out);
    } else if (cmd == "export-kld") {
        st = [&]() -> Status {
            if (!a.has("--suite") || !a.has("--reference") || !a.has("--out"))
                return err(Code::usage, "export-kld needs --suite, --reference and --out");
            KldWriteOptions ko;
            SLUICE_TRY(selection(a, &ko.sel));
            Suite s;
            SLUICE_TRY(load_suite(a.get("--suite"), SuiteCheck{}, &s));
            std::unique_ptr<Operand> ref;
            SLUICE_TRY(open_operand(a, a.get("--reference"), a.get("--verify-hashes", "on") != "off", &ref));
            std::string warn;
            SLUICE_TRY(export_kld(s, *ref, ko, a.get("--out"), &warn));
            e << "warning: " << warn << "\n";
            out << "wrote " << a.get("--out") << "\n";
            return {};
        }();
    } else {
        st = err(Code::usage, "unknown command '" + cmd + "'");
    }
    const int rc = finish(st, e);
    if (code_of(st) == Code::usage) e << kUsageHint;
    return rc;
}

}  // namespace

}  // namespace sluice::kld
