// `sluice serve MODEL`: the OpenAI-compatible HTTP server (src/server).
#include <CLI/CLI.hpp>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/checked_file.h"
#include "cli/cli_checks.h"
#include "cli/cli_util.h"
#include "common/units.h"
#include "server/server.h"
#include "server/sluice_model.h"
#include "sluice/sluice.h"

namespace sluice {

struct ServeCommand {
    CLI::App *app = nullptr;
    std::string model, host = "127.0.0.1", api_key, budget = "0", max_body = "1M", model_name;
    int port = 8000, max_queue = 8, threads = 0, ctx = 0, http_threads = 0;
    int read_timeout = 30, write_timeout = 30, keep_alive = 5;
    double request_timeout = 0;
    bool log = false;
    // Images (Kimi K3): load the vision tower; may image parts name local files.
    bool vision = false, allow_local_images = false;
    // K3 and agents.
    bool no_thinking = false;
    int64_t thinking_budget = 4096;
    std::vector<std::string> aliases;
    std::string forced_output_file;  // test only
    // Engine flags, as the other commands take them (cli/main.cpp's common options).
    bool verify = false, no_direct = false, no_hotlist = false, no_cache = false, no_readahead = false,
         no_lookahead = false;
    int chunk = 0, wave = 0, io_threads = 0, io_depth = 0;
    std::string hotlist, learn, backend = "auto", io_engine = "auto", cache_policy = "freq";
    std::string cpus;
    bool exclusive_open = false, mlock = false;
    // Prompt reuse: the KDA checkpoint pool's bytes ("" = the default, 4
    // checkpoints; 0 = none) and the positions between checkpoints.
    std::string prompt_cache_bytes;
    std::string session_cache_bytes = "auto";
    int checkpoint_every = 0;
};

std::shared_ptr<ServeCommand> add_serve_command(CLI::App &app) {
    auto s = std::make_shared<ServeCommand>();
    CLI::App *a = app.add_subcommand("serve", "serve the model over an OpenAI-compatible HTTP API");
    s->app = a;
    a->add_option("model", s->model, "container directory")->required();
    a->add_option("--host", s->host, "address to listen on (default 127.0.0.1)");
    a->add_option("--port", s->port, "TCP port (default 8000; 0 = any free port, printed at start)")
        ->check(CLI::Range(0, 65535));
    a->add_option("--api-key", s->api_key,
                  "require 'Authorization: Bearer KEY' on /v1 routes (default: $SLUICE_API_KEY, else none)");
    a->add_option("--budget", s->budget, "hard RAM budget, e.g. 2G (default 0: choose; see `sluice plan`)");
    a->add_option("--max-queue", s->max_queue,
                  "requests that may wait behind the running one; past it the server answers 429 (default 8)")
        ->check(CLI::Range(0, 4096));
    a->add_option("--model-name", s->model_name, "model id clients name (default: the container's directory name)");
    a->add_option("--ctx", s->ctx, "maximum context length (default 4096)")->check(CLI::Range(0, 1 << 24));
    a->add_option("--threads,-t", s->threads, "worker threads for kernels (0 = all CPUs)")->check(CLI::Range(0, 1024));
    a->add_option("--max-body", s->max_body, "largest request body accepted; larger gets 413 (default 1M; 64M with --vision)");
    a->add_option("--read-timeout", s->read_timeout, "seconds to wait for a request's bytes (default 30)")
        ->check(CLI::Range(1, 3600));
    a->add_option("--write-timeout", s->write_timeout, "seconds to wait for a client to take response bytes (default 30)")
        ->check(CLI::Range(1, 3600));
    a->add_option("--keep-alive", s->keep_alive, "seconds an idle keep-alive connection stays open (default 5)")
        ->check(CLI::Range(0, 3600));
    a->add_option("--request-timeout", s->request_timeout,
                  "seconds one request may take, queue wait included; a generation cut short ends with "
                  "finish_reason 'length' (default 0: no limit)")
        ->check(finite_number())
        ->check(CLI::Range(0.0, 86400.0));
    a->add_option("--http-threads", s->http_threads, "HTTP connection threads (default: max-queue + 16)")
        ->check(CLI::Range(0, 4096));
    a->add_flag("--log", s->log,
                "log one line per request on stderr: latency, prompt and completion tokens, tokens/s");
    a->add_flag("--vision", s->vision, "load the vision tower: chat messages may carry images (Kimi K3)");
    a->add_flag("--allow-local-images", s->allow_local_images,
                "image parts may name files on this machine (file: URLs or paths); default: data: URLs only");
    a->add_flag("--no-thinking", s->no_thinking,
                "K3: answer without the think channel unless a request asks for reasoning (reasoning_effort)");
    a->add_option("--thinking-budget,--reasoning-budget", s->thinking_budget,
                  "K3: tokens the think channel may take before its end is forced, for requests that give no "
                  "thinking_budget (default 4096; -1: no budget of its own). JSON and forced tool-call answers "
                  "cap it further so the answer fits in max_tokens")
        ->check(CLI::Range((int64_t)-1, (int64_t)1 << 30));
    a->add_option("--alias", s->aliases, "another model id clients may use (repeatable)");
    a->add_option("--test-forced-output", s->forced_output_file,
                  "TEST ONLY: a JSON array of strings; each chat reply is the next one's tokens (markup mode) "
                  "instead of the model's choices ({\"prefix\": TEXT}: those tokens, then the model samples on)");
    a->add_flag("--verify", s->verify, "check the CRC32 of every expert record read");
    a->add_option("--chunk", s->chunk, "prefill chunk size in tokens (default 64)")->check(CLI::Range(0, 4096));
    a->add_option("--wave", s->wave,
                  "prompt tokens per expert-major prefill wave (default 0: the memory plan's, up to the context)")
        ->check(CLI::Range(0, 1 << 24));
    a->add_option("--io-threads", s->io_threads, "expert reads in flight, as --io-depth (-1 = synchronous reads)")
        ->check(CLI::Range(-1, 64));
    a->add_option("--io-depth", s->io_depth, "expert reads in flight (default 8)")->check(CLI::Range(0, 256));
    a->add_option("--io-engine", s->io_engine,
                  "how expert reads run: auto (io_uring if the kernel allows), uring, threads")
        ->check(CLI::IsMember({"auto", "uring", "threads"}));
    a->add_option("--cache-policy", s->cache_policy, "expert cache policy: freq (default), pred (learned next-visit probability), lfru, lru")
        ->check(CLI::IsMember({"freq", "pred", "lfru", "lru"}));
    a->add_flag("--no-direct", s->no_direct, "buffered reads instead of O_DIRECT");
    a->add_flag("--no-cache", s->no_cache, "no expert cache beyond the records in use");
    a->add_flag("--no-readahead", s->no_readahead, "read a layer's experts only when they are needed");
    a->add_flag("--no-lookahead", s->no_lookahead, "no next-layer router guesses");
    a->add_flag("--no-hotlist", s->no_hotlist, "do not pre-warm the cache from usage.waste");
    a->add_option("--hotlist", s->hotlist, "usage file to pre-warm the cache from");
    a->add_option("--learn", s->learn, "write per-expert usage (the hotlist) to this file when the server stops");
    a->add_option("--backend", s->backend, "kernel path: auto, scalar, avx2, avx512, neon")
        ->check(CLI::IsMember({"auto", "scalar", "avx2", "avx512", "neon"}));
    a->add_option("--cpus", s->cpus, "pin the compute pool to these CPUs, e.g. 0-5 or 0-2,6-8 (--threads 0: one per CPU)")
        ->check(cpu_list());
    a->add_flag("--exclusive-open", s->exclusive_open,
                "hold an exclusive advisory lock on the container; refused while another process has it open");
    a->add_flag("--mlock", s->mlock, "lock the trunk in RAM (needs RLIMIT_MEMLOCK, see ulimit -l)");
    a->add_option("--prompt-cache-bytes", s->prompt_cache_bytes,
                  "bytes of recurrent-state checkpoints kept for prompt reuse, counted in the memory plan, e.g. "
                  "512M (default: 4 checkpoints; 0 = none: a reused prefix re-evaluates KDA models from 0)");
    a->add_option("--session-cache-bytes", s->session_cache_bytes,
                  "bytes of other conversations' sessions kept aside while one runs, so a conversation that "
                  "comes back goes on from its own prefix; counted in the memory plan (default auto: room for "
                  "two at --ctx; 0 = keep only the live session)");
    a->add_option("--checkpoint-every", s->checkpoint_every,
                  "positions between recurrent-state checkpoints (default 64; -1 = only at prompt ends and "
                  "reuse points)")
        ->check(CLI::Range(-1, 1 << 24));
    return s;
}

namespace {

std::string default_model_name(const std::string &path) {
    std::filesystem::path p(path);
    while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
    std::string name = p.filename().string();
    if (name.size() > 6 && name.compare(name.size() - 6, 6, ".waste") == 0) name.resize(name.size() - 6);
    return name.empty() ? "sluice" : name;
}

int serve(ServeCommand &s) {
    uint64_t budget = 0, max_body = 0;
    if (!parse_size(s.budget, &budget)) {
        std::fprintf(stderr, "sluice serve: --budget '%s' is not a size (examples: 2G, 1.5GiB, 512M)\n",
                     s.budget.c_str());
        return 2;
    }
    // A base64 image is 4/3 of its file: room for a ~48 MB picture.
    if (s.vision && s.app->get_option("--max-body")->count() == 0) s.max_body = "64M";
    if (!parse_size(s.max_body, &max_body) || max_body == 0) {
        std::fprintf(stderr, "sluice serve: --max-body '%s' is not a positive size (examples: 1M, 64K)\n",
                     s.max_body.c_str());
        return 2;
    }
    // An empty key would mean "no authentication": `--api-key "$KEY"` with
    // KEY unset must not start an open server. A key the Authorization
    // header cannot carry (control bytes, blanks at its ends, which the
    // header parser trims) would lock every client out: refused too.
    const bool key_given = s.app->get_option("--api-key")->count() > 0;
    const char *env_key = std::getenv("SLUICE_API_KEY");
    if (!key_given && env_key) s.api_key = env_key;
    if ((key_given || env_key) && s.api_key.empty()) {
        std::fprintf(stderr, "sluice serve: %s is empty: refusing to start without authentication (omit it to run "
                             "without a key)\n",
                     key_given ? "--api-key" : "SLUICE_API_KEY");
        return 2;
    }
    for (unsigned char ch : s.api_key)
        if (ch < 0x21 || ch == 0x7f) {
            std::fprintf(stderr, "sluice serve: the API key holds a blank or control character; an Authorization "
                                 "header cannot carry it\n");
            return 2;
        }

    // SIGINT/SIGTERM stop the server from a thread of their own (sigwait),
    // not from a handler: stopping takes locks. Block them before any thread
    // starts (sluice_open starts I/O and kernel threads) so every thread
    // inherits the mask. A client that hangs up mid-write must not kill the
    // process: ignore SIGPIPE.
    ::signal(SIGPIPE, SIG_IGN);
    sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_set, nullptr);

    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.n_threads = s.threads;
    cfg.max_context = s.ctx;
    if (!s.prompt_cache_bytes.empty()) {
        uint64_t pc = 0;
        if (!parse_size(s.prompt_cache_bytes, &pc) || pc > (uint64_t)INT64_MAX) {
            std::fprintf(stderr, "sluice serve: --prompt-cache-bytes '%s' is not a size (examples: 512M, 2G, 0)\n",
                         s.prompt_cache_bytes.c_str());
            return 2;
        }
        cfg.checkpoint_bytes = pc == 0 ? -1 : (int64_t)pc;
    }
    if (s.session_cache_bytes == "auto") {
        cfg.session_bytes = SLUICE_SESSION_BYTES_AUTO;
    } else {
        uint64_t sb = 0;
        if (!parse_size(s.session_cache_bytes, &sb) || sb > (1ull << 50)) {
            std::fprintf(stderr,
                         "sluice serve: --session-cache-bytes '%s' is not a size up to 1P or auto (examples: 256M, "
                         "1G, 0, auto)\n",
                         s.session_cache_bytes.c_str());
            return 2;
        }
        cfg.session_bytes = sb;
    }
    cfg.checkpoint_interval = s.checkpoint_every;
    cfg.replay_log = 1;  // agents resend a shared prefix with their own tail: rewinds inside the log are replays
    cfg.budget_bytes = budget;
    cfg.vision = s.vision ? 1 : 0;
    cfg.verify_records = s.verify ? 1 : 0;
    cfg.prefill_chunk = s.chunk;
    cfg.prefill_wave = s.wave;
    cfg.io_threads = s.io_threads;
    cfg.io_depth = s.io_depth;
    cfg.io_engine = s.io_engine == "uring"     ? SLUICE_IO_URING
                    : s.io_engine == "threads" ? SLUICE_IO_THREADS
                                               : SLUICE_IO_AUTO;
    cfg.cache_policy = s.cache_policy.c_str();
    cfg.no_direct_io = s.no_direct;
    cfg.no_cache = s.no_cache;
    cfg.no_readahead = s.no_readahead;
    cfg.no_lookahead = s.no_lookahead;
    cfg.no_hotlist = s.no_hotlist;
    cfg.hotlist = s.hotlist.empty() ? nullptr : s.hotlist.c_str();
    cfg.cpus = s.cpus.empty() ? nullptr : s.cpus.c_str();
    cfg.exclusive_open = s.exclusive_open ? 1 : 0;
    cfg.lock_memory = s.mlock ? 1 : 0;
    cfg.backend = s.backend == "scalar"   ? SLUICE_BACKEND_SCALAR
                  : s.backend == "avx2"   ? SLUICE_BACKEND_AVX2
                  : s.backend == "avx512" ? SLUICE_BACKEND_AVX512
                  : s.backend == "neon"   ? SLUICE_BACKEND_NEON
                                          : SLUICE_BACKEND_AUTO;
    std::vector<sluice::server::ServerOptions::ForcedOutput> forced;
    if (!s.forced_output_file.empty()) {
        std::string text;
        if (sluice::Status rs = sluice::read_input_file(s.forced_output_file, 64u << 20, &text); !rs) {
            std::fprintf(stderr, "sluice serve: --test-forced-output: %s\n", rs.message().c_str());
            return 1;
        }
        try {
            // A string is a whole reply; {"prefix": TEXT} is forced, then the model samples on.
            for (const auto &v : nlohmann::json::parse(text)) {
                if (v.is_object()) forced.push_back({v.at("prefix").get<std::string>(), true});
                else forced.push_back({v.get<std::string>(), false});
            }
        } catch (const std::exception &e) {
            std::fprintf(stderr,
                         "sluice serve: --test-forced-output %s: not a JSON array of strings and {\"prefix\": ...} "
                         "objects: %s\n",
                         s.forced_output_file.c_str(), e.what());
            return 2;
        }
        std::fprintf(stderr, "sluice serve: TEST MODE: replies are forced from %s\n", s.forced_output_file.c_str());
    }
    if (std::string hint = checkpoint_hint(s.model); !hint.empty()) {
        std::fprintf(stderr, "sluice serve: %s\n", hint.c_str());
        return 1;
    }
    sluice_ctx *ctx = nullptr;
    sluice_status st = sluice_open(s.model.c_str(), &cfg, &ctx);
    if (st != SLUICE_OK) {
        std::fprintf(stderr, "sluice serve: cannot open %s: %s: %s\n", s.model.c_str(), sluice_status_name(st),
                     sluice_last_error(ctx));
        sluice_close(ctx);
        return 1;
    }
    std::unique_ptr<server::Model> model = server::make_sluice_model(ctx, s.vision);  // owns ctx now
    std::string err;
    if (!server::sluice_model_check(*model, &err))
        // Still served: /v1/completions with token ids; chat answers 400.
        std::fprintf(stderr, "sluice serve: %s: %s; serving token-id completions only\n", s.model.c_str(),
                     err.c_str());

