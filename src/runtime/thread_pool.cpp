#include "runtime/thread_pool.h"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SLUICE_PAUSE() _mm_pause()
#else
#define SLUICE_PAUSE() std::this_thread::yield()
#endif

namespace sluice {

ThreadPool::ThreadPool(int n_threads) : n_(n_threads < 1 ? 1 : n_threads) { start({}); }

ThreadPool::ThreadPool(int n_threads, const std::vector<int> &cpus) : n_(n_threads < 1 ? 1 : n_threads) {
    start(cpus);
}

void ThreadPool::start(const std::vector<int> &cpus) {
    for (int i = 1; i < n_; i++) {
        threads_.emplace_back([this, i] { worker(i); });
#if defined(__linux__)
        if (!cpus.empty()) {
            // Worker i takes the i-th listed CPU (slice 0, the caller's,
            // would take the first): a failed pin leaves the OS to place it.
            cpu_set_t set;
            CPU_ZERO(&set);
            const int c = cpus[(size_t)i % cpus.size()];
            if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
            pthread_setaffinity_np(threads_.back().native_handle(), sizeof set, &set);
        }
#endif
    }
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_work_.notify_all();
    for (auto &t : threads_) t.join();
}

namespace {
// A decode step issues ~1000 parallel_for calls; a futex sleep and wake per
// call cost several microseconds each on these VMs (pvm_irq_enable and futex
// were ~8% of decode). Workers and the caller first spin for about this many
// pause instructions (tens of microseconds), then block as before.
constexpr int kSpin = 4000;
}  // namespace

static void slice_of(int64_t n, int slices, int i, int64_t *b, int64_t *e) {
    *b = n * i / slices;
    *e = n * (i + 1) / slices;
}

void ThreadPool::worker(int id) {
    uint64_t seen = 0;
    for (;;) {
        const std::function<void(int64_t, int64_t)> *job;
        int64_t n;
        int slices;
        for (int i = 0; i < kSpin && gen_seen_.load(std::memory_order_acquire) == seen; i++) SLUICE_PAUSE();
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_work_.wait(lk, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            job = job_;
            n = job_n_;
            slices = job_slices_;
        }
        if (id < slices) {
            int64_t b, e;
            slice_of(n, slices, id, &b, &e);
            if (b < e) (*job)(b, e);
        }
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (--pending_ == 0) {
                pending_seen_.store(0, std::memory_order_release);
                cv_done_.notify_one();
            }
        }
    }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)> &fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t want = n / grain;
    int slices = (int)(want < n_ ? (want < 1 ? 1 : want) : n_);
    if (slices == 1) {
        fn(0, n);
        return;
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        job_ = &fn;
        job_n_ = n;
        job_slices_ = slices;
        pending_ = n_ - 1;
        pending_seen_.store(pending_, std::memory_order_relaxed);
        generation_++;
        gen_seen_.store(generation_, std::memory_order_release);
    }
    cv_work_.notify_all();
    int64_t b, e;
    slice_of(n, slices, 0, &b, &e);
    fn(b, e);
    for (int i = 0; i < kSpin && pending_seen_.load(std::memory_order_acquire) != 0; i++) SLUICE_PAUSE();
    std::unique_lock<std::mutex> lk(mu_);
    cv_done_.wait(lk, [&] { return pending_ == 0; });
}

}  // namespace sluice
