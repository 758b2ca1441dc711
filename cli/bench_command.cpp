// sluice bench MODEL: prefill and decode throughput, expert cache hit rate,
// bytes read per token, the achieved read rate and peak RSS against the
// budget, in one run. A quick look, not a benchmark of record: those live
// in bench/ with a same-run baseline (docs/PERF.md).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "sluice/sluice.h"

namespace sluice {

struct BenchCommand {
    CLI::App *sc = nullptr;
    TextHooks hooks;
    std::string model;
    int n = 32, prompt = 64;
    bool json = false, progress = false, no_progress = false;
};

std::shared_ptr<BenchCommand> add_bench_command(CLI::App &app, TextHooks hooks) {
    auto b = std::make_shared<BenchCommand>();
    b->hooks = hooks;
    b->sc = app.add_subcommand("bench", "prefill and decode tok/s, hit rate, GB read per token, read rate, peak RSS");
    b->sc->add_option("model", b->model, "container directory")->required();
    b->sc->add_option("-n", b->n, "tokens to decode (default 32)")->check(CLI::Range(1, 1 << 20));
    b->sc->add_option("--prompt", b->prompt, "prompt tokens to prefill (default 64)")->check(CLI::Range(1, 1 << 20));
    b->sc->add_flag("--json", b->json, "print one JSON object");
    b->sc->add_flag("--progress", b->progress, "progress on stderr even when it is not a terminal");
    b->sc->add_flag("--no-progress", b->no_progress, "no progress");
    hooks.add_common(b->sc);
    return b;
}

namespace {
double since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

bool run_bench_command(BenchCommand &b, int *rc) {
    if (!*b.sc) return false;
    *rc = 1;
    // Checked before the model loads: a usage error says so at once.
    const int ctx_opt = b.sc->count("--ctx") ? b.sc->get_option("--ctx")->as<int>() : 0;
    const int context = ctx_opt > 0 ? ctx_opt : 4096;  // sluice_config's default
    if ((int64_t)b.prompt + b.n > context) {
        std::fprintf(stderr, "sluice bench: --prompt %d + -n %d exceed the context of %d (raise --ctx)\n", b.prompt, b.n,
                     context);
        *rc = 2;
        return true;
    }
    sluice_ctx *ctx = b.hooks.open(b.model, false);
    if (!ctx) return true;
    auto done = [&](int code) {
        if (b.hooks.before_close) b.hooks.before_close(ctx);
        sluice_close(ctx);
        *rc = code;
        return true;
    };
    sluice_memory_plan plan{};
    sluice_memory_plan_get(ctx, &plan);
    const int32_t V = sluice_n_vocab(ctx);
    // A fixed prompt of ordinary tokens (below BOS, where the specials start
    // when there is a tokenizer): the same bytes every run, any container.
    const int32_t bos = sluice_token_bos(ctx);
    const int32_t span = bos > 0 && bos < V ? bos : V;
    std::vector<int32_t> ids((size_t)b.prompt);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = (int32_t)((1 + i * 7919) % (size_t)span);
    std::vector<float> logits((size_t)V);
    const bool show = !b.no_progress && !b.hooks.is_quiet() && (b.progress || ::isatty(2));

    if (show) std::fprintf(stderr, "sluice bench: prefill %d tokens...", b.prompt);
    auto t0 = std::chrono::steady_clock::now();
    sluice_status st = sluice_eval(ctx, ids.data(), ids.size(), logits.data());
    const double t_prefill = since(t0);
    if (show) std::fprintf(stderr, " %.3f s\n", t_prefill);
    if (st != SLUICE_OK) {
        std::fprintf(stderr, "sluice bench: prefill: %s: %s\n", sluice_status_name(st), sluice_last_error(ctx));
        return done(1);
    }
    sluice_stats s1{}, s2{};
    sluice_stats_get(ctx, &s1);
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < b.n; i++) {
        // Greedy, through EOS: the measure is tokens, not text.
        int32_t next = (int32_t)(std::max_element(logits.begin(), logits.end()) - logits.begin());
        st = sluice_eval(ctx, &next, 1, logits.data());
        if (st != SLUICE_OK) {
            if (show) std::fprintf(stderr, "\n");
            std::fprintf(stderr, "sluice bench: decode token %d: %s: %s\n", i, sluice_status_name(st),
                         sluice_last_error(ctx));
            return done(1);
        }
        if (show && (::isatty(2) ? true : (i + 1) % std::max(1, b.n / 10) == 0 || i + 1 == b.n)) {
            const double t = since(t0);
            std::fprintf(stderr, ::isatty(2) ? "\r\033[Ksluice bench: decode %d/%d  %.1f tok/s" : "sluice bench: decode %d/%d  %.1f tok/s\n",
                         i + 1, b.n, (i + 1) / std::max(t, 1e-9));
        }
    }
    const double t_decode = since(t0);
    if (show && ::isatty(2)) std::fprintf(stderr, "\n");
    sluice_stats_get(ctx, &s2);

