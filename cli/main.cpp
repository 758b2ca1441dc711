// sluice: the command-line client of include/sluice/sluice.h.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli_checks.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/file_commands.h"
#include "common/checked_file.h"
#include "common/parse_number.h"
#include "common/units.h"

#include <unistd.h>
#include "sluice/sluice.h"

namespace {

struct Common {
    int threads = 0;
    std::string backend = "auto";
    bool verify = false;
    int chunk = 0, wave = 0;
    int ctx_len = 0;
    std::string budget = "0";
    bool no_cache = false, no_readahead = false, no_lookahead = false, no_direct = false, no_hotlist = false;
    int io_threads = 0, io_depth = 0;
    std::string io_engine = "auto", cache_policy = "freq";
    std::string hotlist, learn;
    std::string cpus, dump_routes;
    bool exclusive_open = false, mlock = false, quiet = false;
    bool no_pressure_watch = false;
    std::string pressure_reserve = "0";
};

void add_common(CLI::App *app, Common *c) {
    app->add_option("--threads,-t", c->threads, "worker threads (0 = all CPUs)")->check(CLI::Range(0, 1024));
    app->add_option("--backend", c->backend, "kernel path: auto, scalar, avx2, avx512, neon")
        ->check(CLI::IsMember({"auto", "scalar", "avx2", "avx512", "neon"}));
    app->add_flag("--verify", c->verify, "check the CRC32 of every expert record read");
    app->add_option("--chunk", c->chunk, "prefill chunk size in tokens (default 64)")->check(CLI::Range(0, 4096));
    app->add_option("--wave", c->wave,
                    "prompt tokens per expert-major prefill wave: each routed record is read once per wave "
                    "(default 0: the memory plan's, up to --ctx)")
        ->check(CLI::Range(0, 1 << 24));
    app->add_option("--ctx", c->ctx_len, "maximum context length (default 4096)")->check(CLI::Range(0, 1 << 24));
    app->add_option("--budget", c->budget, "hard RAM budget, e.g. 2G (default 0: choose; see `sluice plan`)");
    app->add_flag("--no-cache", c->no_cache, "no expert cache beyond the records in use");
    app->add_option("--io-threads", c->io_threads, "expert reads in flight, as --io-depth (-1 = synchronous reads)")
        ->check(CLI::Range(-1, 64));
    app->add_option("--io-depth", c->io_depth, "expert reads in flight (default 8)")->check(CLI::Range(0, 256));
    app->add_option("--io-engine", c->io_engine, "how expert reads run: auto (io_uring if the kernel allows), uring, threads")
        ->check(CLI::IsMember({"auto", "uring", "threads"}));
    app->add_option("--cache-policy", c->cache_policy, "expert cache policy: freq (default), pred (learned next-visit probability), lfru, lru")
        ->check(CLI::IsMember({"freq", "pred", "lfru", "lru"}));
    app->add_flag("--no-readahead", c->no_readahead, "read a layer's experts only when they are needed");
    app->add_flag("--no-lookahead", c->no_lookahead, "no next-layer router guesses");
    app->add_flag("--no-direct", c->no_direct, "buffered reads instead of O_DIRECT");
    app->add_flag("--no-hotlist", c->no_hotlist, "do not pre-warm the cache from usage.waste");
    app->add_option("--hotlist", c->hotlist, "usage file to pre-warm the cache from");
    app->add_option("--learn", c->learn, "write per-expert usage (the hotlist) to this file at exit");
    app->add_option("--cpus", c->cpus, "pin the compute pool to these CPUs, e.g. 0-5 or 0-2,6-8 (--threads 0: one per CPU)")
        ->check(sluice::cpu_list());
    app->add_flag("--exclusive-open", c->exclusive_open,
                  "hold an exclusive advisory lock on the container; refused while another process has it open");
    app->add_flag("--mlock", c->mlock, "lock the trunk in RAM (needs RLIMIT_MEMLOCK, see ulimit -l)");
    app->add_option("--dump-routes", c->dump_routes,
                    "write the experts each MoE layer picks, one JSON line per position (layout of ../shared/traces)");
    app->add_flag("--no-pressure-watch", c->no_pressure_watch,
                  "keep the expert cache at its planned size even when other processes need the memory");
    app->add_option("--pressure-reserve", c->pressure_reserve,
                    "available memory to keep for other processes before the cache shrinks, e.g. 1G (default "
                    "max(512 MiB, 5 % of RAM))");
    app->add_flag("-q,--quiet", c->quiet, "print only the answer: no start-up, budget or statistics lines");
}

bool budget_bytes(const Common &c, uint64_t *out);

sluice_config to_config(const Common &c) {
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.n_threads = c.threads;
    cfg.backend = c.backend == "scalar"   ? SLUICE_BACKEND_SCALAR
                  : c.backend == "avx2"   ? SLUICE_BACKEND_AVX2
                  : c.backend == "avx512" ? SLUICE_BACKEND_AVX512
                  : c.backend == "neon"   ? SLUICE_BACKEND_NEON
                                          : SLUICE_BACKEND_AUTO;
    cfg.verify_records = c.verify ? 1 : 0;
    cfg.prefill_chunk = c.chunk;
    cfg.prefill_wave = c.wave;
    cfg.max_context = c.ctx_len;
    budget_bytes(c, &cfg.budget_bytes);
    cfg.no_cache = c.no_cache;
    cfg.io_threads = c.io_threads;
    cfg.io_depth = c.io_depth;
    cfg.io_engine = c.io_engine == "uring" ? SLUICE_IO_URING : c.io_engine == "threads" ? SLUICE_IO_THREADS : SLUICE_IO_AUTO;
    cfg.cache_policy = c.cache_policy.c_str();
    cfg.no_readahead = c.no_readahead;
    cfg.no_lookahead = c.no_lookahead;
    cfg.no_direct_io = c.no_direct;
    cfg.no_hotlist = c.no_hotlist;
    cfg.hotlist = c.hotlist.empty() ? nullptr : c.hotlist.c_str();
    cfg.cpus = c.cpus.empty() ? nullptr : c.cpus.c_str();
    cfg.exclusive_open = c.exclusive_open ? 1 : 0;
    cfg.lock_memory = c.mlock ? 1 : 0;
    cfg.no_pressure_watch = c.no_pressure_watch ? 1 : 0;
    sluice::parse_size(c.pressure_reserve, &cfg.pressure_reserve_bytes);  // checked in main
    if (!c.quiet) {
        cfg.progress = sluice::print_startup_progress;
        cfg.progress_user = nullptr;
    }
    return cfg;
}

bool budget_bytes(const Common &c, uint64_t *out) { return sluice::parse_size(c.budget, out); }

// Writes the hotlist if --learn was given; false (after saying why) when it
// could not be written, so the command exits non-zero.
bool maybe_learn(sluice_ctx *ctx, const Common &c) {
    if (c.learn.empty()) return true;
    if (sluice_save_usage(ctx, c.learn.c_str()) != SLUICE_OK) {
        std::fprintf(stderr, "sluice: --learn: %s\n", sluice_last_error(ctx));
        return false;
    }
    return true;
}

// Token ids past the vocabulary are a usage error (exit 2), found before
// any evaluation.
bool ids_in_vocab(const std::vector<int32_t> &ids, int V, const char *cmd) {
    for (size_t i = 0; i < ids.size(); i++)
        if (ids[i] >= V) {
            std::fprintf(stderr, "sluice %s: --ids: token %d (position %zu) is not below the vocabulary size %d\n", cmd,
                         ids[i], i, V);
            return false;
        }
    return true;
}

void print_stats(sluice_ctx *ctx) {
    sluice_stats s;
    if (sluice_stats_get(ctx, &s) != SLUICE_OK) return;
    const uint64_t f = s.expert_fetches;
    auto pct = [&](uint64_t x) { return f ? 100.0 * (double)x / (double)f : 0.0; };
    // Starts on its own line: a generation may have left the cursor mid-line.
    std::fprintf(stderr,
                 "\nstats: %llu tokens in %.3f s; experts fetched %llu: cache %llu (%.1f%%), read-ahead %llu (%.1f%%), "
                 "waited-for reads %llu (%.1f%%); records read %llu, %.2f MiB (%.2f GB/s while reading, %s, %s depth "
                 "%d); io wait %.3f s, compute %.3f s; cache %.1f of %.1f MiB (%s)\n",
                 (unsigned long long)s.tokens_evaluated, s.seconds_eval, (unsigned long long)f,
                 (unsigned long long)s.expert_cache_hits, pct(s.expert_cache_hits),
                 (unsigned long long)s.expert_readahead_hits, pct(s.expert_readahead_hits),
                 (unsigned long long)s.expert_sync_reads, pct(s.expert_sync_reads), (unsigned long long)s.expert_reads,
                 s.expert_bytes_read / 1048576.0, s.seconds_read > 0 ? s.expert_bytes_read / s.seconds_read / 1e9 : 0.0,
                 s.direct_io ? "O_DIRECT" : "buffered: the filesystem refused O_DIRECT", s.io_engine, s.io_depth,
                 s.seconds_io_wait, s.seconds_eval - s.seconds_io_wait, s.cache_bytes_used / 1048576.0,
                 s.cache_bytes / 1048576.0, s.cache_policy);
    if (s.prefill_moe_layers > 0) {
        // How many times each MoE layer's routed records were read for the
        // last prompt (1.00 = once; the expert-major prefill's measure).
        std::vector<double> per((size_t)s.prefill_moe_layers);
        sluice_prefill_layer_reads(ctx, per.data(), (int32_t)per.size());
        std::string list;
        for (double r : per) list += (list.empty() ? "" : " ") + std::to_string(r).substr(0, 4);
        std::fprintf(stderr,
                     "stats: prefill: last prompt %llu tokens in %llu waves (largest %d); records read per routed "
                     "record, per MoE layer: mean %.2f, max %.2f [%s]\n",
                     (unsigned long long)s.prefill_tokens, (unsigned long long)s.prefill_waves, s.prefill_wave_tokens,
                     s.prefill_reads_per_record_mean, s.prefill_reads_per_record_max, list.c_str());
    }
    if (s.lookahead_guesses)
        std::fprintf(stderr, "stats: lookahead guessed %llu records, %llu used, %llu withdrawn before reading\n",
                     (unsigned long long)s.lookahead_guesses, (unsigned long long)s.lookahead_guesses_used,
                     (unsigned long long)s.lookahead_guesses_dropped);
    if (s.images_encoded)
        std::fprintf(stderr, "stats: vision: %llu images decoded and encoded in %.3f s\n",
                     (unsigned long long)s.images_encoded, s.seconds_vision);
    if (!s.pressure_watch)
        std::fprintf(stderr, "stats: memory pressure: not watched (--no-pressure-watch or no cache)\n");
    else if (s.cache_shrinks || s.cache_grows)
        std::fprintf(stderr,
                     "stats: memory pressure: the cache shrank %llu times (%.1f MiB returned to the OS) and grew %llu "
                     "times; capacity now %.1f of %.1f MiB (available %.1f MiB, reserve %.1f MiB)\n",
                     (unsigned long long)s.cache_shrinks, s.cache_bytes_released / 1048576.0,
                     (unsigned long long)s.cache_grows, s.cache_capacity_bytes / 1048576.0, s.cache_bytes / 1048576.0,
                     s.memory_available / 1048576.0, s.pressure_reserve / 1048576.0);
    else
        std::fprintf(stderr, "stats: memory pressure: none (available %.1f MiB, reserve %.1f MiB); cache at its planned size\n",
                     s.memory_available / 1048576.0, s.pressure_reserve / 1048576.0);
    if (s.memory_warmed_bytes || s.records_into_cold_memory)
        std::fprintf(stderr,
                     "stats: memory made resident: %.1f MiB of record buffers ahead of use in %.3f s (a thread of "
                     "its own); %llu reads into buffers not yet resident\n",
                     s.memory_warmed_bytes / 1048576.0, s.seconds_memory_warm,
                     (unsigned long long)s.records_into_cold_memory);
    if (s.pool_fallbacks)  // each is a record buffer outside the memory plan while it lived
        std::fprintf(stderr, "stats: %llu reads found every pre-faulted record buffer taken and mapped a fresh one\n",
                     (unsigned long long)s.pool_fallbacks);
}

// A run never writes over the model it reads: an output that is, or lies
// inside, the container is a usage error naming both (the library refuses
// it too, for the files it writes; this catches it before the model loads).
// The container's own hotlist (usage.waste, FORMAT.md section 10) is the one
// file --learn may write there.
bool outputs_outside_model(const std::string &model, std::initializer_list<std::pair<const char *, std::string>> outs,
                           const char *cmd) {
    for (const auto &[opt, path] : outs) {
        if (path.empty()) continue;
        const bool learn = std::string(opt) == "--learn";
        if (std::string why = sluice::output_inside_reason(path, model, "the model", learn ? "usage.waste" : nullptr);
            !why.empty()) {
            std::fprintf(stderr, "sluice%s%s: %s: %s\n", *cmd ? " " : "", cmd, opt, why.c_str());
            return false;
        }
    }
    return true;
}

// Opens or reports; exit code 1 for a model that cannot be opened.
sluice_ctx *open_or_report(const std::string &path, const sluice_config &cfg, const Common &c) {
    sluice_ctx *ctx = nullptr;
    if (!outputs_outside_model(path, {{"--dump-routes", c.dump_routes}, {"--learn", c.learn}}, "")) return nullptr;
    // A Hugging Face folder where a container belongs: say what to do.
    if (std::string hint = sluice::checkpoint_hint(path); !hint.empty()) {
        std::fprintf(stderr, "sluice: %s\n", hint.c_str());
        return nullptr;
    }
    if (cfg.budget_bytes == 0 && !cfg.metadata_only && !c.quiet) {
        // Say what the automatic budget picked (issue 5: on stderr).
        sluice_memory_plan p;
        char err[512];
        // With images the open adds the tower to the floor (p.vision).
        if (sluice_plan_model(path.c_str(), 0, cfg.max_context, cfg.cgroup_root, &p, err, sizeof err) == SLUICE_OK)
            std::fprintf(stderr, "sluice: budget %.2f GiB = %s%s; expert cache %.2f GiB\n",
                         (p.budget + (cfg.vision ? p.vision : 0)) / 1073741824.0, p.choice,
                         cfg.vision && p.vision ? " + the vision tower" : "", p.cache / 1073741824.0);
    }
    sluice_status st = sluice_open(path.c_str(), &cfg, &ctx);
    if (st != SLUICE_OK) {
        sluice::end_startup_progress();
        std::fprintf(stderr, "sluice: cannot open %s: %s: %s\n", path.c_str(), sluice_status_name(st),
                     sluice_last_error(ctx));
        sluice_close(ctx);
        return nullptr;
    }
    if (!c.dump_routes.empty() && !cfg.metadata_only) {
        st = sluice_route_dump(ctx, c.dump_routes.c_str());
        if (st != SLUICE_OK) {
            std::fprintf(stderr, "sluice: --dump-routes: %s\n", sluice_last_error(ctx));
            sluice_close(ctx);
            return nullptr;
        }
    }
    return ctx;
}

// info, tokenize, detokenize: the manifest and side files, never the trunk.
sluice_ctx *open_metadata(const std::string &path, const Common &c) {
    sluice_config cfg = to_config(c);
    cfg.metadata_only = 1;
    cfg.progress = nullptr;
    return open_or_report(path, cfg, c);
}

// --ids: the one id-list parser (common/parse_number.h), as detokenize.
bool parse_ids(const std::string &s, std::vector<int32_t> *ids, std::string *err) {
    if (sluice::parse_id_list(s, ids, err)) return true;
    *err = "--ids: " + *err + " (expected non-negative integers separated by commas)";
    return false;
}

int cmd_info(const std::string &model, const Common &c, bool json, bool fingerprint) {
    sluice_ctx *ctx = open_metadata(model, c);
    if (!ctx) return 1;
    if (fingerprint) {
        size_t n = sluice_fingerprint(ctx, nullptr, 0);
        if (n == 0) {
            std::fprintf(stderr, "sluice info: %s\n", sluice_last_error(ctx));
            sluice_close(ctx);
            return 1;
        }
        std::string buf(n, '\0');
        sluice_fingerprint(ctx, buf.data(), n);
        buf.resize(n ? n - 1 : 0);
        std::printf("%s\n", buf.c_str());
        sluice_close(ctx);
        return 0;
    }
    sluice_info in;
    sluice_info_get(ctx, &in);
    if (json) {
        std::printf(
            "{\"family\":\"%s\",\"arch\":\"%s\",\"layers\":%d,\"kda_layers\":%d,\"mla_layers\":%d,\"moe_layers\":%d,"
            "\"experts\":%d,\"top_k\":%d,\"shared_experts\":%d,\"hidden\":%d,\"vocab\":%d,\"attn_res_block\":%d,"
            "\"total_params\":%llu,\"active_params\":%llu,\"trunk_bytes\":%llu,\"expert_bytes\":%llu,"
            "\"trunk_formats\":\"%s\",\"expert_format\":\"%s\",\"expert_stages\":%d,\"expert_entries\":%d,"
            "\"expert_index_bits\":%d,\"backend\":\"%s\",\"threads\":%d}\n",
            in.family, in.arch, in.n_layers, in.n_kda_layers, in.n_mla_layers, in.n_moe_layers, in.n_experts,
            in.top_k, in.n_shared_experts, in.hidden, in.vocab, in.attn_res_block,
            (unsigned long long)in.total_params, (unsigned long long)in.active_params,
            (unsigned long long)in.trunk_bytes, (unsigned long long)in.expert_bytes, in.trunk_formats,
            in.expert_format, in.expert_stages, in.expert_entries, in.expert_index_bits, in.backend, in.n_threads);
    } else {
        std::printf("model:          %s\n", model.c_str());
        std::printf("family:         %s (%s)\n", in.family, in.arch[0] ? in.arch : "architecture not recorded");
        std::printf("layers:         %d (%d KDA, %d MLA; %d MoE)\n", in.n_layers, in.n_kda_layers, in.n_mla_layers,
                    in.n_moe_layers);
        std::printf("experts:        %d routed, top-%d, %d shared\n", in.n_experts, in.top_k, in.n_shared_experts);
        std::printf("hidden / vocab: %d / %d\n", in.hidden, in.vocab);
        if (in.attn_res_block) std::printf("attn residuals: block %d\n", in.attn_res_block);
        std::printf("parameters:     %.4g total, %.4g active per token\n", (double)in.total_params,
                    (double)in.active_params);
        std::printf("trunk:          %s, %.2f MiB\n", in.trunk_formats, in.trunk_bytes / 1048576.0);
        std::printf("experts:        %s (%d stages x %d entries, %d-bit codes), %.2f MiB\n", in.expert_format,
                    in.expert_stages, in.expert_entries, in.expert_index_bits, in.expert_bytes / 1048576.0);
        std::printf("backend:        %s, %d threads\n", in.backend, in.n_threads);
    }
    sluice_close(ctx);
    return 0;
}

bool write_f32(const std::string &path, const std::vector<float> &v, std::string *err) {
    // Write to a temporary name and rename, so a failure never leaves a
    // partial file that looks complete.
    sluice::Status st =
        sluice::write_output_file(path, std::string_view((const char *)v.data(), v.size() * sizeof(float)), false);
    if (!st) *err = st.message();
    return st.is_ok();
}

// --vq4p-ties: the engine's rounding decisions on VQ4P table entries near a
// .5 (sluice_vq4p_ties_get), one line each, for a margin-aware comparison.
constexpr double kVq4pTieBand = 1e-3;

bool write_vq4p_ties(sluice_ctx *ctx, const std::string &path, std::string *err) {
    size_t n = 0;
    sluice_status st = sluice_vq4p_ties_get(ctx, nullptr, 0, &n);
    std::vector<sluice_vq4p_tie> v(n);
    if (st == SLUICE_E_RANGE) st = sluice_vq4p_ties_get(ctx, v.data(), v.size(), &n);
    if (st != SLUICE_OK) {
        *err = sluice_last_error(ctx);
        return false;
    }
    // Through PATH.tmp and a rename, as every output (common/checked_file.h).
    sluice::OutputFile out;
    if (sluice::Status cs = out.create(path); !cs) {
        *err = cs.message();
        return false;
    }
    FILE *f = out.stream();
    if (!f) {
        *err = "cannot write " + path;
        return false;
    }
    static const char *kinds[] = {"gate", "up", "down"};
    std::fprintf(f, "# sluice vq4p-ties 1: entries within %g code units of a rounding boundary%s\n", kVq4pTieBand,
                 n >= (1u << 18) ? " (record full: truncated)" : "");
    std::fprintf(f, "# layer pos kind expert index value q\n");
    for (const sluice_vq4p_tie &t : v)
        std::fprintf(f, "%d %d %s %d %lld %.9g %d\n", t.layer, t.pos, t.kind >= 0 && t.kind < 3 ? kinds[t.kind] : "?",
                     t.expert, (long long)t.index, (double)t.value, t.q);
    if (sluice::Status cs = out.commit(false); !cs) {
        *err = cs.message();
        return false;
    }
    return true;
}

int cmd_logits(const std::string &model, const Common &c, const std::string &ids_s, const std::string &out,
               bool chunked, const std::string &trace_dir, const std::string &ties_path) {
    std::vector<int32_t> ids;
    std::string err;
    if (!parse_ids(ids_s, &ids, &err)) {
        std::fprintf(stderr, "sluice logits: %s\n", err.c_str());
        return 2;
    }
    if (!outputs_outside_model(model, {{"--out", out}, {"--trace", trace_dir}, {"--vq4p-ties", ties_path}}, "logits"))
        return 2;
    Common cc = c;
    if (!chunked && cc.chunk == 0) cc.chunk = 1;  // token at a time unless --chunked
    sluice_ctx *ctx = open_or_report(model, to_config(cc), c);
    if (!ctx) return 1;
    const int V = sluice_n_vocab(ctx);
    if (!ids_in_vocab(ids, V, "logits")) {
        sluice_close(ctx);
        return 2;
    }
    sluice::TraceWriter tw;
    if (!trace_dir.empty()) {
        if (!tw.begin(trace_dir, (int)ids.size(), &err)) {
            std::fprintf(stderr, "sluice logits: %s\n", err.c_str());
            sluice_close(ctx);
            return 1;
        }
        sluice_set_trace(ctx, sluice::TraceWriter::callback, &tw);
    }
    if (!ties_path.empty()) sluice_vq4p_ties_record(ctx, kVq4pTieBand);
    std::vector<float> all((size_t)V * ids.size());
    sluice_status st = sluice_eval_all(ctx, ids.data(), ids.size(), all.data());
    if (st != SLUICE_OK) {
        std::fprintf(stderr, "sluice logits: %s: %s\n", sluice_status_name(st), sluice_last_error(ctx));
        sluice_close(ctx);
        return 1;
    }
    std::vector<float> last(all.end() - V, all.end());
    int rc = 0;
    if (!out.empty() && !write_f32(out, last, &err)) {
        std::fprintf(stderr, "sluice logits: --out: %s\n", err.c_str());
        rc = 1;
    }
    if (!ties_path.empty() && !write_vq4p_ties(ctx, ties_path, &err)) {
        std::fprintf(stderr, "sluice logits: --vq4p-ties: %s\n", err.c_str());
        rc = 1;
    }
    if (!trace_dir.empty() && !tw.finish(all, V, "sluice " SLUICE_VERSION_STRING, &err)) {
        std::fprintf(stderr, "sluice logits: %s\n", err.c_str());
        rc = 1;
    }
    if (out.empty() && trace_dir.empty()) {
        int arg = (int)(std::max_element(last.begin(), last.end()) - last.begin());
        std::printf("argmax %d logit %.6f\n", arg, last[(size_t)arg]);
    }
    if (!maybe_learn(ctx, c)) rc = 1;
    sluice_close(ctx);
    return rc;
}

// Greedy decoding from token ids. With a tokenizer in the container the
// text streams to stdout; --print-ids (or a container without one) prints
// one id a line instead. Stops at EOS unless --ignore-eos.
int cmd_generate(const std::string &model, const Common &c, const std::string &ids_s, int n_new, bool stats,
                 bool print_ids, bool ignore_eos) {
    std::vector<int32_t> ids;
    std::string err;
    if (!parse_ids(ids_s, &ids, &err)) {
        std::fprintf(stderr, "sluice generate: %s\n", err.c_str());
        return 2;
    }
    sluice_ctx *ctx = open_or_report(model, to_config(c), c);
    if (!ctx) return 1;
    const int V = sluice_n_vocab(ctx);
    if (!ids_in_vocab(ids, V, "generate")) {
        sluice_close(ctx);
        return 2;
    }
    // Text needs the tokenizer; without one the ids are the answer.
    sluice_detok *dt = print_ids ? nullptr : sluice_detok_new(ctx);
    std::string buf(dt ? sluice_detok_max_chunk(dt) : 0, '\0');
    const int32_t eos = ignore_eos ? -1 : sluice_token_eos(ctx);
    bool ends_line = true;
    auto put_text = [&](size_t n) {
        if (n == 0) return;
        std::fwrite(buf.data(), 1, n, stdout);
        std::fflush(stdout);
        ends_line = buf[n - 1] == '\n';
    };
    std::vector<float> logits((size_t)V);
    auto t0 = std::chrono::steady_clock::now();
    sluice_status st = sluice_eval(ctx, ids.data(), ids.size(), logits.data());
    auto t1 = std::chrono::steady_clock::now();
    int produced = 0;
    const char *why = "length limit";
    for (int i = 0; st == SLUICE_OK && i < n_new; i++) {
        int32_t next = (int32_t)(std::max_element(logits.begin(), logits.end()) - logits.begin());
        produced++;
        if (next == eos) {
            why = "end of sequence";
            break;
        }
        if (dt) {
            size_t n = 0;
            if (!sluice_token_is_control(ctx, next) && sluice_detok_push(dt, next, buf.data(), buf.size(), &n) == SLUICE_OK)
                put_text(n);
        } else {
            std::printf("%d\n", next);
            std::fflush(stdout);
        }
        if (i + 1 < n_new) st = sluice_eval(ctx, &next, 1, logits.data());
    }
    if (dt) {
        size_t n = 0;
        if (sluice_detok_flush(dt, buf.data(), buf.size(), &n) == SLUICE_OK) put_text(n);
        sluice_detok_free(dt);
    }
    auto t2 = std::chrono::steady_clock::now();
    if (st != SLUICE_OK) {
        std::fprintf(stderr, "%ssluice generate: %s: %s\n", sluice::newline_if_mid_line(ends_line),
                     sluice_status_name(st), sluice_last_error(ctx));
        sluice_close(ctx);
        return 1;
    }
    double pf = std::chrono::duration<double>(t1 - t0).count(), dec = std::chrono::duration<double>(t2 - t1).count();
    if (!c.quiet)
        std::fprintf(stderr, "%sprompt %zu tokens in %.3f s (%.1f tok/s); generated %d tokens in %.3f s (%.1f tok/s), stop: %s\n",
                     sluice::newline_if_mid_line(ends_line), ids.size(), pf, ids.size() / std::max(pf, 1e-9), produced,
                     dec, produced / std::max(dec, 1e-9), why);
    if (stats && !c.quiet) print_stats(ctx);
    const bool learned = maybe_learn(ctx, c);
    sluice_close(ctx);
    return learned ? 0 : 1;
}

}  // namespace

