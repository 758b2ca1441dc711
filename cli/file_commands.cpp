#include "common/checked_file.h"
#include "cli/file_commands.h"

#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/cli_checks.h"
#include "sluice/sluice.h"

// --tokenizer DIR: the side files that make a container speak text. Copied
// after the synthetic weights are written, then checked by opening the
// result metadata-only: BOS and EOS must fall inside --vocab.
namespace {
bool copy_tokenizer(const std::string &from, const std::string &to, std::string *err) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(fs::path(from) / "tokenizer.model", ec)) {
        *err = "--tokenizer: " + from + " has no tokenizer.model";
        return false;
    }
    for (const char *f : {"tokenizer.model", "specials.json", "chat.json", "chat_template.jinja"}) {
        const fs::path src = fs::path(from) / f, dst = fs::path(to) / f, tmp = fs::path(to) / (std::string(f) + ".tmp");
        if (!fs::exists(src, ec)) continue;
        fs::copy_file(src, tmp, fs::copy_options::overwrite_existing, ec);
        if (!ec) fs::rename(tmp, dst, ec);
        if (ec) {
            *err = "--tokenizer: cannot copy " + src.string() + " to " + to + ": " + ec.message();
            return false;
        }
    }
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.metadata_only = 1;
    sluice_ctx *ctx = nullptr;
    bool ok = sluice_open(to.c_str(), &cfg, &ctx) == SLUICE_OK;
    if (ok) {
        const int32_t V = sluice_n_vocab(ctx), bos = sluice_token_bos(ctx), eos = sluice_token_eos(ctx);
        if (bos < 0 || bos >= V || eos >= V) {
            *err = "--tokenizer: its special tokens (BOS " + std::to_string(bos) + ", EOS " + std::to_string(eos) +
                   ") do not fit --vocab " + std::to_string(V) + ": use --vocab " + std::to_string(std::max(bos, eos) + 1) +
                   " or more";
            ok = false;
        }
    } else {
        *err = std::string("--tokenizer: ") + sluice_last_error(ctx);
    }
    sluice_close(ctx);
    if (!ok)
        for (const char *f : {"tokenizer.model", "specials.json", "chat.json", "chat_template.jinja"})
            fs::remove(fs::path(to) / f, ec);
    return ok;
}
}  // namespace

