#include "kld/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sluice::kld {

namespace {

std::string clock_text(double s) {
    if (!(s >= 0) || s > 1e7) return "--:--";
    const int64_t t = int64_t(std::llround(s));
    char b[32];
    if (t >= 3600)
        std::snprintf(b, sizeof b, "%lld:%02lld:%02lld", (long long)(t / 3600), (long long)(t / 60 % 60), (long long)(t % 60));
    else
        std::snprintf(b, sizeof b, "%lld:%02lld", (long long)(t / 60), (long long)(t % 60));
    return b;
}

std::string bytes_text(double b) {
    char s[32];
    if (b >= 1e9) std::snprintf(s, sizeof s, "%.2f GB", b / 1e9);
    else std::snprintf(s, sizeof s, "%.1f MB", b / 1e6);
    return s;
}

}  // namespace

std::string format_progress(const ProgressInfo& p, int bar_width) {
    const double frac = p.rows_total > 0 ? std::clamp(double(p.rows_done) / double(p.rows_total), 0.0, 1.0)
                        : p.windows_total > 0 ? double(p.windows_done) / double(p.windows_total)
                                              : 0.0;
    std::string o = p.phase;
    if (bar_width > 0) {
        const int fill = int(frac * bar_width + 1e-9);
        o += " [" + std::string(size_t(fill), '#') + std::string(size_t(bar_width - fill), '-') + "]";
    }
    char b[160];
    std::snprintf(b, sizeof b, " %lld/%lld windows  %s %s", (long long)p.windows_done, (long long)p.windows_total,
                  bytes_text(double(p.bytes)).c_str(), p.bytes_verb);
    o += b;
    const double t = p.elapsed_s;
    if (t > 0) {
        if (p.bytes > 0) {
            const double r = double(p.bytes) / t;
            if (r >= 1e9) std::snprintf(b, sizeof b, "  %.2f GB/s", r / 1e9);
            else std::snprintf(b, sizeof b, "  %.1f MB/s", r / 1e6);
            o += b;
        }
        std::snprintf(b, sizeof b, "  %.0f tok/s", double(p.rows_done) / t);
        o += b;
    }
    if (p.final) {
        o += (p.completed ? "  done in " : "  stopped after ") + clock_text(t);
    } else {
        const double eta = p.rows_done > 0 ? t * double(p.rows_total - p.rows_done) / double(p.rows_done) : -1;
        o += "  ETA " + clock_text(eta);
    }
    return o;
}

ProgressTicker::ProgressTicker(ProgressFn fn, std::string phase, const char* bytes_verb, int64_t windows_total,
                               int64_t rows_total, double interval_s)
    : fn_(std::move(fn)),
      phase_(std::move(phase)),
      verb_(bytes_verb),
      windows_total_(windows_total),
      rows_total_(rows_total),
      t0_(std::chrono::steady_clock::now()),
      interval_(std::max(0.05, interval_s)) {
    if (fn_) th_ = std::thread([this] { loop(); });
}

ProgressTicker::~ProgressTicker() { stop(false); }

ProgressInfo ProgressTicker::snapshot() const {
    ProgressInfo p;
    p.phase = phase_;
    p.bytes_verb = verb_;
    p.windows_total = windows_total_;
    p.windows_done = windows_.load(std::memory_order_relaxed);
    p.rows_total = rows_total_.load(std::memory_order_relaxed);
    p.rows_done = rows_.load(std::memory_order_relaxed);
    p.bytes = bytes_.load(std::memory_order_relaxed);
    p.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    return p;
}

void ProgressTicker::loop() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
        if (cv_.wait_for(lk, interval_, [this] { return stopping_; })) return;
        lk.unlock();
        fn_(snapshot());
        lk.lock();
    }
}

void ProgressTicker::stop(bool completed) {
    if (!fn_ || stopped_) return;
    {
        std::lock_guard<std::mutex> lk(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (th_.joinable()) th_.join();
    stopped_ = true;
    ProgressInfo p = snapshot();
    p.final = true;
    p.completed = completed;
    fn_(p);
}

}  // namespace sluice::kld
