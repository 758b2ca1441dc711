// One point of the budget sweep (issue 5), through the C API: open MODEL
// under a RAM budget, prefill a fixed prompt, decode greedily, and print one
// JSON line with decode-only counters (the prompt's reads are subtracted),
// the time the decode spent computing vs waiting for reads, and the
// process's peak RSS. bench/budget_sweep.sh runs it once per budget in a
// fresh process with the page cache dropped, next to a sequential O_DIRECT
// read of the same disk, and prints the table with the I/O floor.
//   build/bench/bench_budget MODEL BUDGET [--threads N] [--prompt N] [--gen N] [--no-lookahead 1] [--chunk N]
//       [--io-depth N] [--io-engine auto|uring|threads] [--cache-policy freq|lfru|lru] [--no-cache 1]
//       [--replay TRACE]   (benchmark-only route replay: real access pattern, meaningless logits)
//   build/bench/bench_budget --disk FILE... (sequential O_DIRECT GB/s, serial and parallel)
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "sluice/sluice.h"

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

long vm_kb(const char *key) {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key));
    return -1;
}

bool parse_size(const char *s, uint64_t *out) {
    char *end = nullptr;
    const double v = std::strtod(s, &end);
    if (end == s || !(v >= 0)) return false;
    double m = 1;
    switch (*end) {
        case 'G': case 'g': m = 1073741824.0; break;
        case 'M': case 'm': m = 1048576.0; break;
        case 'K': case 'k': m = 1024.0; break;
        case 0: break;
        default: return false;
    }
    *out = (uint64_t)(v * m);
    return true;
}

// Sequential O_DIRECT reads of whole files in 64 MiB requests: the disk's
// streaming rate, the denominator of the I/O floor. Measured twice: one
// request at a time, and one stream per file in parallel (the engine keeps
// two reads in flight, and this virtio disk gave 1.0 GB/s to the first and
// up to 1.8 to the second within a minute). The floor takes the faster, so
// it is never flattered by a slow single-stream figure.
double read_files(int n, char **files, bool parallel, uint64_t *total_out) {
    const size_t chunk = 64u << 20;
    std::atomic<uint64_t> total{0};
    std::atomic<bool> failed{false};
    auto one = [&](const char *path) {
        void *buf = nullptr;
        if (posix_memalign(&buf, 4096, chunk)) { failed = true; return; }
        const int fd = ::open(path, O_RDONLY | O_DIRECT);
        if (fd < 0) {
            std::fprintf(stderr, "bench_budget: %s: cannot open with O_DIRECT: %s\n", path, std::strerror(errno));
            failed = true;
        } else {
            for (uint64_t off = 0;; off += chunk) {
                const ssize_t r = ::pread(fd, buf, chunk, (off_t)off);
                if (r <= 0) break;
                total += (uint64_t)r;
            }
            ::close(fd);
        }
        std::free(buf);
    };
    const double t0 = now();
    if (parallel) {
        std::vector<std::thread> ts;
        for (int i = 0; i < n; i++) ts.emplace_back(one, files[i]);
        for (auto &t : ts) t.join();
    } else {
        for (int i = 0; i < n; i++) one(files[i]);
    }
    const double dt = now() - t0;
    *total_out = total;
    return failed ? -1.0 : total / dt / 1e9;
}

