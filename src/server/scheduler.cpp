// The worker thread and its bounded queue (see scheduler.h).
#include "server/scheduler.h"

#include <exception>

namespace sluice::server {

bool Job::next(Event *ev, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, wait, [&] { return !events_.empty(); })) return false;
    *ev = std::move(events_.front());
    events_.pop_front();
    return true;
}

void Job::push(Event ev) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        events_.push_back(std::move(ev));
    }
    cv_.notify_all();
}

void Job::on_prompt(PromptInfo info) {
    Event ev;
    ev.kind = Event::Kind::prompt;
    ev.prompt = std::move(info);
    push(std::move(ev));
}

void Job::on_delta(Delta d) {
    Event ev;
    ev.kind = Event::Kind::delta;
    ev.delta = std::move(d);
    push(std::move(ev));
}

void Job::finish(const GenResult &r) {
    Event ev;
    ev.kind = Event::Kind::done;
    ev.result = r;
    push(std::move(ev));
}

void Job::fail(const ApiError &e) {
    Event ev;
    ev.kind = Event::Kind::error;
    ev.error = e;
    push(std::move(ev));
}

Scheduler::Scheduler(Model &model, size_t max_queue) : model_(model), max_queue_(max_queue) {
    stats_.max_queue = max_queue;
    thread_ = std::thread([this] { worker(); });
}

Scheduler::~Scheduler() {
    stop();
    if (thread_.joinable()) thread_.join();
}

void Scheduler::stop() {
    std::deque<std::shared_ptr<Job>> left;
    {
        std::lock_guard<std::mutex> lk(mu_);
        stopping_ = true;
        left.swap(queue_);
        if (running_) running_->cancel();
    }
    cv_.notify_all();
    ApiError e;
    e.status = 503;
    e.type = "server_error";
    e.message = "the server is shutting down";
    for (auto &j : left) j->fail(e);
}

Scheduler::Submit Scheduler::submit(std::shared_ptr<Job> job) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (stopping_) return Submit::stopping;
        // max_queue counts waiting jobs; the running one is not waiting (so
        // with max_queue 0 an idle worker still takes one). The slot of a
        // finished job is free before its client sees the end (finish() is
        // called under mu_), so a client's next request never gets a
        // spurious 429.
        if (queue_.size() + stats_.running >= max_queue_ + 1) {
            stats_.rejected++;
            return Submit::full;
        }
        queue_.push_back(std::move(job));
        stats_.accepted++;
        update_depth();
    }
    cv_.notify_one();
    return Submit::ok;
}

void Scheduler::update_depth() {
    // "Waiting" is every job behind the one being served. Between two jobs
    // the worker is idle for a moment while the next still sits in queue_:
    // that one is served next, not waiting behind anyone.
    const uint64_t in_system = queue_.size() + stats_.running;
    stats_.queued = in_system > 0 ? in_system - 1 : 0;
    if (stats_.queued > stats_.peak_queued) stats_.peak_queued = stats_.queued;
}

SchedulerStats Scheduler::stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    return stats_;
}

void Scheduler::worker() {
    for (;;) {
        std::shared_ptr<Job> job;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
            if (stopping_) return;
            job = std::move(queue_.front());
            queue_.pop_front();
            update_depth();
            if (job->cancelled()) {
                stats_.cancelled++;
                continue;
            }
            if (std::chrono::steady_clock::now() >= job->deadline()) {
                stats_.timed_out++;
                ApiError e;
                e.status = 503;
                e.type = "server_error";
                e.code = "timeout";
                e.message = "the request waited in the queue past the server's time limit";
                job->fail(e);
                continue;
            }
            stats_.running = 1;
            running_ = job;
            update_depth();
        }
        GenResult res;
        ApiError err;
        bool ok = false;
        try {
            ok = generate(model_, job->request(), job->deadline(), *job, &res, &err);
        } catch (const std::exception &ex) {
            // Nothing in a request may take the server down: report and go on.
            err = ApiError{500, "server_error", std::string("internal error: ") + ex.what(), {}, {}};
        }
        std::lock_guard<std::mutex> lk(mu_);
        if (!ok && err.status == 499 && stopping_)
            err = ApiError{503, "server_error", "the server is shutting down", {}, {}};
        if (ok) job->finish(res);
        else job->fail(err);
        running_.reset();
        stats_.running = 0;
        update_depth();
        if (ok) stats_.completed++;
        else if (err.status == 499) stats_.cancelled++;
        else stats_.failed++;
    }
}

}  // namespace sluice::server