int cmd_plan(const std::string &model, const Common &c, bool json) {
    if (std::string hint = sluice::checkpoint_hint(model); !hint.empty()) {
        std::fprintf(stderr, "sluice plan: %s\n", hint.c_str());
        return 1;
    }
    uint64_t budget = 0;
    budget_bytes(c, &budget);
    sluice_memory_plan p;
    char err[512] = {0};
    sluice_status st = sluice_plan_model(model.c_str(), budget, c.ctx_len, nullptr, &p, err, sizeof err);
    if (st != SLUICE_OK) {
        std::fprintf(stderr, "sluice plan: %s\n", err);
        return 1;
    }
    auto gib = [](uint64_t b) { return b / 1073741824.0; };
    // With a budget given, the default is still worth knowing.
    sluice_memory_plan d;
    char derr[512] = {0};
    const bool have_default =
        budget && sluice_plan_model(model.c_str(), 0, c.ctx_len, nullptr, &d, derr, sizeof derr) == SLUICE_OK;
    if (json) {
        std::printf("{\"model\":%s,\"context\":%d,\"trunk\":%llu,\"kda_state\":%llu,\"mla_kv\":%llu,\"scratch\":%llu,"
                    "\"min_cache\":%llu,\"floor\":%llu,\"vision\":%llu,\"record_bytes\":%llu,\"working_set\":%llu,"
                    "\"ram_limit\":%llu,\"ram_source\":%s,\"budget\":%llu,\"choice\":%s,\"cache\":%llu,"
                    "\"runtime\":%llu,\"allocator_slack\":%llu,\"thread_stacks\":%llu,\"threads\":%d,"
                    "\"page_tables\":%llu,\"available\":%llu,\"reserve\":%llu,\"max_useful\":%llu,"
                    "\"checkpoints\":%llu,\"wave_tokens\":%d,\"wave\":%llu,\"batch_tokens\":%d,\"batch\":%llu}\n",
                    sluice::json_quote(model).c_str(), p.context, (unsigned long long)p.trunk,
                    (unsigned long long)p.kda_state, (unsigned long long)p.mla_kv, (unsigned long long)p.scratch,
                    (unsigned long long)p.min_cache, (unsigned long long)p.floor, (unsigned long long)p.vision,
                    (unsigned long long)p.record_bytes, (unsigned long long)p.working_set,
                    (unsigned long long)p.ram_limit, sluice::json_quote(p.ram_source).c_str(),
                    (unsigned long long)p.budget, sluice::json_quote(p.choice).c_str(), (unsigned long long)p.cache,
                    (unsigned long long)p.runtime, (unsigned long long)p.allocator_slack,
                    (unsigned long long)p.thread_stacks, p.threads, (unsigned long long)p.page_tables,
                    (unsigned long long)p.available, (unsigned long long)p.reserve, (unsigned long long)p.max_useful,
                    (unsigned long long)p.checkpoints, p.wave_tokens, (unsigned long long)p.wave, p.batch_tokens,
                    (unsigned long long)p.batch);
        return 0;
    }
    std::printf("memory plan for %s at context %d\n", model.c_str(), p.context);
    std::printf("  trunk (resident)          %10.3f GiB\n", gib(p.trunk));
    std::printf("  KDA state                 %10.3f GiB\n", gib(p.kda_state));
    std::printf("  KDA checkpoints           %10.3f GiB  (prompt reuse: 4 checkpoints)\n", gib(p.checkpoints));
    if (p.replay_log > 0)
        std::printf("  KDA replay log            %10.3f GiB  (recent positions' recurrence inputs: rewinds replay them)\n",
                    gib(p.replay_log));
    std::printf("  MLA KV cache              %10.3f GiB\n", gib(p.mla_kv));
    std::printf("  scratch                   %10.3f GiB\n", gib(p.scratch));
    std::printf("  minimum expert cache      %10.3f GiB  (2 x top-k records of %.2f MiB)\n", gib(p.min_cache),
                p.record_bytes / 1048576.0);
    std::printf("  runtime (code, libraries) %10.3f GiB  (this process's mappings and heap, measured)\n", gib(p.runtime));
    std::printf("  allocator slack           %10.3f GiB  (freed heap glibc keeps: 2 x the largest block, <= 64 MiB)\n",
                gib(p.allocator_slack));
    std::printf("  thread stacks             %10.3f GiB  (%d threads x %llu KiB)\n", gib(p.thread_stacks), p.threads,
                p.threads > 0 ? (unsigned long long)(p.thread_stacks / (uint64_t)p.threads >> 10) : 0ull);
    std::printf("  page tables               %10.3f GiB  (8 bytes per 4 KiB page of the budget, cache included)\n",
                gib(p.page_tables));
    std::printf("  floor                     %10.3f GiB\n", gib(p.floor));
    if (p.vision)  // VISION.md §2.4: joins the floor only when images are enabled
        std::printf("  vision tower (images)     %10.3f GiB  (floor with images: %.3f GiB)\n", gib(p.vision),
                    gib(p.floor + p.vision));
    std::printf("  token working set         %10.3f GiB  (MoE layers x top-k records)\n", gib(p.working_set));
    std::printf("  RAM this process may use  %10.3f GiB  (%s)\n", gib(p.ram_limit), p.ram_source);
    if (p.available)
        std::printf("  available now             %10.3f GiB  (MemAvailable, capped by the cgroup's room)\n",
                    gib(p.available));
    std::printf("  reserve for the OS        %10.3f GiB  (max(1 GiB, 10 %% of the RAM limit): the default leaves it)\n",
                gib(p.reserve));
    std::printf("  most the model can use    %10.3f GiB  (floor + every expert record)\n", gib(p.max_useful));
    std::printf("  budget                    %10.3f GiB  (%s)\n", gib(p.budget), p.choice);
    std::printf("  prefill wave              %10.3f GiB  (%d tokens: each routed record read once per wave; from "
                "the cache's room)\n", gib(p.wave), p.wave_tokens);
    std::printf("  expert batch              %10.3f GiB  (%d tokens' VQ tables at once; from the cache's room)\n",
                gib(p.batch), p.batch_tokens);
    std::printf("  expert cache              %10.3f GiB  (%.0f records)\n", gib(p.cache),
                p.record_bytes ? (double)p.cache / p.record_bytes : 0.0);
    if (have_default) std::printf("  default budget            %10.3f GiB  (%s)\n", gib(d.budget), d.choice);
    return 0;
}