// Files are split in two halves so that neither pass reads what the other
// just read (the host may cache it even under O_DIRECT).
int disk(int n, char **files) {
    if (n < 2) {
        std::fprintf(stderr, "bench_budget --disk: give at least two files\n");
        return 2;
    }
    const int h = n / 2;
    uint64_t b1 = 0, b2 = 0;
    const double serial = read_files(h, files, false, &b1);
    const double par = read_files(n - h, files + h, true, &b2);
    if (serial < 0 || par < 0) return 1;
    std::printf("{\"disk_bytes\":%llu,\"disk_serial_gbps\":%.4f,\"disk_parallel_gbps\":%.4f,\"disk_gbps\":%.4f}\n",
                (unsigned long long)(b1 + b2), serial, par, std::max(serial, par));
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    const double t_main = now();
    if (argc > 2 && std::string(argv[1]) == "--disk") return disk(argc - 2, argv + 2);
    if (argc < 3) {
        std::fprintf(stderr, "usage: bench_budget MODEL BUDGET [--threads N] [--prompt N] [--gen N] [--no-lookahead 1] [--chunk N] [--io-depth N]\n"
                             "         [--io-engine auto|uring|threads] [--cache-policy freq|lfru|lru] [--no-cache 1] [--replay TRACE] [--cache-bytes SIZE]\n"
                             "       bench_budget --disk FILE...\n");
        return 2;
    }
    const char *model = argv[1];
    uint64_t budget = 0;
    if (!parse_size(argv[2], &budget)) {
        std::fprintf(stderr, "bench_budget: bad budget '%s'\n", argv[2]);
        return 2;
    }
    int threads = 2, n_prompt = 16, n_gen = 32, no_lookahead = 0, chunk = 0, io_threads = 0, io_depth = 0,
        no_cache = 0;
    std::string io_engine = "auto", policy = "freq", replay;
    for (int i = 3; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        const int v = std::atoi(argv[i + 1]);
        if (a == "--threads") threads = v;
        else if (a == "--prompt") n_prompt = v;
        else if (a == "--gen") n_gen = v;
        else if (a == "--no-lookahead") no_lookahead = v;
        else if (a == "--chunk") chunk = v;
        else if (a == "--io-threads") io_threads = v;
        else if (a == "--io-depth") io_depth = v;
        else if (a == "--no-cache") no_cache = v;
        else if (a == "--io-engine") io_engine = argv[i + 1];
        else if (a == "--cache-policy") policy = argv[i + 1];
        else if (a == "--replay") replay = argv[i + 1];
        else if (a == "--cache-bytes") {
            // An expert cache of exactly this size: the budget is derived
            // from the plan (cache = budget - floor + min_cache / 2).
            uint64_t want = 0;
            sluice_memory_plan p0;
            char err[512];
            if (!parse_size(argv[i + 1], &want) ||
                sluice_plan_model(model, 0, 0, nullptr, &p0, err, sizeof err) != SLUICE_OK) {
                std::fprintf(stderr, "bench_budget: --cache-bytes %s: cannot plan\n", argv[i + 1]);
                return 2;
            }
            budget = p0.floor + std::max(want, p0.min_cache / 2) - p0.min_cache / 2;  // the smallest cache a plan has
        }
        else {
            std::fprintf(stderr, "bench_budget: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (io_engine != "auto" && io_engine != "uring" && io_engine != "threads") {
        std::fprintf(stderr, "bench_budget: --io-engine must be auto, uring or threads\n");
        return 2;
    }
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.n_threads = threads;
    cfg.budget_bytes = budget;
    cfg.no_lookahead = no_lookahead;
    cfg.prefill_chunk = chunk;
    cfg.io_threads = io_threads;
    cfg.io_depth = io_depth;
    cfg.no_cache = no_cache;
    cfg.io_engine = io_engine == "uring" ? SLUICE_IO_URING : io_engine == "threads" ? SLUICE_IO_THREADS : SLUICE_IO_AUTO;
    cfg.cache_policy = policy.c_str();
    cfg.no_hotlist = 1;  // a cold cache: the sweep measures streaming, not a warmed hotlist
    // A 4,096-token prompt and its first decoded token need one position
    // past the default context.
    if (n_prompt + n_gen > 4096) cfg.max_context = n_prompt + n_gen;
    sluice_ctx *ctx = nullptr;
    const double t_open = now();
    if (sluice_open(model, &cfg, &ctx) != SLUICE_OK) {
        std::fprintf(stderr, "bench_budget: %s\n", sluice_last_error(ctx));
        sluice_close(ctx);
        return 1;
    }
    const double open_s = now() - t_open;
    if (!replay.empty()) {
        // Loud on purpose: these logits are meaningless by design.
        std::fprintf(stderr, "bench_budget: ROUTE REPLAY from %s: MoE layers use the trace's experts, not their "
                             "router's; timing and reads are real, logits are meaningless\n", replay.c_str());
        if (sluice_bench_route_replay(ctx, replay.c_str(), "meaningless-logits") != SLUICE_OK) {
            std::fprintf(stderr, "bench_budget: %s\n", sluice_last_error(ctx));
            sluice_close(ctx);
            return 1;
        }
    }
    const int V = sluice_n_vocab(ctx);
    std::vector<int32_t> prompt((size_t)n_prompt);
    for (int i = 0; i < n_prompt; i++) prompt[(size_t)i] = (int32_t)(((int64_t)i * 7919 + 101) % V);
    std::vector<float> lg((size_t)V);
    sluice_stats p0, p1;
    sluice_stats_get(ctx, &p0);
    const double t0 = now();
    if (sluice_eval(ctx, prompt.data(), prompt.size(), lg.data()) != SLUICE_OK) {
        std::fprintf(stderr, "bench_budget: %s\n", sluice_last_error(ctx));
        return 1;
    }
    const double t1 = now();
    const double ttft = t1 - t_main;  // process start to the first token's logits
    sluice_stats s0, s1;
    sluice_stats_get(ctx, &s0);
    p1 = s0;
    for (int i = 0; i < n_gen; i++) {
        int32_t t = (int32_t)(std::max_element(lg.begin(), lg.end()) - lg.begin());
        if (sluice_eval(ctx, &t, 1, lg.data()) != SLUICE_OK) {
            std::fprintf(stderr, "bench_budget: %s\n", sluice_last_error(ctx));
            return 1;
        }
    }
    const double t2 = now();
    sluice_stats_get(ctx, &s1);
    sluice_memory_plan plan;
    sluice_memory_plan_get(ctx, &plan);
    const double dec = t2 - t1;
    const uint64_t reads = s1.expert_reads - s0.expert_reads;
    const uint64_t bytes = s1.expert_bytes_read - s0.expert_bytes_read;
    const double io_wait = s1.seconds_io_wait - s0.seconds_io_wait;
    const double read_busy = s1.seconds_read - s0.seconds_read;
    std::printf("{\"budget\":%llu,\"cache_bytes\":%llu,\"floor\":%llu,\"threads\":%d,\"prompt\":%d,\"gen\":%d,"
                "\"open_s\":%.3f,\"prefill_s\":%.3f,\"ttft_s\":%.3f,\"decode_s\":%.3f,\"decode_tps\":%.4f,"
                "\"fetches\":%llu,\"demand_hits\":%llu,\"readahead_hits\":%llu,\"sync_reads\":%llu,"
                "\"reads\":%llu,\"bytes_read\":%llu,\"bytes_per_token\":%.0f,"
                "\"read_busy_s\":%.3f,\"read_gbps_busy\":%.4f,\"read_gbps_wall\":%.4f,"
                "\"io_wait_s\":%.3f,\"compute_s\":%.3f,\"record_bytes\":%llu,\"direct_io\":%d,\"io_engine\":\"%s\","
                "\"io_depth\":%d,\"policy\":\"%s\",\"no_cache\":%d,\"replay\":%d,"
                "\"prefill_fetches\":%llu,\"prefill_reads\":%llu,\"prefill_bytes\":%llu,\"chunk\":%d,"
                "\"prefetched\":%llu,\"guesses\":%llu,\"guesses_used\":%llu,\"guesses_dropped\":%llu,"
                "\"lookahead\":%d,\"pool_fallbacks\":%llu,\"vm_hwm_kb\":%ld,\"prefill_waves\":%llu,"
                "\"wave_tokens\":%d,\"batch_tokens\":%d,\"prefill_reads_per_record_mean\":%.3f,"
                "\"prefill_reads_per_record_max\":%.3f}\n",
                (unsigned long long)budget, (unsigned long long)plan.cache, (unsigned long long)plan.floor, threads,
                n_prompt, n_gen, open_s, t1 - t0, ttft, dec, n_gen / dec,
                (unsigned long long)(s1.expert_fetches - s0.expert_fetches),
                (unsigned long long)(s1.expert_cache_hits - s0.expert_cache_hits),
                (unsigned long long)(s1.expert_readahead_hits - s0.expert_readahead_hits),
                (unsigned long long)(s1.expert_sync_reads - s0.expert_sync_reads), (unsigned long long)reads,
                (unsigned long long)bytes, (double)bytes / n_gen, read_busy,
                read_busy > 0 ? (double)bytes / read_busy / 1e9 : 0.0, dec > 0 ? (double)bytes / dec / 1e9 : 0.0,
                io_wait, dec - io_wait, (unsigned long long)plan.record_bytes, s1.direct_io, s1.io_engine,
                s1.io_depth, s1.cache_policy, no_cache, !replay.empty(),
                (unsigned long long)(p1.expert_fetches - p0.expert_fetches),
                (unsigned long long)(p1.expert_reads - p0.expert_reads),
                (unsigned long long)(p1.expert_bytes_read - p0.expert_bytes_read), chunk,
                (unsigned long long)(s1.experts_prefetched - s0.experts_prefetched),
                (unsigned long long)(s1.lookahead_guesses - s0.lookahead_guesses),
                (unsigned long long)(s1.lookahead_guesses_used - s0.lookahead_guesses_used),
                (unsigned long long)(s1.lookahead_guesses_dropped - s0.lookahead_guesses_dropped), !no_lookahead,
                (unsigned long long)s1.pool_fallbacks, vm_kb("VmHWM:"), (unsigned long long)p1.prefill_waves,
                p1.prefill_wave_tokens, plan.batch_tokens, p1.prefill_reads_per_record_mean,
                p1.prefill_reads_per_record_max);
    sluice_close(ctx);
    return 0;
}