    const uint64_t fetches = s2.expert_fetches - s1.expert_fetches;
    const uint64_t hits = s2.expert_cache_hits - s1.expert_cache_hits;
    const uint64_t ra = s2.expert_readahead_hits - s1.expert_readahead_hits;
    const uint64_t dbytes = s2.expert_bytes_read - s1.expert_bytes_read;
    auto frac = [&](uint64_t x) { return fetches ? (double)x / (double)fetches : 0.0; };
    const double gb_per_tok = (double)dbytes / 1e9 / b.n;
    const double read_gbs = s2.seconds_read > 0 ? (double)s2.expert_bytes_read / s2.seconds_read / 1e9 : 0.0;
    const unsigned long long rss = peak_rss_bytes();
    sluice_info in{};
    sluice_info_get(ctx, &in);
    const double pf = b.prompt / std::max(t_prefill, 1e-9), dc = b.n / std::max(t_decode, 1e-9);
    if (b.json) {
        std::printf("{\"model\":%s,\"prompt_tokens\":%d,\"decode_tokens\":%d,\"threads\":%d,\"backend\":%s,"
                    "\"prefill_s\":%.6f,\"prefill_tok_s\":%.3f,\"decode_s\":%.6f,\"decode_tok_s\":%.3f,"
                    "\"expert_fetches\":%llu,\"hit_rate\":%.6f,\"cache_hit_rate\":%.6f,\"readahead_hit_rate\":%.6f,"
                    "\"decode_bytes_read\":%llu,\"gb_read_per_token\":%.6f,\"bytes_read\":%llu,\"read_gb_s\":%.4f,"
                    "\"io_engine\":%s,\"cache_policy\":%s,\"peak_rss_bytes\":%llu,\"budget_bytes\":%llu,"
                    "\"cache_bytes\":%llu,\"within_budget\":%s}\n",
                    json_quote(b.model).c_str(), b.prompt, b.n, in.n_threads, json_quote(in.backend).c_str(), t_prefill,
                    pf, t_decode, dc, (unsigned long long)fetches, frac(hits + ra), frac(hits), frac(ra),
                    (unsigned long long)dbytes, gb_per_tok, (unsigned long long)s2.expert_bytes_read, read_gbs,
                    json_quote(s2.io_engine).c_str(), json_quote(s2.cache_policy).c_str(), rss,
                    (unsigned long long)plan.budget, (unsigned long long)plan.cache,
                    rss <= plan.budget ? "true" : "false");
    } else {
        std::printf("sluice bench %s: %d prompt tokens, %d decoded; %s, %d threads\n", b.model.c_str(), b.prompt, b.n,
                    in.backend, in.n_threads);
        std::printf("  prefill  %10.1f tok/s  (%.3f s)\n", pf, t_prefill);
        std::printf("  decode   %10.1f tok/s  (%.3f s)\n", dc, t_decode);
        std::printf("  experts  %5.1f%% of %llu decode fetches found ready (cache %.1f%%, read-ahead %.1f%%)\n",
                    100 * frac(hits + ra), (unsigned long long)fetches, 100 * frac(hits), 100 * frac(ra));
        std::printf("  reads    %.4f GB (%.3f MiB) per decoded token; %.2f GB/s while reading (%s, %s cache)\n",
                    gb_per_tok, (double)dbytes / 1048576.0 / b.n, read_gbs, s2.io_engine, s2.cache_policy);
        std::printf("  memory   peak RSS %.3f GiB of a %.3f GiB budget (%.0f%%)\n", rss / 1073741824.0,
                    plan.budget / 1073741824.0, plan.budget ? 100.0 * (double)rss / (double)plan.budget : 0.0);
    }
    return done(0);
}

}  // namespace sluice