struct PlanConfigArgs {
    std::string config, trace, policy, probe;
    double disk_gbps = 0;
};

// `sluice plan --config`: the model's sizes and, for a few machine sizes,
// the budget sluice would choose and what it projects.
int cmd_plan_config(const PlanConfigArgs &a, const Common &c) {
    std::string trace = a.trace;
    const char *dflt = "../shared/traces/kimi-linear-48b-route-150.jsonl";
    if (trace.empty() && ::access(dflt, R_OK) == 0) trace = dflt;
    const uint64_t rams[] = {16, 24, 32, 64, 128};
    auto gb = [](double b) { return b / 1e9; };
    sluice_config_plan cp[5];
    char err[512] = {0};
    double gbps = a.disk_gbps;
    std::string probed;
    if (!a.probe.empty()) {
        // The record size comes from the config; the rate from the target
        // disk: a 256 MiB file (at least 8 records), 8 reads in flight (the
        // engine's default depth), 2 s of reading.
        if (sluice_plan_config(a.config.c_str(), 16ull << 30, c.ctx_len, nullptr, nullptr, 0, &cp[0], err,
                               sizeof err) != SLUICE_OK) {
            std::fprintf(stderr, "sluice plan: %s\n", err);
            return 1;
        }
        const uint64_t rec = cp[0].plan.record_bytes;
        int32_t direct = 0;
        const auto t0 = std::chrono::steady_clock::now();
        if (sluice_probe_disk(a.probe.c_str(), rec, std::max<uint64_t>(256ull << 20, 8 * rec), 2.0, 8, &gbps, &direct,
                              err, sizeof err) != SLUICE_OK) {
            std::fprintf(stderr, "sluice plan: --probe: %s\n", err);
            return 1;
        }
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        char line[320];
        std::snprintf(line, sizeof line,
                      "%.3f GB/s measured in %s (random %.2f MiB reads, 8 in flight, %s; %.1f s with writing the "
                      "file)",
                      gbps, a.probe.c_str(), rec / 1048576.0,
                      direct ? "O_DIRECT" : "buffered: the filesystem refused O_DIRECT, so its page cache may inflate it",
                      took);
        probed = line;
    }
    for (int i = 0; i < 5; i++) {
        if (sluice_plan_config(a.config.c_str(), rams[i] << 30, c.ctx_len, trace.empty() ? nullptr : trace.c_str(),
                               a.policy.empty() ? nullptr : a.policy.c_str(), gbps, &cp[i], err,
                               sizeof err) != SLUICE_OK) {
            std::fprintf(stderr, "sluice plan: %s\n", err);
            return 1;
        }
    }
    const sluice_config_plan &p = cp[0];
    std::printf("plan for %s (%s) at the default recipe (Q4G trunk, Q8G embedding and head, VQ3R experts), context %d\n",
                a.config.c_str(), p.family, p.plan.context);
    std::printf("  container on disk   %8.1f GB  (trunk.bin %.1f GB, experts %.1f GB)\n", gb(p.container_bytes),
                gb(p.trunk_file_bytes), gb(p.expert_bytes));
    std::printf("  experts             %d MoE layers x %d, top-%d, record %.2f MiB; a token's working set %.1f GB\n",
                p.moe_layers, p.experts, p.top_k, p.plan.record_bytes / 1048576.0, gb(p.plan.working_set));
    std::printf("  trunk (resident)    %8.1f GB  (the embedding stays on disk)\n", gb(p.plan.trunk));
    std::printf("  floor               %8.1f GB  (trunk, KDA state, MLA cache, scratch, 2 x top-k records, runtime, "
                "allocator slack, %d thread stacks, page tables)\n",
                gb(p.plan.floor), p.plan.threads);
    std::printf("  hit rate            %s\n",
                trace.empty() ? "not projected: no routing trace (give --trace)"
                              : ("replaying " + trace + " through the " + (a.policy.empty() ? "freq" : a.policy) +
                                 " policy, the cache scaled to the same fraction of the expert set")
                                    .c_str());
    if (!probed.empty()) std::printf("  disk probe          %s\n", probed.c_str());
    std::printf("  tok/s               %s\n",
                gbps > 0 ? ("I/O bound at " + std::to_string(gbps).substr(0, 5) +
                            " GB/s: disk rate / expert bytes read per token (compute not counted)")
                               .c_str()
                         : "not projected: give --disk-gbps (a measured read rate) or --probe DIR");
    std::printf("\n| RAM GB | fits | budget GB | expert cache GB | cache / expert set | hit rate | GB read/token | tok/s |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < 5; i++) {
        const sluice_config_plan &q = cp[i];
        char hit[32] = "-", tps[32] = "-";
        if (q.hit_rate >= 0) std::snprintf(hit, sizeof hit, "%.1f %%", 100 * q.hit_rate);
        if (q.tok_per_s > 0) std::snprintf(tps, sizeof tps, "%.2f", q.tok_per_s);
        std::printf("| %llu | %s | %.1f | %.1f | %.1f %% | %s | %.2f | %s |\n", (unsigned long long)rams[i],
                    q.fits ? "yes" : "NO: floor over 3/4 of RAM", gb(q.plan.budget), gb(q.plan.cache),
                    100 * q.cache_fraction, hit, gb(q.read_bytes_per_token), tps);
    }
    return 0;
}

