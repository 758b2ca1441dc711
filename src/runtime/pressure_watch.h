// Memory pressure (issue 14's cache cliff): when another process takes the
// memory the budget counted on, the kernel would page the trunk and the
// cache out and every token would wait on the disk. The watcher gives the
// memory back first: when available memory (MemAvailable, capped by the
// cgroup's room) falls under a reserve, or the cgroup's limit starts to bite
// (memory.events grows), or PSI reports stalls with little memory left, it
// shrinks the expert cache by what is missing, and grows it back, up to the
// configured size, once the memory is free again.
//
// A thread, not a check between tokens: a cold token at K3 scale or a long
// prefill runs for seconds, and a context that is idle between requests
// holds its cache all the same; a thread reacts within one poll either way.
// Which records are cached never changes results, only timing.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "runtime/mem_status.h"

namespace sluice {

class ExpertStore;

struct PressureOptions {
    // Available memory to keep free for everyone else; 0 = default_reserve().
    uint64_t reserve = 0;
    int poll_ms = 200;
    // Where readings come from: false = no reading this time. Empty =
    // read_mem_status(paths). Tests inject their own.
    std::function<bool(MemStatus *)> source;
    MemPaths paths;
};

struct PressureStats {
    uint64_t shrinks = 0, grows = 0;
    uint64_t bytes_released = 0;  // buffer memory returned to the OS by shrinking
    uint64_t last_available = 0;  // the last reading
    uint64_t reserve = 0;
    uint64_t polls = 0;
};

// Half of what the default budget leaves free (budget_reserve): max(512 MiB,
// 5 % of the RAM limit). Below it, others have taken half the margin.
uint64_t default_pressure_reserve(uint64_t ram_limit);

// One decision, without threads or the store: the capacity the cache
// should have now. step = max(64 MiB, reserve / 8) is the hysteresis:
// shrinking aims at reserve + step available, growing starts only above
// reserve + 2 x step, so the cache refilling after a grow cannot trigger
// the next shrink.
// used: the bytes the cache holds (a capacity not yet filled frees nothing
// when lowered, so shrinking starts from what is held).
uint64_t pressure_target(uint64_t capacity, uint64_t used, uint64_t configured, uint64_t record, uint64_t reserve,
                         const MemStatus &now, bool limit_bit, bool *shrink);

class PressureWatch {
public:
    // store must outlive the watcher. ram_limit sizes the default reserve.
    PressureWatch(ExpertStore *store, uint64_t record_bytes, uint64_t ram_limit, PressureOptions opt);
    ~PressureWatch();
    PressureWatch(const PressureWatch &) = delete;
    PressureWatch &operator=(const PressureWatch &) = delete;

    void poll_once();  // one reading and decision (the thread calls it every poll_ms)
    PressureStats stats() const;

private:
    ExpertStore *store_;
    uint64_t record_;
    PressureOptions opt_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    bool have_events_ = false;
    uint64_t events_ = 0;
    PressureStats st_;
    std::mutex poll_mu_;  // one decision at a time (the thread and a direct call)
    std::thread thread_;
};

}  // namespace sluice
