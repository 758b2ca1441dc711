// `sluice kld`: the option grammar (CLI11, as every other subcommand) and
// the dispatch to cli/kld/kld_commands.cpp. A usage error prints one line
// naming what is wrong, then where the options are, and exits 2; a failure
// exits with its KLD.md §7.9 code.
#include "cli/kld/kld_main.h"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "cli/kld/kld_args.h"

namespace sluice::kld {

namespace {

const char* kSelFooter =
    "SEL: --windows 0-7,16 | --start-window A --stop-window B | --quick (the stratified 8-window screen)";
const char* kProgressFooter =
    "progress: a bar on stderr when it is a terminal; --progress forces it (plain lines when not a terminal),\n"
    "--no-progress turns it off. Never on stdout or in receipts.";
const char* kSourcesFooter =
    "sources: NAME=FILE:W takes W windows of --context T tokens from FILE (UTF-8 text for\n"
    "  --source, tokenized with --tokenizer CONTAINER; token ids for --tokens-source) and labels them\n"
    "  with the domain NAME, e.g. --source prose=book.txt:8 --source code=main.c:4\n"
    "  Sources keep their command-line order, which numbers the windows.";

void add_selection(CLI::App* c, SelArgs* s) {
    auto* g = c->add_option_group("window selection (SEL)");
    g->add_option("--windows", s->windows, "windows to use: a list with ranges, e.g. 0-7,16,24");
    g->add_flag("--quick", s->quick, "the stratified quick set {0,1,2,3,16,17,24,25}");
    g->add_option("--start-window", s->start, "first window (with --stop-window)");
    g->add_option("--stop-window", s->stop, "one past the last window (-1: to the end)");
}

void add_progress(CLI::App* c, ProgressArgs* p) {
    // Both given is refused after parsing (main_kld_checked), in the words
    // the tests and scripts know.
    c->add_flag("--progress", p->on, "show progress on stderr even when it is not a terminal");
    c->add_flag("--no-progress", p->off, "no progress display");
}

void add_io(CLI::App* c, IoArgs* io) {
    c->add_option("--io", io->mode, "operand reads: O_DIRECT or through the page cache")
        ->check(CLI::IsMember({"direct", "buffered"}));
    c->add_option("--read-chunk", io->read_chunk, "bytes per read of an operand file")
        ->check(CLI::Range(int64_t(4096), int64_t(1) << 30));
}

void add_verify(CLI::App* c, std::string* v) {
    c->add_option("--verify-hashes", *v, "check every operand file's SHA-256 against its manifest")
        ->check(CLI::IsMember({"on", "off"}));
}

// The options compare, paired and noise share.
void add_compare_options(CLI::App* c, CompareArgs* a) {
    add_selection(c, &a->sel);
    add_io(c, &a->io);
    add_progress(c, &a->progress);
    add_verify(c, &a->verify_hashes);
    c->add_option("--bootstrap-samples", a->bootstrap_samples, "window-bootstrap resamples for the 95% CI")
        ->check(CLI::Range(int64_t(0), int64_t(1) << 30));
    c->add_option("--seed", a->seed, "bootstrap seed");
    c->add_option("--threads", a->threads, "worker threads")->check(CLI::Range(1, 4096));
    c->add_option("--max-ram", a->max_ram, "RAM cap in bytes for the plan (refused above it, exit 7)");
    c->add_option("--row-block", a->row_block, "rows scored per block")->check(CLI::Range(1, 1 << 20));
    c->add_option("--precision", a->precision, "fast (SIMD kernels) or fp64 (the scalar reference)")
        ->check(CLI::IsMember({"fast", "fp64"}));
    c->add_option("--compat", a->compat, "replay another tool's numerics")->check(CLI::IsMember({"festr2-v0", "none"}));
    c->add_option("--torch-lanes", a->torch_lanes, "with --compat festr2-v0: 8 (torch AVX2) or 16 (torch AVX-512)")
        ->check(CLI::IsMember({8, 16}));
    c->add_flag("--llamacpp-block", a->llamacpp_block, "also report llama.cpp's statistics block");
    c->add_option("--llamacpp-positions", a->llamacpp_positions, "positions llama.cpp scores")
        ->check(CLI::IsMember({"all", "second-half"}));
    c->add_option("--noise", a->noise, "a noise receipt (sluice kld noise) to judge differences against");
    c->add_flag("--finite-only", a->finite_only, "skip rows with non-finite values instead of refusing them");
    c->add_flag("--no-js", a->no_js, "skip the Jensen-Shannon divergence");
    c->add_option("--json", a->json_out, "write the receipt here");
    c->add_option("--output", a->output_out, "the same as --json");
}

CLI::App* add_suite_commands(CLI::App& app, SuiteMakeArgs* mk, SuiteVerifyArgs* vf, CLI::App** make,
                             CLI::App** verify) {
    auto* suite = app.add_subcommand("suite", "make or verify a suite of token windows");
    suite->require_subcommand(1);
    *make = suite->add_subcommand("make", "write a suite of W windows per source (KLD.md §1.4)");
    (*make)->option_defaults()->always_capture_default();
    (*make)->add_option("--out", mk->out, "suite directory to write")->required();
    (*make)->add_option("--context", mk->context, "tokens per window (T)")->check(CLI::Range(2, 1 << 24));
    // Bound for parsing only: collect_sources() reads them in order.
    (*make)->add_option("--source", mk->text_specs,
                        "NAME=FILE:W: W windows from the UTF-8 text FILE, domain NAME (repeatable)")
        ->allow_extra_args(false);
    (*make)->add_option("--tokens-source", mk->token_specs, "NAME=FILE:W: the same from a file of token ids (repeatable)")
        ->allow_extra_args(false);
    (*make)->add_option("--tokenizer", mk->tokenizer, "container whose tokenizer encodes the --source texts");
    (*make)->add_flag("--force", mk->force, "replace an existing suite (atomically: the old one stays until the new is whole)");
    (*make)->footer(std::string(kSourcesFooter) + "\n");

    *verify = suite->add_subcommand("verify", "check a suite's manifest, token files and hashes");
    (*verify)->option_defaults()->always_capture_default();
    (*verify)->add_option("suite", vf->suite, "suite directory")->required();
    (*verify)->add_option("--expect-suite-hash", vf->expect_suite_hash, "refuse unless the suite hash is this");
    (*verify)->add_option("--vocab", vf->vocab, "refuse token ids >= V (0: no check)");
    return suite;
}

// --source and --tokens-source in the order given: the order numbers the
// windows, and CLI11 keeps each option's values apart.
void collect_sources(CLI::App* make, SuiteMakeArgs* mk) {
    const CLI::Option* src = make->get_option("--source");
    const CLI::Option* tok = make->get_option("--tokens-source");
    size_t is = 0, it = 0;
    for (const CLI::Option* o : make->parse_order()) {
        if (o == src && is < src->results().size()) mk->sources.emplace_back(src->results()[is++], false);
        else if (o == tok && it < tok->results().size()) mk->sources.emplace_back(tok->results()[it++], true);
    }
}

int finish(const Status& st, std::ostream& e) {
    if (st.is_ok()) return 0;
    const Code c = code_of(st);
    e << "sluice kld: error (" << code_name(c) << "): " << st.message() << "\n";
    if (c == Code::usage) e << "(`sluice kld COMMAND --help` lists its options)\n";
    return exit_code(st);
}

int main_kld_checked(int argc, char** argv, std::ostream& out, std::ostream& e, const KldHooks& h) {
    CLI::App app{"sluice kld: the KL-divergence quality suite (../shared/spec/KLD.md §7)", "sluice kld"};
    app.require_subcommand(1);
    app.footer(std::string(kSelFooter) + "\n" + kProgressFooter + "\n");

    SuiteMakeArgs mk;
    SuiteVerifyArgs vf;
    CLI::App *make = nullptr, *verify = nullptr;
    add_suite_commands(app, &mk, &vf, &make, &verify);

    std::vector<std::string> inspect_files;
    auto* inspect = app.add_subcommand("inspect", "safetensors / .kld header, metadata, BF16-exactness scan");
    inspect->add_option("files", inspect_files, "files to describe")->required();

    CaptureArgs ca;
    auto* capture = app.add_subcommand("capture", "write reference logits of a model over a suite");
    capture->option_defaults()->always_capture_default();
    capture->add_option("--model", ca.model, "container to run")->required();
    capture->add_option("--suite", ca.suite, "suite directory")->required();
    capture->add_option("--out", ca.out, "capture directory (resumed: verified windows are skipped)")->required();
    add_selection(capture, &ca.sel);
    add_progress(capture, &ca.progress);
    capture->add_option("--align", ca.align, "tensor data alignment in the files")->check(CLI::IsMember({8, 4096}));
    capture->add_option("--chunk", ca.chunk, "tokens per engine call")->check(CLI::Range(1, 1 << 20));
    capture->add_option("--run-name", ca.run_name, "recorded in the manifest");
    capture->add_option("--threads", ca.threads, "engine threads (0: automatic)")->check(CLI::Range(0, 4096));
    capture->footer(std::string(kSelFooter) + "\n");

    CompareArgs cc;
    CompareOnlyArgs co;
    auto* compare = app.add_subcommand(
        "compare", "KL(reference || candidate) over a suite, or against a llama.cpp .kld file (--reference BASE.kld)");
    compare->option_defaults()->always_capture_default();
    compare->add_option("--suite", cc.suite, "suite directory (not with a .kld reference)");
    compare->add_option("--reference", cc.reference, "reference capture directory, or a llama.cpp BASE.kld")->required();
    compare->add_option("--candidate", co.candidate, "candidate capture directory");
    compare->add_option("--model", co.model, "candidate container, run in-process (no candidate files)");
    compare->add_option("--expect-suite-hash", co.expect_suite_hash, "refuse unless the suite hash is this");
    compare->add_option("--tokens", co.tokens, "write the per-token KL sidecar (for report --tokens)");
    compare->add_option("--bos", co.bos,
                        "with a .kld reference: the BOS id llama.cpp substituted for token 0 of every chunk (its "
                        "vocabulary adds BOS; the file keeps the original token); default: none")
        ->check(CLI::Range(0, 1 << 30));
    add_compare_options(compare, &cc);
    compare->footer(std::string("stdout: the totals and a per-domain table; with --json, first the per-window JSON "
                                "lines.\n") + kSelFooter + "\n" + kProgressFooter + "\n");

    CompareArgs pc;
    PairedArgs pa;
    auto* paired = app.add_subcommand("paired", "candidate A against candidate B on the same windows (KLD.md §7.6)");
    paired->option_defaults()->always_capture_default();
    paired->add_option("--suite", pc.suite, "suite directory");
    paired->add_option("--reference", pc.reference, "reference capture directory");
    paired->add_option("--a", pa.a, "candidate A capture directory");
    paired->add_option("--b", pa.b, "candidate B capture directory");
    paired->add_option("--receipts", pa.receipts, "A.json B.json: two compare receipts instead of captures");
    auto* nd = paired->add_option("--noise-diff", pa.noise_diff, "differences below this are noise (default: "
                                                                 "from --noise, else 0.004)");
    auto* tt = paired->add_option("--tie-tolerance", pa.tie_tolerance, "per-window differences within this are ties");
    add_compare_options(paired, &pc);
    paired->footer(std::string(kSelFooter) + "\n" + kProgressFooter + "\n");

    CompareArgs nc;
    NoiseArgs na;
    auto* noise = app.add_subcommand("noise", "the repeat-noise floor of two or more captures of one model (§7.7)");
    noise->option_defaults()->always_capture_default();
    noise->add_option("--suite", nc.suite, "suite directory")->required();
    noise->add_option("--runs", na.runs, "RUN1 RUN2 [RUN...]: capture directories of the same model")->required();
    noise->add_option("--reference", nc.reference, "also compare each run against this reference");
    add_compare_options(noise, &nc);
    noise->footer(std::string(kSelFooter) + "\n" + kProgressFooter + "\n");

    ExportArgs ea;
    auto* exp = app.add_subcommand("export-kld", "write a reference as a llama.cpp .kld file");
    exp->option_defaults()->always_capture_default();
    exp->add_option("--suite", ea.suite, "suite directory")->required();
    exp->add_option("--reference", ea.reference, "reference capture directory")->required();
    exp->add_option("--out", ea.out, "BASE.kld to write")->required();
    add_selection(exp, &ea.sel);
    add_io(exp, &ea.io);
    add_verify(exp, &ea.verify_hashes);
    exp->footer(std::string(kSelFooter) + "\n");

    ReportArgs ra;
    auto* report = app.add_subcommand("report", "rank compare receipts in one HTML page (and JSON)");
    report->option_defaults()->always_capture_default();
    report->add_option("--receipts", ra.receipts, "A.json [B.json ...]: compare receipts")->required();
    report->add_option("--out", ra.out, "REPORT.html to write")->required();
    report->add_option("--tokens", ra.tokens, "one per-token sidecar per receipt, in order ('-' for none)");
    report->add_option("--labels", ra.labels, "one name per receipt, in order");
    report->add_option("--json", ra.json_out, "also write the report as JSON");
    report->add_option("--title", ra.title, "page title");
    auto* hmin = report->add_option("--hist-min", ra.hist_min, "histogram low edge (neither: the data's decades)");
    auto* hmax = report->add_option("--hist-max", ra.hist_max, "histogram high edge (neither: the data's decades)");
    report->add_option("--bins-per-decade", ra.bins_per_decade, "histogram bins per decade")->check(CLI::Range(1, 100));

    // `sluice kld help [COMMAND]`: the same as --help.
    if (argc >= 2 && std::string(argv[1]) == "help") {
        CLI::App* sub = nullptr;
        try {
            if (argc >= 3) sub = app.get_subcommand(argv[2]);
        } catch (const CLI::Error&) {  // not a command: the overview
        }
        out << (sub ? sub->help() : app.help());
        return 0;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& ex) {
        return app.exit(ex, out, e);
    } catch (const CLI::CallForAllHelp& ex) {
        return app.exit(ex, out, e);
    } catch (const CLI::ParseError& ex) {
        // One line saying what is wrong, not the whole usage.
        return finish(err(Code::usage, ex.what()), e);
    }

    for (const ProgressArgs* p : {&ca.progress, &cc.progress, &pc.progress, &nc.progress})
        if (p->on && p->off) return finish(err(Code::usage, "give --progress or --no-progress, not both"), e);
    const Io io{out, e, h};
    Status st;
    if (*make) {
        collect_sources(make, &mk);
        st = cmd_suite_make(mk, io);
    } else if (*verify) {
        st = cmd_suite_verify(vf, io);
    } else if (*inspect) {
        st = cmd_inspect(inspect_files, io);
    } else if (*capture) {
        st = cmd_capture(ca, io);
    } else if (*compare) {
        cc.torch_lanes_given = compare->count("--torch-lanes") > 0;
        st = cmd_compare(cc, co, io);
    } else if (*paired) {
        pc.torch_lanes_given = paired->count("--torch-lanes") > 0;
        pa.noise_diff_given = nd->count() > 0;
        pa.tie_tolerance_given = tt->count() > 0;
        st = cmd_paired(pc, pa, io);
    } else if (*noise) {
        nc.torch_lanes_given = noise->count("--torch-lanes") > 0;
        st = cmd_noise(nc, na, io);
    } else if (*exp) {
        st = cmd_export(ea, io);
    } else if (*report) {
        ra.hist_given = hmin->count() > 0 || hmax->count() > 0;
        st = cmd_report(ra, io);
    }
    return finish(st, e);
}

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

}  // namespace sluice::kld
