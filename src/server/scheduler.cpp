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
        // max_queue counts waiting jobs; the running one is not waiting.
        if (queue_.size() >= max_queue_) {
            stats_.rejected++;
            return Submit::full;
        }
        queue_.push_back(std::move(job));
        stats_.accepted++;
        stats_.queued = queue_.size();
        if (stats_.queued > stats_.peak_queued) stats_.peak_queued = stats_.queued;
    }
    cv_.notify_one();
    return Submit::ok;
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
            stats_.queued = queue_.size();
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
        if (ok) job->finish(res);
        else job->fail(err);
        std::lock_guard<std::mutex> lk(mu_);
        stats_.running = 0;
        if (ok) stats_.completed++;
        else if (err.status == 499) stats_.cancelled++;
        else stats_.failed++;
    }
}

}  // namespace sluice::server