// `sluice serve` (cli/serve_command.cpp).
namespace sluice {
struct ServeCommand;
std::shared_ptr<ServeCommand> add_serve_command(CLI::App &app);
bool run_serve_command(ServeCommand &s, int *rc);
}  // namespace sluice

int main(int argc, char **argv) {
    // `kld` parses its own options (cli/kld/kld_main.cpp, CLI11 too), so the
    // KLD tests drive the same front end in-process; `sluice kld help`.
    if (argc > 1 && std::string(argv[1]) == "kld") return sluice::run_kld(argc - 1, argv + 1);
    if (int hrc; sluice::missing_model_usage(argc, argv, &hrc)) return hrc;
    // CLI11 prints the version and exits as soon as it sees the flag, so
    // `--version x` would ignore its junk: the flag stands alone.
    for (int i = 1; i < argc; i++)
        if (std::string(argv[i]) == "--version" && argc != 2) {
            std::fprintf(stderr, "sluice: --version takes no arguments and no other options\n");
            return 2;
        }
    CLI::App app{"sluice: run large mixture-of-experts models from a WASTE container"};
    app.set_version_flag("--version", "sluice " SLUICE_VERSION_STRING);
    app.require_subcommand(1);
    app.footer("Options every model command takes: --threads, --cpus, --budget, --ctx, --backend, --cache-policy,\n"
               "--exclusive-open, --mlock, --dump-routes, -q. `sluice COMMAND --help` lists them all.");

    Common common;
    std::string model, ids, out, trace;
    bool json = false, fingerprint = false, chunked = false, stats = false, print_ids = false, ignore_eos = false;
    int n = 16;

    auto *info = app.add_subcommand("info", "describe a container (manifest only: the trunk is not loaded)");
    info->add_option("model", model, "container directory")->required();
    info->add_flag("--json", json, "print JSON");
    info->add_flag("--fingerprint", fingerprint, "print the container fingerprint as JSON");
    add_common(info, &common);

    auto *lg = app.add_subcommand("logits", "write the last position's logits as V little-endian float32");
    lg->add_option("model", model, "container directory")->required();
    lg->add_option("--ids", ids, "comma-separated token ids")->required();
    lg->add_option("--out,-o", out, "output file");
    lg->add_flag("--chunked", chunked, "chunked prefill instead of one token at a time");
    lg->add_option("--trace", trace, "write per-layer hidden states to this directory");
    std::string ties_path;
    lg->add_option("--vq4p-ties", ties_path,
                   "write VQ4P table entries within 1e-3 code units of a rounding boundary, with the code used");
    add_common(lg, &common);

    auto *gen = app.add_subcommand("generate", "greedy decoding from token ids (prints text when the container has a tokenizer)");
    gen->add_option("model", model, "container directory")->required();
    gen->add_option("--ids", ids, "comma-separated prompt token ids")->required();
    gen->add_option("-n", n, "tokens to generate (default 16)")->check(CLI::Range(0, 1 << 20));
    gen->add_flag("--stats", stats, "print expert cache and I/O statistics");
    gen->add_flag("--print-ids", print_ids, "print the generated ids, one a line, instead of the text");
    gen->add_flag("--ignore-eos", ignore_eos, "keep generating past end-of-sequence and end-of-turn tokens (benchmarks)");
    add_common(gen, &common);

    sluice::SynthOptions so;
    auto *syn = app.add_subcommand("synth", "write a synthetic container (default: Kimi-Linear-48B's shape, ~19 GB)");
    syn->option_defaults()->always_capture_default();
    syn->add_option("--out,-o", so.out, "output container directory")->required();
    syn->add_option("--seed", so.seed, "random seed (same seed, same bytes)")->check(sluice::unsigned_integer());
    syn->add_option("--layers", so.layers, "decoder layers")->check(CLI::Range(1, 128));
    syn->add_option("--hidden", so.hidden, "hidden size")->check(CLI::Range(8, 65536));
    syn->add_option("--vocab", so.vocab, "vocabulary size")->check(CLI::Range(1, 1 << 24));
    syn->add_option("--experts", so.experts, "routed experts per MoE layer")->check(CLI::Range(0, 4096));
    syn->add_option("--top-k", so.top_k, "experts per token")->check(CLI::Range(1, 64));
    syn->add_option("--moe-inter", so.moe_inter, "expert width")->check(CLI::Range(8, 65536));
    syn->add_option("--inter", so.inter, "dense FFN width")->check(CLI::Range(8, 262144));
    syn->add_option("--heads", so.heads, "MLA heads")->check(CLI::Range(1, 1024));
    syn->add_option("--kda-heads", so.kda_heads, "KDA heads")->check(CLI::Range(1, 1024));
    syn->add_option("--kda-dim", so.kda_dim, "KDA head dim")->check(CLI::Range(1, 1024));
    syn->add_option("--kv-lora", so.kv_lora, "MLA latent width")->check(CLI::Range(1, 65536));
    syn->add_option("--trunk-bits", so.trunk_bits, "4 (Q4G), 3 (Q3G) or 8 (Q8G)")->check(CLI::IsMember({3, 4, 8}));
    syn->add_option("--jobs,-j", so.jobs, "writer threads")->check(CLI::Range(1, 64));
    bool vq4p = false;
    syn->add_flag("--vq4p", vq4p, "VQ4P experts (4 stages of 64 entries, 6-bit codes)");
    std::string family = "kimi-linear";
    syn->add_option("--family", family,
                    "kimi-linear (Kimi-Linear-48B's shape) or k3 (Kimi K3's text model with its real expert "
                    "records, 32 experts per layer, 2048-wide trunk, ~42 GB); shape options given override it")
        ->check(CLI::IsMember({"kimi-linear", "k3"}));
    syn->add_option("--r-lat", so.r_lat, "latent MoE width (k3)")->check(CLI::Range(8, 65536));
    syn->add_option("--q-lora", so.q_lora, "MLA query rank (k3)")->check(CLI::Range(1, 65536));
    syn->add_option("--attn-res-block", so.attn_res_block, "Attention Residuals block size (k3)")->check(CLI::Range(1, 128));
    syn->add_option("--shared", so.shared, "shared experts")->check(CLI::Range(0, 64));
    syn->add_option("--mla-every", so.mla_every, "every Nth layer (and the last) is MLA")->check(CLI::Range(1, 128));
    syn->add_option("--first-dense", so.first_dense, "leading dense layers")->check(CLI::Range(0, 128));
    std::string synth_tokenizer;
    syn->add_option("--tokenizer", synth_tokenizer,
                    "copy this container's tokenizer (tokenizer.model, specials.json, chat.json) into the output; "
                    "--vocab must cover it")
        ->check(CLI::ExistingDirectory);

    bool plan_json = false;
    auto *plan = app.add_subcommand("plan", "print the memory plan: floor, working set, budget and cache");
    plan->add_option("model", model, "container directory");
    PlanConfigArgs pc;
    plan->add_option("--config", pc.config, "a Hugging Face config.json: plan the model before downloading it");
    plan->add_option("--disk-gbps", pc.disk_gbps, "measured disk read rate in GB/s, for the projected tok/s")
        ->check(CLI::Range(0.0, 1000.0));
    plan->add_option("--trace", pc.trace,
                     "routing trace (JSONL) replayed for the projected hit rate (default: "
                     "../shared/traces/kimi-linear-48b-route-150.jsonl when present)");
    plan->add_option("--policy", pc.policy, "cache policy for the replay (default freq)");
    plan->add_option("--probe", pc.probe,
                     "measure the disk under this directory (a temporary file of a few hundred MB, 2 s of "
                     "random record reads, removed after) and project tok/s from it")
        ->check(CLI::ExistingDirectory);
    plan->add_flag("--json", plan_json, "print JSON");
    add_common(plan, &common);
    auto serve_cmd = sluice::add_serve_command(app);

    ConvertArgs conv;
    CLI::App *conv_cmd = nullptr;
    add_convert_command(app, &conv, &conv_cmd);
    VerifyArgs ver;
    auto *ver_cmd = add_verify_command(app, &ver);
    ExportGgufArgs xg;
    auto *xg_cmd = add_export_gguf_command(app, &xg);
    // Listed for --help; `sluice kld ...` is dispatched above.
    app.add_subcommand("kld", "KL-divergence quality suite: suite make, capture, compare, paired, noise, report "
                              "(`sluice kld help`)")
        ->allow_extras();

    // run, chat, tokenize, detokenize (cli/text_commands.cpp)
    sluice::TextHooks hooks{[&](CLI::App *sc) { add_common(sc, &common); },
                            [&](const std::string &m, bool vision) {
                                sluice_config cfg = to_config(common);
                                cfg.vision = vision ? 1 : 0;
                                return open_or_report(m, cfg, common);
                            },
                            print_stats, [&](sluice_ctx *ctx) { maybe_learn(ctx, common); },
                            [&](const std::string &m) { return open_metadata(m, common); },
                            [&] { return common.quiet; }};
    auto text_cmds = sluice::add_text_commands(app, hooks);

    sluice::TextHooks ppl_hooks{[&](CLI::App *sc) { add_common(sc, &common); },
                                [&](const std::string &m, bool) { return open_or_report(m, to_config(common), common); },
                                print_stats, nullptr, nullptr, [&] { return common.quiet; }};
    auto ppl_cmd = sluice::add_perplexity_command(app, ppl_hooks);
    sluice::TextHooks bench_hooks = ppl_hooks;
    bench_hooks.before_close = [&](sluice_ctx *ctx) { maybe_learn(ctx, common); };
    auto bench_cmd = sluice::add_bench_command(app, bench_hooks);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        int rc = app.exit(e);
        return rc == 0 ? 0 : 2;  // usage errors exit 2
    }
    if (int src; sluice::run_serve_command(*serve_cmd, &src)) return src;
    if (*conv_cmd) return cmd_convert(conv);
    if (*ver_cmd) return cmd_verify(ver);
    if (*xg_cmd) return cmd_export_gguf(xg);
    // Checked before any command runs: a garbage --budget must not fall
    // back to the automatic budget silently (info and logits did).
    uint64_t b;
    if (!budget_bytes(common, &b)) {
        std::fprintf(stderr, "sluice: --budget '%s' is not a size (examples: 2G, 1.5GiB, 512M)\n", common.budget.c_str());
        return 2;
    }
    if (uint64_t r; !sluice::parse_size(common.pressure_reserve, &r)) {
        std::fprintf(stderr, "sluice: --pressure-reserve '%s' is not a size (examples: 1G, 512M)\n",
                     common.pressure_reserve.c_str());
        return 2;
    }
    if (*info) return cmd_info(model, common, json, fingerprint);
    if (*lg) return cmd_logits(model, common, ids, out, chunked, trace, ties_path);
    if (*gen) return cmd_generate(model, common, ids, n, stats, print_ids, ignore_eos);
    if (*syn) {
        if (vq4p) so.stages = 4, so.index_bits = 6;
        if (family == "k3") {
            // The K3 preset, then whatever shape options were given on top.
            sluice::SynthOptions k = sluice::k3_shape();
            k.out = so.out, k.seed = so.seed, k.jobs = so.jobs, k.trunk_bits = so.trunk_bits;
            k.stages = so.stages, k.index_bits = so.index_bits;
            const std::pair<const char *, int sluice::SynthOptions::*> given[] = {
                {"--layers", &sluice::SynthOptions::layers},       {"--hidden", &sluice::SynthOptions::hidden},
                {"--vocab", &sluice::SynthOptions::vocab},         {"--experts", &sluice::SynthOptions::experts},
                {"--top-k", &sluice::SynthOptions::top_k},         {"--moe-inter", &sluice::SynthOptions::moe_inter},
                {"--inter", &sluice::SynthOptions::inter},         {"--heads", &sluice::SynthOptions::heads},
                {"--kda-heads", &sluice::SynthOptions::kda_heads}, {"--kda-dim", &sluice::SynthOptions::kda_dim},
                {"--kv-lora", &sluice::SynthOptions::kv_lora},     {"--r-lat", &sluice::SynthOptions::r_lat},
                {"--q-lora", &sluice::SynthOptions::q_lora},       {"--attn-res-block", &sluice::SynthOptions::attn_res_block},
                {"--shared", &sluice::SynthOptions::shared},       {"--mla-every", &sluice::SynthOptions::mla_every},
                {"--first-dense", &sluice::SynthOptions::first_dense}};
            for (const auto &g : given)
                if (syn->count(g.first)) k.*(g.second) = so.*(g.second);
            so = k;
        }
        return cmd_synth(so, synth_tokenizer);
    }
    if (*plan) {
        if (!pc.config.empty()) return cmd_plan_config(pc, common);
        if (!pc.probe.empty()) {
            std::fprintf(stderr, "sluice plan: --probe goes with --config (a container's own disk: bench_disk_probe)\n");
            return 2;
        }
        if (model.empty()) {
            std::fprintf(stderr, "sluice plan: give a container directory or --config config.json\n");
            return 2;
        }
        return cmd_plan(model, common, plan_json);
    }
    if (int trc; sluice::run_text_command(*text_cmds, &trc)) return trc;
    if (int prc; sluice::run_perplexity_command(*ppl_cmd, &prc)) return prc;
    if (int brc; sluice::run_bench_command(*bench_cmd, &brc)) return brc;
    return 2;
}