    server::ServerOptions o;
    o.host = s.host;
    o.port = s.port;
    o.api_key = s.api_key;
    o.model_name = s.model_name.empty() ? default_model_name(s.model) : s.model_name;
    o.max_queue = (size_t)s.max_queue;
    o.max_body = (size_t)max_body;
    o.read_timeout_s = s.read_timeout;
    o.write_timeout_s = s.write_timeout;
    o.keep_alive_s = s.keep_alive;
    o.request_timeout_s = s.request_timeout;
    o.http_threads = s.http_threads;
    o.log_requests = s.log;
    o.allow_local_images = s.allow_local_images;
    o.aliases = s.aliases;
    o.default_thinking = !s.no_thinking;
    o.default_thinking_budget = s.thinking_budget;
    o.forced_outputs = forced;

    server::Server srv(*model, o);
    if (!srv.bind(&err)) {
        std::fprintf(stderr, "sluice serve: %s\n", err.c_str());
        return 1;
    }
    // Joined, never detached: a detached stopper could still be inside
    // srv.stop() (the scheduler's lock, its queue) when serve() returns and
    // destroys srv, which corrupted the heap at exit ("malloc(): unaligned
    // tcache chunk", once in CI). When run() ends on its own, serve() wakes
    // the stopper with the same signal and `finished` tells it apart.
    std::atomic<bool> finished{false};
    std::thread stopper([&srv, &finished, stop_set] {
        int sig = 0;
        sigwait(&stop_set, &sig);
        if (finished.load()) return;
        std::fprintf(stderr, "sluice serve: signal %d, stopping\n", sig);
        srv.stop();
    });

    sluice_info info;
    sluice_info_get(ctx, &info);
    std::fprintf(stderr, "sluice serve: %s (%s, vocab %d, context %d), queue %d, %s\n", o.model_name.c_str(),
                 info.family, model->vocab(), model->context(), s.max_queue,
                 o.api_key.empty() ? "no API key" : "API key required");
    // One line on stdout that scripts wait for (the port matters with --port 0).
    std::printf("listening on http://%s:%d\n", o.host.c_str(), srv.port());
    std::fflush(stdout);
    bool ok = srv.run();
    finished = true;
    pthread_kill(stopper.native_handle(), SIGTERM);  // blocked in every thread: only its sigwait takes it
    stopper.join();
    srv.stop();
    if (!s.learn.empty() && sluice_save_usage(ctx, s.learn.c_str()) != SLUICE_OK)
        std::fprintf(stderr, "sluice serve: --learn: %s\n", sluice_last_error(ctx));
    return ok ? 0 : 1;
}

}  // namespace

bool run_serve_command(ServeCommand &s, int *rc) {
    if (!s.app || !s.app->parsed()) return false;
    *rc = serve(s);
    return true;
}

}  // namespace sluice
