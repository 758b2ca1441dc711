#include "runtime/pressure_watch.h"

#include <algorithm>
#include <chrono>

#include "runtime/expert_store.h"

namespace sluice {

uint64_t default_pressure_reserve(uint64_t ram_limit) { return std::max<uint64_t>(512ull << 20, ram_limit / 20); }

uint64_t pressure_target(uint64_t capacity, uint64_t used, uint64_t configured, uint64_t record, uint64_t reserve,
                         const MemStatus &now, bool limit_bit, bool *shrink) {
    *shrink = false;
    if (record == 0) return capacity;
    const uint64_t avail = now.available();
    const uint64_t step = std::max<uint64_t>(64ull << 20, reserve / 8);
    // PSI counts stalls, whoever causes them: it speaks only when memory is
    // also short (within the hysteresis band), so a disk-bound neighbour
    // with plenty of free memory does not empty the cache.
    const bool stalled = now.have_psi && now.psi_some_avg10 >= 10.0 && avail < reserve + 2 * step;
    if (avail < reserve || limit_bit || stalled) {
        const uint64_t want = avail < reserve + step ? reserve + step - avail : step;
        const uint64_t held = std::min(capacity, used);
        const uint64_t t = (held > want ? held - want : 0) / record * record;
        *shrink = t < capacity;
        return t;
    }
    const bool calm = !now.have_psi || now.psi_some_avg10 < 1.0;
    if (avail > reserve + 2 * step && capacity < configured && calm) {
        const uint64_t extra = avail - reserve - step;
        return std::min(configured, capacity + extra / record * record);
    }
    return capacity;
}

PressureWatch::PressureWatch(ExpertStore *store, uint64_t record_bytes, uint64_t ram_limit, PressureOptions opt)
    : store_(store), record_(record_bytes), opt_(std::move(opt)) {
    if (opt_.reserve == 0) opt_.reserve = default_pressure_reserve(ram_limit);
    if (opt_.poll_ms <= 0) opt_.poll_ms = 200;
    if (!opt_.source) {
        const MemPaths paths = opt_.paths;
        opt_.source = [paths](MemStatus *s) {
            *s = read_mem_status(paths);
            return s->have_meminfo || s->have_cgroup;
        };
    }
    st_.reserve = opt_.reserve;
    thread_ = std::thread([this] {
        std::unique_lock<std::mutex> lk(mu_);
        while (!stop_) {
            lk.unlock();
            poll_once();
            lk.lock();
            cv_.wait_for(lk, std::chrono::milliseconds(opt_.poll_ms), [this] { return stop_; });
        }
    });
}

PressureWatch::~PressureWatch() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void PressureWatch::poll_once() {
    std::lock_guard<std::mutex> one(poll_mu_);
    MemStatus now;
    if (!opt_.source(&now)) return;
    // memory.events counts the times the cgroup hit memory.high / max (or
    // killed): any rise since the last reading means the limit is biting.
    bool limit_bit = false;
    if (now.have_cgroup) {
        limit_bit = have_events_ && now.cg_events > events_;
        events_ = now.cg_events;
        have_events_ = true;
    }
    const StoreStats ss = store_->store_stats();
    bool shrink = false;
    const uint64_t target = pressure_target(ss.cache_capacity, ss.cache_bytes_used, store_->configured_cache_bytes(),
                                            record_, opt_.reserve, now, limit_bit, &shrink);
    uint64_t freed = 0;
    if (target != ss.cache_capacity) freed = store_->set_cache_capacity(target);
    std::lock_guard<std::mutex> lk(mu_);
    st_.polls++;
    st_.last_available = now.available();
    if (shrink) {
        st_.shrinks++;
        st_.bytes_released += freed;
    } else if (target > ss.cache_capacity) {
        st_.grows++;
    }
}

PressureStats PressureWatch::stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    return st_;
}

}  // namespace sluice
