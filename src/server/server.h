// `sluice serve`: an OpenAI-compatible HTTP server on cpp-httplib.
//
//   POST /v1/chat/completions   chat, streamed (SSE) or not
//   POST /v1/completions        text or token-id prompt, echo, logprobs
//   GET  /v1/models             the one model served
//   GET  /health                liveness, queue depth and counters (no key needed)
//   GET  /metrics               Prometheus text: requests, tokens, queue, expert cache and reads
//   POST /tokenize, /detokenize llama-server's token utilities
//   GET  /                      a small self-contained chat page
//
// One Scheduler (one worker thread) owns the Model; HTTP threads parse and
// check a request, submit it, and wait for or stream its events.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/model.h"
#include "server/metrics.h"
#include "server/scheduler.h"

namespace httplib {
class Server;
}

namespace sluice::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8000;  // 0: any free port (see Server::port)
    std::string api_key;     // empty: no authentication
    std::string model_name;  // the id /v1/models lists and requests must name
    size_t max_queue = 8;    // requests waiting behind the running one; past it: 429
    size_t max_body = 1 << 20;  // bytes; larger bodies get 413
    int read_timeout_s = 30;    // socket read (request) timeout
    int write_timeout_s = 30;   // socket write (response) timeout
    int keep_alive_s = 5;       // idle keep-alive connections are closed after this
    double request_timeout_s = 0;  // whole request, queue wait included; 0 = none
    int http_threads = 0;          // 0: max_queue + 16
    bool log_requests = false;     // one line per request on stderr
    bool allow_local_images = false;  // image parts may name file: URLs / paths on this machine
    std::vector<std::string> aliases;  // more ids clients may name the model by (--alias)
    bool default_thinking = true;      // K3: think unless a request says otherwise (--no-thinking: false)
    int64_t default_thinking_budget = 4096;  // think-channel tokens when a request gives no thinking_budget (-1: none)
    // Test only (--test-forced-output FILE): each chat request's reply is the
    // next of these texts (in turn) instead of the model's choices; with
    // then_sample, the text is a prefix and the model samples on after it.
    struct ForcedOutput {
        std::string text;
        bool then_sample = false;
        ForcedOutput(std::string t, bool sample = false) : text(std::move(t)), then_sample(sample) {}
        ForcedOutput(const char *t) : text(t) {}
    };
    std::vector<ForcedOutput> forced_outputs;
};

class Server {
public:
    Server(Model &model, ServerOptions opt);
    ~Server();
    Server(const Server &) = delete;
    Server &operator=(const Server &) = delete;

    // Binds the listening socket; false with *err on failure.
    bool bind(std::string *err);
    int port() const { return port_; }
    // Serves until stop(); returns false if the listener failed.
    bool run();
    // Stops listening and the worker (safe from another thread or a signal
    // watcher; not from a signal handler).
    void stop();
    SchedulerStats stats() const { return sched_->stats(); }

private:
    void routes();
    // The model id, or one of its aliases.
    bool serves(const std::string &id) const {
        if (id == opt_.model_name) return true;
        for (const std::string &a : opt_.aliases)
            if (id == a) return true;
        return false;
    }
    Model &model_;
    ServerOptions opt_;
    std::unique_ptr<Scheduler> sched_;
    std::unique_ptr<httplib::Server> http_;
    int port_ = 0;
    std::atomic<uint64_t> forced_next_{0};
    Metrics metrics_;
};

}  // namespace sluice::server
