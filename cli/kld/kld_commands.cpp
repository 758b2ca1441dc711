// The `sluice kld` subcommands on their parsed options: each opens what it
// needs through src/kld and prints its summary. Usage checks that CLI11
// cannot express (an option that only applies with another, list lengths
// that must agree) are Code::usage errors here.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/kld/kld_args.h"
#include "common/checked_file.h"
#include "format/safetensors.h"
#include "kld/io/llamakld.h"
#include "kld/progress.h"
#include "kld/report/report.h"
#include "kld/stats/compare.h"

namespace sluice::kld {

using namespace ::sluice::st;  // the safetensors reader and writer

namespace {

WindowSel selection(const SelArgs& a) {
    WindowSel s;
    s.list = a.windows;
    s.quick = a.quick;
    s.start = a.start;
    s.stop = a.stop;
    return s;
}

Status open_operand(const IoArgs& a, const std::string& path, bool verify, std::unique_ptr<Operand>* o) {
    ReadAheadOptions io;
    io.mode = a.mode == "buffered" ? IoMode::buffered : IoMode::direct;
    io.chunk = uint64_t(a.read_chunk);
    return open_v0_dir(path, verify, io, o);
}

Status compare_options(const CompareArgs& a, CompareOptions* o) {
    o->sel = selection(a.sel);
    o->bootstrap_samples = int(a.bootstrap_samples);
    o->seed = uint64_t(a.seed);
    o->threads = a.threads;
    o->max_ram = a.max_ram;
    o->rows_per_block = a.row_block;
    if (a.precision == "fp64") o->precision = Precision::fp64;
    if (a.compat == "festr2-v0") o->compat = Compat::festr2_v0;
    if (a.torch_lanes_given && o->compat != Compat::festr2_v0)
        return err(Code::usage, "--torch-lanes applies to --compat festr2-v0 only");
    o->torch_lanes = a.torch_lanes;
    o->llamacpp_block = a.llamacpp_block;
    o->llamacpp_second_half = a.llamacpp_positions == "second-half";
    o->noise_receipt = a.noise;
    o->finite_only = a.finite_only;
    o->want_js = !a.no_js;
    return {};
}

Status write_receipt(const CompareArgs& a, const json& r) {
    for (const std::string* p : {&a.json_out, &a.output_out})
        if (!p->empty()) SLUICE_TRY(write_file_atomic(*p, dump_py(r, true)));
    return {};
}

// The progress display (KLD.md §7 Scale): a bar redrawn in place on a
// terminal (4 per second), whole lines (1 per second) when --progress is
// forced onto a pipe or file. Only ever the err stream.
void progress_fn(const ProgressArgs& a, const Io& io, ProgressFn* fn, double* interval) {
    const bool on = a.on || (io.hooks.err_is_tty && !a.off);
    if (!on) return;
    const bool tty = io.hooks.err_is_tty;
    *interval = tty ? 0.25 : 1.0;
    std::ostream* e = &io.err;
    *fn = [e, tty](const ProgressInfo& p) {
        const std::string line = format_progress(p);
        if (tty) *e << "\r" << line << "\x1b[K" << (p.final ? "\n" : "");
        else *e << "progress: " << line << "\n";
        e->flush();
    };
}

// Without --json: the totals, then one row per domain (the per-window lines
// of festr2's stdout only come with --json).
void print_domain_table(const json& receipt, std::ostream& out) {
    if (!receipt.contains("domains") || !receipt["domains"].is_object()) return;
    const json* sd = receipt.contains("sluice") ? &receipt["sluice"] : nullptr;
    char row[256];
    std::snprintf(row, sizeof row, "%-16s %8s %14s %28s %9s\n", "domain", "windows", "mean KL", "95% CI", "top-1");
    out << row;
    for (const auto& [d, b] : receipt["domains"].items()) {
        const json* x = sd && sd->contains("domains") && (*sd)["domains"].contains(d) ? &(*sd)["domains"][d] : nullptr;
        std::snprintf(row, sizeof row, "%-16s %8lld %14.6g [%12.6g, %12.6g] %8.3f%%\n", d.c_str(),
                      x ? (long long)x->value("windows", int64_t(0)) : 0LL, b.value("estimate", 0.0),
                      b.value("ci95_low", 0.0), b.value("ci95_high", 0.0), x ? 100 * x->value("top1", 0.0) : 0.0);
        out << row;
    }
}

}  // namespace

Status cmd_suite_make(const SuiteMakeArgs& a, const Io& io) {
    MakeOptions m;
    m.out_dir = a.out;
    m.force = a.force;
    m.context_length = a.context;
    for (const auto& [spec, is_tokens] : a.sources) {
        SourceSpec sp;
        SLUICE_TRY(parse_source_spec(spec, is_tokens, &sp));
        m.sources.push_back(sp);
    }
    if (!a.tokenizer.empty()) {
        if (!io.hooks.open_tokenizer) return err(Code::usage, "--tokenizer: this build has no tokenizer hook");
        m.model_tokenizer = a.tokenizer;
        SLUICE_TRY(io.hooks.open_tokenizer(m.model_tokenizer, &m.tokenize, &m.tokenizer_class));
    } else {
        m.tokenizer_class = "none (token sources)";
    }
    Suite s;
    SLUICE_TRY(make_suite(m, &s));
    io.out << "suite written to " << m.out_dir << ": " << s.windows.size() << " windows, suite hash " << s.suite_hash
           << "\n";
    return {};
}

Status cmd_suite_verify(const SuiteVerifyArgs& a, const Io& io) {
    SuiteCheck chk;
    chk.expect_suite_hash = a.expect_suite_hash;
    chk.vocab = a.vocab;
    Suite s;
    SLUICE_TRY(load_suite(a.suite, chk, &s));
    std::map<std::string, int> dc;
    for (auto& w : s.windows) dc[w.domain]++;
    io.out << "suite OK: " << s.windows.size() << " windows x " << s.context_length << " tokens, suite hash "
           << s.suite_hash << "\n";
    for (auto& [d, c] : dc) io.out << "  " << d << ": " << c << " windows\n";
    return {};
}

Status cmd_inspect(const std::vector<std::string>& files, const Io& io) {
    std::ostream& out = io.out;
    for (const auto& p : files) {
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

Status cmd_capture(const CaptureArgs& a, const Io& io) {
    if (!io.hooks.open_engine) return err(Code::usage, "--model: this build has no engine hook");
    // The capture's manifest.json would replace the model's own.
    if (std::string why = ::sluice::output_inside_reason(a.out, a.model, "the model (--model)"); !why.empty())
        return err(Code::usage, "--out: " + why);
    Suite s;
    SLUICE_TRY(load_suite(a.suite, SuiteCheck{}, &s));
    std::vector<int> pos;
    SLUICE_TRY(select_windows(s, selection(a.sel), &pos));
    CaptureOptions co;
    co.align = size_t(a.align);
    co.chunk_rows = a.chunk;
    co.run_name = a.run_name;
    progress_fn(a.progress, io, &co.progress, &co.progress_interval_s);
    std::unique_ptr<LogitsEngine> eng;
    SLUICE_TRY(io.hooks.open_engine(a.model, a.threads, &eng));
    CaptureReport rep;
    SLUICE_TRY(capture(eng.get(), s, pos, a.out, co, &rep));
    io.out << "captured " << rep.captured.size() << " windows (" << rep.bytes_written << " bytes), skipped "
           << rep.skipped.size() << " already verified\n";
    return {};
}

Status cmd_compare(const CompareArgs& c, const CompareOnlyArgs& a, const Io& io) {
    CompareOptions o;
    SLUICE_TRY(compare_options(c, &o));
    const bool verify = c.verify_hashes != "off";
    std::unique_ptr<LogitsEngine> eng;
    std::unique_ptr<Operand> cand;
    if (!a.model.empty()) {
        if (!a.candidate.empty()) return err(Code::usage, "give --candidate or --model, not both");
        if (!io.hooks.open_engine) return err(Code::usage, "--model: this build has no engine hook");
        SLUICE_TRY(io.hooks.open_engine(a.model, o.threads, &eng));
        cand = engine_operand(eng.get(), a.model);
    } else {
        if (a.candidate.empty()) return err(Code::usage, "compare needs --candidate or --model");
        SLUICE_TRY(open_operand(c.io, a.candidate, verify, &cand));
    }
    const std::string& refp = c.reference;
    if (refp.size() > 4 && refp.compare(refp.size() - 4, 4, ".kld") == 0) {  // llama.cpp flow
        KldFile f;
        SLUICE_TRY(kld_open(refp, &f));
        json r;
        std::string text;
        SLUICE_TRY(compare_kld(f, *cand, &r, &text, a.bos));
        r["bos_substituted"] = a.bos >= 0 ? json(a.bos) : json(nullptr);
        io.out << text;
        return write_receipt(c, r);
    }
    if (c.suite.empty()) return err(Code::usage, "compare needs --suite");
    Suite s;
    SLUICE_TRY(load_suite(c.suite, SuiteCheck{a.expect_suite_hash, 0}, &s));
    std::unique_ptr<Operand> ref;
    SLUICE_TRY(open_operand(c.io, refp, verify, &ref));
    o.keep_tokens = !a.tokens.empty();
    progress_fn(c.progress, io, &o.progress, &o.progress_interval_s);
    CompareResult r;
    Status st = run_compare(s, *ref, *cand, o, &r);
    for (auto& w : r.warnings) io.err << "warning: " << w << "\n";
    if (!r.receipt.is_null()) {
        const bool json_lines = !c.json_out.empty();
        if (json_lines)
            for (const auto& w : r.receipt["per_window"]) io.out << w.dump() << "\n";
        io.out << r.text;
        if (!json_lines) print_domain_table(r.receipt, io.out);
        SLUICE_TRY(write_receipt(c, r.receipt));
        if (st.is_ok() && !a.tokens.empty()) SLUICE_TRY(write_token_sidecar(r, a.tokens));
    }
    return st;
}

Status cmd_paired(const CompareArgs& c, const PairedArgs& a, const Io& io) {
    PairedOptions po;
    SLUICE_TRY(compare_options(c, &po.cmp));
    po.cmp.keep_tokens = true;
    progress_fn(c.progress, io, &po.cmp.progress, &po.cmp.progress_interval_s);
    if (a.noise_diff_given) po.noise_diff = a.noise_diff;
    if (a.tie_tolerance_given) po.tie_tolerance = a.tie_tolerance;
    json r;
    std::string text;
    if (!a.receipts.empty()) {
        if (a.receipts.size() != 2) return err(Code::usage, "--receipts A.json B.json");
        json ra, rb;
        std::string t;
        SLUICE_TRY(read_file(a.receipts[0], &t));
        SLUICE_TRY(parse_json(t, a.receipts[0], &ra));
        SLUICE_TRY(refuse_failed_integrity(ra, a.receipts[0]));
        SLUICE_TRY(read_file(a.receipts[1], &t));
        SLUICE_TRY(parse_json(t, a.receipts[1], &rb));
        SLUICE_TRY(refuse_failed_integrity(rb, a.receipts[1]));
        SLUICE_TRY(run_paired_receipts(ra, rb, po, &r, &text));
    } else {
        if (c.suite.empty() || c.reference.empty() || a.a.empty() || a.b.empty())
            return err(Code::usage, "paired needs --suite, --reference, --a and --b (or --receipts A.json B.json)");
        const bool verify = c.verify_hashes != "off";
        Suite s;
        SLUICE_TRY(load_suite(c.suite, SuiteCheck{}, &s));
        std::unique_ptr<Operand> ref, ca, cb;
        SLUICE_TRY(open_operand(c.io, c.reference, verify, &ref));
        SLUICE_TRY(open_operand(c.io, a.a, verify, &ca));
        SLUICE_TRY(open_operand(c.io, a.b, verify, &cb));
        SLUICE_TRY(run_paired(s, *ref, *ca, *cb, po, &r, &text));
    }
    io.out << text;
    return write_receipt(c, r);
}

Status cmd_noise(const CompareArgs& c, const NoiseArgs& a, const Io& io) {
    CompareOptions o;
    SLUICE_TRY(compare_options(c, &o));
    o.keep_tokens = true;
    progress_fn(c.progress, io, &o.progress, &o.progress_interval_s);
    const bool verify = c.verify_hashes != "off";
    Suite s;
    SLUICE_TRY(load_suite(c.suite, SuiteCheck{}, &s));
    std::vector<std::unique_ptr<Operand>> runs;
    std::vector<Operand*> rp;
    for (const auto& p : a.runs) {
        runs.emplace_back();
        SLUICE_TRY(open_operand(c.io, p, verify, &runs.back()));
        rp.push_back(runs.back().get());
    }
    std::unique_ptr<Operand> ref;
    if (!c.reference.empty()) SLUICE_TRY(open_operand(c.io, c.reference, verify, &ref));
    json r;
    std::string text;
    SLUICE_TRY(run_noise(s, rp, ref.get(), o, &r, &text));
    io.out << text;
    return write_receipt(c, r);
}

Status cmd_export(const ExportArgs& a, const Io& io) {
    KldWriteOptions ko;
    ko.sel = selection(a.sel);
    Suite s;
    SLUICE_TRY(load_suite(a.suite, SuiteCheck{}, &s));
    std::unique_ptr<Operand> ref;
    SLUICE_TRY(open_operand(a.io, a.reference, a.verify_hashes != "off", &ref));
    std::string warn;
    SLUICE_TRY(export_kld(s, *ref, ko, a.out, &warn));
    io.err << "warning: " << warn << "\n";
    io.out << "wrote " << a.out << "\n";
    return {};
}

Status cmd_report(const ReportArgs& a, const Io& io) {
    const auto& rs = a.receipts;
    if (!a.tokens.empty() && a.tokens.size() != rs.size())
        return err(Code::usage, "--tokens: " + std::to_string(a.tokens.size()) + " sidecars for " +
                                    std::to_string(rs.size()) + " receipts (one per receipt, in the same order; '-' for none)");
    if (!a.labels.empty() && a.labels.size() != rs.size())
        return err(Code::usage, "--labels: " + std::to_string(a.labels.size()) + " names for " +
                                    std::to_string(rs.size()) + " receipts");
    std::vector<ReportInput> in;
    for (size_t i = 0; i < rs.size(); ++i) {
        ReportInput x;
        x.receipt = rs[i];
        if (!a.tokens.empty() && a.tokens[i] != "-") x.tokens = a.tokens[i];
        if (!a.labels.empty()) x.label = a.labels[i];
        in.push_back(x);
    }
    ReportOptions ro;
    ro.title = a.title;
    ro.hist.lo = a.hist_min;
    ro.hist.hi = a.hist_max;
    // Neither given: the range follows the data (the fixed 1e-8..10 left
    // most of the chart empty when the data sat in 1e-2..1).
    ro.hist.auto_range = !a.hist_given;
    ro.hist.bins_per_decade = a.bins_per_decade;
    Report rep;
    SLUICE_TRY(build_report(in, ro, &rep));
    const std::string html = report_html(rep);
    SLUICE_TRY(write_file_atomic(a.out, html));
    if (!a.json_out.empty()) {
        Status st = write_file_atomic(a.json_out, dump_py(report_json(rep), true));
        if (!st.is_ok()) {
            std::remove(a.out.c_str());  // all outputs or none
            return st;
        }
    }
    io.out << report_text(rep);
    io.out << "report written to " << a.out << "\n";
    return {};
}

}  // namespace sluice::kld
