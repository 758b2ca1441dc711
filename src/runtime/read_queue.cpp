#include "runtime/read_queue.h"

#include <cerrno>
#include <cstring>
#include <unistd.h>

#ifdef SLUICE_HAVE_URING
#include <liburing.h>
#endif

namespace sluice {

const char *io_engine_name(IoEngine e) {
    switch (e) {
    case IoEngine::uring: return "io_uring";
    case IoEngine::threads: return "threads";
    default: return "auto";
    }
}

namespace {

// The two waiting lines both engines share: certain reads, then guesses.
struct Lines {
    std::deque<std::unique_ptr<ReadJob>> certain, guess;
    bool empty() const { return certain.empty() && guess.empty(); }
    std::unique_ptr<ReadJob> pop() {
        auto &q = certain.empty() ? guess : certain;
        auto j = std::move(q.front());
        q.pop_front();
        return j;
    }
    void push(std::unique_ptr<ReadJob> j) { (j->guess ? guess : certain).push_back(std::move(j)); }
    std::vector<std::unique_ptr<ReadJob>> cancel(const std::function<bool(const ReadJob &)> &drop) {
        std::vector<std::unique_ptr<ReadJob>> out;
        for (auto it = guess.begin(); it != guess.end();) {
            if (drop(**it)) {
                out.push_back(std::move(*it));
                it = guess.erase(it);
            } else {
                ++it;
            }
        }
        return out;
    }
};

ssize_t pread_full(ReadJob &j) {
    while (j.got < j.len) {
        ssize_t r = ::pread(j.fd, j.buf + j.got, j.len - j.got, (off_t)(j.off + j.got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -errno;
        if (r == 0) break;  // end of file: the caller reports the short read
        j.got += (size_t)r;
    }
    return (ssize_t)j.got;
}

// What both engines share: the two lines under one lock, and the calls
// that only look at the lines. Guess cancellation must never wait on a read
// in flight, so it touches the queued lines only.
class LinedQueue : public ReadQueue {
public:
    int depth() const override { return depth_; }
    std::vector<std::unique_ptr<ReadJob>> cancel_guesses(const std::function<bool(const ReadJob &)> &drop) override {
        std::lock_guard<std::mutex> lk(mu_);
        return lines_.cancel(drop);
    }

protected:
    explicit LinedQueue(int depth) : depth_(depth) {}
    int depth_;
    mutable std::mutex mu_;
    Lines lines_;
};

class ThreadQueue final : public LinedQueue {
public:
    explicit ThreadQueue(int depth) : LinedQueue(depth) {
        for (int i = 0; i < depth; i++) threads_.emplace_back([this] { loop(); });
    }
    ~ThreadQueue() override {
        {
            std::lock_guard<std::mutex> lk(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto &t : threads_) t.join();
    }
    const char *name() const override { return "threads"; }
    void push(std::unique_ptr<ReadJob> job) override {
        {
            std::lock_guard<std::mutex> lk(mu_);
            lines_.push(std::move(job));
        }
        cv_.notify_one();
    }
    void hold(bool on) override {
        {
            std::lock_guard<std::mutex> lk(mu_);
            held_ = on;
        }
        cv_.notify_all();
    }

private:
    void loop() {
        for (;;) {
            std::unique_ptr<ReadJob> j;
            {
                std::unique_lock<std::mutex> lk(mu_);
                cv_.wait(lk, [&] { return stop_ || (!held_ && !lines_.empty()); });
                if (stop_) return;
                j = lines_.pop();
            }
            const ssize_t r = pread_full(*j);
            j->done(r);
        }
    }
    std::condition_variable cv_;
    bool stop_ = false, held_ = false;
    std::vector<std::thread> threads_;
};

#ifdef SLUICE_HAVE_URING
// One ring; whoever queues a read submits it at once if fewer than `depth`
// are in flight, and one reaper thread takes completions and submits what
// waits. liburing's submission and completion sides may run on different
// threads; submissions are serialised by mu_.
class UringQueue final : public LinedQueue {
public:
    static std::unique_ptr<UringQueue> create(int depth, std::string *why) {
        std::unique_ptr<UringQueue> q(new UringQueue(depth));
        const int rc = io_uring_queue_init((unsigned)depth + 1, &q->ring_, 0);
        if (rc < 0) {
            if (why) *why = std::string("io_uring unavailable (") + strerror(-rc) + ")";
            return nullptr;
        }
        q->ok_ = true;
        q->reaper_ = std::thread([p = q.get()] { p->reap(); });
        return q;
    }
    ~UringQueue() override {
        if (!ok_) return;
        {
            // Reads in flight write into buffers their owners still hold:
            // let them land before the ring goes.
            std::unique_lock<std::mutex> lk(mu_);
            stop_ = true;
            cv_idle_.wait(lk, [&] { return inflight_ == 0; });
            io_uring_sqe *sqe = io_uring_get_sqe(&ring_);
            if (sqe) {
                io_uring_prep_nop(sqe);
                io_uring_sqe_set_data(sqe, nullptr);  // the stop sentinel
                io_uring_submit(&ring_);
            }
        }
        reaper_.join();
        // Reads still queued never started: their owners hear -ECANCELED.
        Lines left;
        {
            std::lock_guard<std::mutex> lk(mu_);
            std::swap(left, lines_);
        }
        while (!left.empty()) left.pop()->done(-ECANCELED);
        io_uring_queue_exit(&ring_);
    }
    const char *name() const override { return "io_uring"; }
    void push(std::unique_ptr<ReadJob> job) override {
        std::lock_guard<std::mutex> lk(mu_);
        lines_.push(std::move(job));
        fill_locked();
    }
    void hold(bool on) override {
        std::lock_guard<std::mutex> lk(mu_);
        held_ = on;
        fill_locked();
    }

private:
    explicit UringQueue(int depth) : LinedQueue(depth) {}
    void submit_locked(ReadJob *j) {
        io_uring_sqe *sqe = io_uring_get_sqe(&ring_);
        io_uring_prep_read(sqe, j->fd, j->buf + j->got, (unsigned)(j->len - j->got), j->off + j->got);
        io_uring_sqe_set_data(sqe, j);
        io_uring_submit(&ring_);
    }
    void fill_locked() {
        while (!stop_ && !held_ && inflight_ < depth_ && !lines_.empty()) {
            ReadJob *j = lines_.pop().release();
            inflight_++;
            submit_locked(j);
        }
    }
    void reap() {
        for (;;) {
            io_uring_cqe *cqe = nullptr;
            const int rc = io_uring_wait_cqe(&ring_, &cqe);
            if (rc == -EINTR) continue;
            if (rc < 0) return;  // the ring is broken; the destructor cancels what waits
            auto *j = static_cast<ReadJob *>(io_uring_cqe_get_data(cqe));
            const int res = cqe->res;
            io_uring_cqe_seen(&ring_, cqe);
            if (!j) return;  // stop sentinel
            std::unique_ptr<ReadJob> own;
            {
                std::lock_guard<std::mutex> lk(mu_);
                if (res == -EINTR || res == -EAGAIN) {
                    submit_locked(j);  // retry as is
                    continue;
                }
                if (res > 0 && j->got + (size_t)res < j->len) {
                    j->got += (size_t)res;  // short read: resume where it stopped
                    submit_locked(j);
                    continue;
                }
                if (res > 0) j->got += (size_t)res;
                inflight_--;
                own.reset(j);
                fill_locked();
                if (inflight_ == 0) cv_idle_.notify_all();
            }
            own->done(res < 0 ? (ssize_t)res : (ssize_t)own->got);
        }
    }
    io_uring ring_{};
    bool ok_ = false;
    std::condition_variable cv_idle_;
    int inflight_ = 0;
    bool stop_ = false, held_ = false;
    std::thread reaper_;
};
#endif

}  // namespace

int read_queue_threads(IoEngine e, int depth) {
    if (depth < 1) depth = 1;
#ifdef SLUICE_HAVE_URING
    if (e != IoEngine::threads) {
        // The same question make_read_queue asks: may this process set up a
        // ring (seccomp, io_uring_disabled and old kernels say no)?
        io_uring ring;
        if (io_uring_queue_init(2, &ring, 0) == 0) {
            io_uring_queue_exit(&ring);
            return 1;
        }
    }
#else
    (void)e;
#endif
    return depth;
}

std::unique_ptr<ReadQueue> make_read_queue(IoEngine e, int depth, std::string *why) {
    if (depth < 1) depth = 1;
#ifdef SLUICE_HAVE_URING
    if (e != IoEngine::threads) {
        std::string w;
        if (auto q = UringQueue::create(depth, &w)) return q;
        if (why) *why = w;
    }
#else
    if (e != IoEngine::threads && why) *why = "built without liburing";
#endif
    return std::make_unique<ThreadQueue>(depth);
}

}  // namespace sluice
