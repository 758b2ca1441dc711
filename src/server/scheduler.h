// One generation at a time per model: a single worker thread owns the Model
// (a sluice context is not thread-safe) and takes jobs from a bounded queue.
// HTTP threads submit a Job and read its events; past the queue's bound a
// submission is refused (the server answers 429).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "server/generate.h"

namespace sluice::server {

struct Event {
    enum class Kind { prompt, delta, done, error } kind = Kind::done;
    PromptInfo prompt;
    Delta delta;
    GenResult result;
    ApiError error;
};

// A request on its way through the worker; shared by the HTTP thread that
// submitted it and the worker. Events are buffered: a slow reader never
// blocks the worker (one request's output is bounded by its max_tokens).
class Job final : public GenObserver {
public:
    explicit Job(GenRequest req, std::chrono::steady_clock::time_point deadline =
                                     std::chrono::steady_clock::time_point::max())
        : req_(std::move(req)), deadline_(deadline) {}

    const GenRequest &request() const { return req_; }
    std::chrono::steady_clock::time_point deadline() const { return deadline_; }

    // Reader side. Waits up to `wait` for the next event; false on timeout.
    bool next(Event *ev, std::chrono::milliseconds wait);
    // The client went away: the worker drops the job (queued) or stops it
    // at the next token (running).
    void cancel() { cancelled_.store(true); }

    // Worker side.
    bool cancelled() override { return cancelled_.load(); }
    void on_prompt(PromptInfo info) override;
    void on_delta(Delta d) override;
    void finish(const GenResult &r);
    void fail(const ApiError &e);

private:
    void push(Event ev);
    GenRequest req_;
    std::chrono::steady_clock::time_point deadline_;
    std::atomic<bool> cancelled_{false};
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Event> events_;
};

struct SchedulerStats {
    uint64_t queued = 0;     // waiting now, behind the job being served
    uint64_t running = 0;    // 0 or 1
    uint64_t max_queue = 0;
    uint64_t accepted = 0;   // submissions taken
    uint64_t rejected = 0;   // submissions refused (queue full)
    uint64_t completed = 0;  // finished with a result
    uint64_t failed = 0;     // finished with an error (not counting cancellations)
    uint64_t cancelled = 0;  // dropped or stopped because the client left
    uint64_t timed_out = 0;  // expired while queued
    uint64_t peak_queued = 0;
};

class Scheduler {
public:
    Scheduler(Model &model, size_t max_queue);
    ~Scheduler();  // stops the running job at its next token, fails the queued ones
    Scheduler(const Scheduler &) = delete;
    Scheduler &operator=(const Scheduler &) = delete;

    enum class Submit { ok, full, stopping };
    Submit submit(std::shared_ptr<Job> job);
    SchedulerStats stats() const;
    void stop();

private:
    void worker();
    void update_depth();  // under mu_
    Model &model_;
    const size_t max_queue_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<Job>> queue_;
    std::shared_ptr<Job> running_;  // so stop() can cut it short
    bool stopping_ = false;
    SchedulerStats stats_;
    std::thread thread_;
};

}  // namespace sluice::server