int cmd_synth(const sluice::SynthOptions &o, const std::string &tokenizer) {
    // The output replaces trunk.bin, the banks and the manifest: never in
    // the container the tokenizer is copied from.
    if (std::string why = sluice::output_inside_reason(o.out, tokenizer, "the --tokenizer container"); !why.empty()) {
        std::fprintf(stderr, "sluice synth: --out: %s\n", why.c_str());
        return 2;
    }
    const bool tty = ::isatty(2);
    std::fprintf(stderr, "%s", sluice::describe_synth(o).c_str());
    const double total_gb = (double)sluice::synth_sizes(o).total / 1e9;
    auto t0 = std::chrono::steady_clock::now();
    double last_t = -1, last_f = -1;
    sluice::Status st = sluice::run_synth(o, [&](const std::string &what, double f) {
        const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (tty) {
            if (t - last_t < 0.2 && f < 1.0) return;  // redraw at most 5 times a second
            last_t = t;
            char bar[41];
            const int n = (int)(f * 40);
            for (int i = 0; i < 40; i++) bar[i] = i < n ? '#' : '.';
            bar[40] = 0;
            std::fprintf(stderr, "\r%s [%s] %5.1f%%  %6.1f / %.1f GB  %4.0f s left ", what.c_str(), bar, 100 * f,
                         f * total_gb, total_gb, f > 0.01 ? t / f - t : 0.0);
        } else if ((int)(f * 10) != (int)(last_f * 10)) {
            // Not a terminal (a log, CI): one line per tenth.
            std::fprintf(stderr, "%s %3.0f%%  %.1f / %.1f GB  %.0f s\n", what.c_str(), 100 * f, f * total_gb, total_gb, t);
        }
        last_f = f;
    });
    if (tty) std::fprintf(stderr, "\n");
    if (!st) {
        std::fprintf(stderr, "sluice synth: %s\n", st.message().c_str());
        return 1;
    }
    std::string err;
    if (!tokenizer.empty() && !copy_tokenizer(tokenizer, o.out, &err)) {
        std::fprintf(stderr, "sluice synth: %s\n", err.c_str());
        return 1;
    }
    std::fprintf(stderr, "wrote %s in %.1f s\n", o.out.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
}

// `sluice convert` and `sluice verify`: CLI11 options, the converter's work.
void add_convert_command(CLI::App &app, ConvertArgs *a, CLI::App **out) {
    auto *cv = app.add_subcommand("convert", "convert a Hugging Face checkpoint (or a GGUF file) into a WASTE container");
    cv->option_defaults()->always_capture_default();
    cv->add_option("src", a->src,
                   "Hugging Face checkpoint directory (config.json, *.safetensors), or a GGUF file (kimi-linear, "
                   "kimi-k3, deepseek2; tensors f32/f16/bf16, q4_0/q4_1/q5_0/q5_1/q8_0, q2_k..q6_k, iq4_nl/iq4_xs, mxfp4)");
    cv->add_option("dst", a->dst, "container directory to write (resumed if interrupted)");
    cv->add_option("--src", a->src, "the checkpoint directory or GGUF file (instead of the first positional)");
    cv->add_option("--out,-o", a->dst, "the container directory (instead of the second positional)");
    cv->add_option("--trunk-bits", a->o.trunk_bits, "width of large trunk tensors")->check(CLI::IsMember({3, 4, 8}));
    cv->add_flag("--trunk8", a->o.trunk8, "every quantized trunk tensor Q8G");
    cv->add_option("--stages", a->o.stages, "residual VQ stages")->check(CLI::IsMember({2, 3, 4, 6}));
    cv->add_option("--entries", a->o.entries, "codebook entries")->check(CLI::IsMember({16, 32, 64, 128, 256}));
    cv->add_option("--index-bits", a->o.index_bits, "8, or 6 = VQ4P (needs --stages 4 --entries 64)")
        ->check(CLI::IsMember({6, 8}));
    cv->add_option("--cb-sample", a->o.cb_sample, "experts sampled per layer and kind for k-means")
        ->check(CLI::Range(1, 1 << 20));
    cv->add_option("--kmeans-iters", a->o.kmeans_iters, "Lloyd iterations per stage")->check(CLI::Range(1, 10000));
    cv->add_option("--train-vectors", a->o.train_vectors, "k-means training vectors")->check(CLI::Range(1LL, 1LL << 40));
    cv->add_option("--seed", a->o.seed, "sampling / k-means seed")->check(sluice::unsigned_integer());
    cv->add_option("--jobs,-j", a->o.jobs, "worker threads (0 = all CPUs); never changes the output")
        ->check(CLI::Range(0, 1024));
    cv->add_flag("--force", a->o.force, "start over: remove this converter's files from DST first");
    cv->add_flag("-q,--quiet", a->o.quiet, "no progress lines");
    *out = cv;
}

int cmd_convert(ConvertArgs &a) {
    if (a.src.empty() || a.dst.empty()) {
        std::fprintf(stderr, "sluice convert: expected SRC and DST (or --src SRC --out DST); see sluice convert --help\n");
        return 2;
    }
    a.o.source_dir = a.src;
    a.o.output_dir = a.dst;
    std::string err;
    const int rc = sluice::convert::run_convert(a.o, &err, nullptr);
    if (rc != 0) std::fprintf(stderr, "sluice convert: %s\n", err.c_str());
    return rc == 0 ? 0 : rc == 1 ? 2 : 1;  // 1 = bad arguments -> usage; I/O, bad source, interrupted -> failure
}

CLI::App *add_verify_command(CLI::App &app, VerifyArgs *a) {
    auto *v = app.add_subcommand("verify", "check a container's record headers, CRCs and trunk bounds");
    v->add_option("container", a->o.container_dir, "container directory")->required();
    v->add_option("--source", a->o.source_dir, "also print the dequantized-vs-source error of each tensor");
    v->add_flag("--per-expert", a->o.per_expert, "with --source: one line per expert matrix");
    v->add_option("--jobs,-j", a->o.jobs, "worker threads (0 = all CPUs)")->check(CLI::Range(0, 1024));
    return v;
}

int cmd_verify(VerifyArgs &a) {
    sluice::convert::VerifyReport rep;
    std::string err;
    const int rc = sluice::convert::run_verify(a.o, &rep, &err, nullptr);
    if (rep.records_checked > 0 || !rep.problems.empty() || !rep.trunk.empty())
        std::fputs(sluice::convert::format_verify_report(rep).c_str(), stdout);
    if (rc != 0) std::fprintf(stderr, "sluice verify: %s\n", err.c_str());
    else std::printf("verify: OK\n");
    return rc == 0 ? 0 : 1;
}

CLI::App *add_export_gguf_command(CLI::App &app, ExportGgufArgs *a) {
    auto *x = app.add_subcommand("export-gguf", "write a container as a GGUF file that llama.cpp loads");
    x->option_defaults()->always_capture_default();
    x->add_option("container", a->container, "container directory")->required();
    x->add_option("out", a->out, "the .gguf file to write")->required();
    x->add_option("--trunk-type", a->trunk_type, "trunk matrices: f32, f16, q8_0 or q4_0 (norms and vectors stay f32)")
        ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0"}));
    x->add_option("--expert-type", a->expert_type,
                  "routed experts, rebuilt dense from their VQ codes: f32 or f16 (exact), q8_0 or q4_0 (requantized)")
        ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0"}));
    x->add_flag("-q,--quiet", a->quiet, "no progress line");
    return x;
}

int cmd_export_gguf(ExportGgufArgs &a) {
    sluice::gguf::ExportOptions o;
    o.container = a.container;
    o.out = a.out;
    if (!sluice::gguf::parse_type(a.trunk_type, &o.trunk) || !sluice::gguf::parse_type(a.expert_type, &o.experts)) {
        std::fprintf(stderr, "sluice export-gguf: unknown tensor type\n");
        return 2;
    }
    sluice::gguf::ExportReport rep;
    const auto t0 = std::chrono::steady_clock::now();
    int last_pct = -1;
    auto progress = [&](uint64_t done, uint64_t total) {
        const int pct = total ? (int)(100 * done / total) : 100;
        if (a.quiet || pct == last_pct || !isatty(2)) return;
        last_pct = pct;
        std::fprintf(stderr, "\rexport-gguf: %3d%% of %.1f MiB", pct, (double)total / (1 << 20));
    };
    const sluice::Status st = sluice::gguf::export_gguf(o, &rep, progress);
    if (!a.quiet && last_pct >= 0) std::fputc('\n', stderr);
    if (!st.is_ok()) {
        std::fprintf(stderr, "sluice export-gguf: %s\n", st.message().c_str());
        return st.code() == SLUICE_E_ARG ? 2 : 1;
    }
    for (const auto &n : rep.notes) std::printf("note: %s\n", n.c_str());
    std::printf("wrote %s: %s, %llu tensors, %.1f MiB in %.1f s\n", a.out.c_str(), rep.arch.c_str(),
                (unsigned long long)rep.tensors, (double)rep.bytes / (1 << 20),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
}
