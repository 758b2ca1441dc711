// Progress of a long `kld capture` / `compare` / `paired` / `noise` (KLD.md §7, "Scale: a
// progress bar"). The library only counts: workers add rows and bytes to
// atomic counters, and a ticker thread hands a snapshot to the caller's
// callback a few times per second (and once more at the end). What to do
// with it (a bar on a terminal, lines in a log, nothing) is the caller's
// choice; nothing here prints, and nothing reaches receipts or stdout.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace sluice::kld {

struct ProgressInfo {
    std::string phase;          // "capture", "compare", "paired" or "noise"
    const char* bytes_verb = "read";  // "read" (operand files) or "written" (capture)
    int64_t windows_done = 0, windows_total = 0;
    int64_t rows_done = 0, rows_total = 0;  // scored (or captured) positions
    uint64_t bytes = 0;
    double elapsed_s = 0;
    bool final = false;         // the last report of a run
    bool completed = false;     // final and the run succeeded
};

using ProgressFn = std::function<void(const ProgressInfo&)>;

// "compare [########------------]  3/8 windows  1.23 GB read  0.98 GB/s
// 1520 tok/s  ETA 0:12" (no newline). The ETA extrapolates the row rate.
std::string format_progress(const ProgressInfo& p, int bar_width = 20);

// Counts work from any thread (relaxed atomics: a handful per row block) and
// reports it from its own thread every `interval_s` seconds while running.
// A null callback makes every call a no-op and starts no thread.
class ProgressTicker {
public:
    ProgressTicker(ProgressFn fn, std::string phase, const char* bytes_verb, int64_t windows_total, int64_t rows_total,
                   double interval_s);
    ~ProgressTicker();  // stop(false) if still running
    ProgressTicker(const ProgressTicker&) = delete;
    ProgressTicker& operator=(const ProgressTicker&) = delete;

    bool active() const { return bool(fn_); }
    void add_rows(int64_t n) { rows_.fetch_add(n, std::memory_order_relaxed); }
    void add_bytes(uint64_t n) { bytes_.fetch_add(n, std::memory_order_relaxed); }
    void window_done() { windows_.fetch_add(1, std::memory_order_relaxed); }
    // A window that needs no work (capture resume): done, and out of the ETA.
    void window_skipped(int64_t rows) {
        windows_.fetch_add(1, std::memory_order_relaxed);
        rows_total_.fetch_sub(rows, std::memory_order_relaxed);
    }
    // Joins the ticker and reports once more from the calling thread.
    void stop(bool completed);

private:
    ProgressInfo snapshot() const;
    void loop();

    ProgressFn fn_;
    std::string phase_;
    const char* verb_;
    int64_t windows_total_;
    std::atomic<int64_t> rows_total_;
    std::atomic<int64_t> rows_{0}, windows_{0};
    std::atomic<uint64_t> bytes_{0};
    std::chrono::steady_clock::time_point t0_;
    std::chrono::duration<double> interval_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stopping_ = false, stopped_ = false;
    std::thread th_;
};

}  // namespace sluice::kld
