// A fixed pool of workers for data-parallel kernels. parallel_for splits an
// index range into contiguous slices; each index's result depends only on
// that index, so any thread count gives bit-identical outputs.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sluice {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    // Workers pinned to cpus (worker i to cpus[i % size]); the calling thread,
    // which runs slice 0, is left where it is: a library does not move its
    // caller. Empty = no pinning. Timing only, never results.
    ThreadPool(int n_threads, const std::vector<int> &cpus);
    ~ThreadPool();
    ThreadPool(const ThreadPool &) = delete;
    ThreadPool &operator=(const ThreadPool &) = delete;

    int size() const { return n_; }
    // fn(begin, end) over [0, n) in slices; grain = smallest slice worth a thread.
    void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)> &fn);

private:
    void worker(int id);
    void start(const std::vector<int> &cpus);

    int n_;
    std::vector<std::thread> threads_;
    std::mutex mu_;
    std::condition_variable cv_work_, cv_done_;
    const std::function<void(int64_t, int64_t)> *job_ = nullptr;
    int64_t job_n_ = 0;
    int job_slices_ = 0;
    uint64_t generation_ = 0;
    int pending_ = 0;
    bool stop_ = false;
    // Lock-free mirrors of generation_ and pending_ for the spin phase only;
    // every decision is still taken under mu_.
    std::atomic<uint64_t> gen_seen_{0};
    std::atomic<int> pending_seen_{0};
};

}  // namespace sluice
