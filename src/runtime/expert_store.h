// Streams routed experts from disk under a byte budget: one aligned read
// per record (O_DIRECT where the filesystem allows it) through a read queue
// (io_uring or threads, `io_depth` reads in flight), and a bounded cache
// whose eviction and admission follow a CachePolicy.
// Placement never changes results: every record is validated the same way
// whichever path brought it in, and the bytes are the file's bytes.
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/cache_policy.h"
#include "runtime/expert_source.h"
#include "runtime/read_queue.h"

namespace sluice {

struct StoreOptions {
    uint64_t cache_bytes = 0;  // 0 = no cache: records live only while in use
    // Records read ahead but not yet fetched may hold at most this many
    // bytes outside the cache (the floor's 2 x top-k allowance); requests
    // beyond it are dropped, so read-ahead can never break the budget.
    uint64_t prefetch_bytes = 0;
    int io_depth = 8;          // reads in flight; 0 = synchronous reads only (no read-ahead)
    IoEngine io_engine = IoEngine::automatic;
    std::string policy = "freq";
    bool direct = true;        // O_DIRECT, with a buffered fallback
    bool verify_crc = false;
};

struct StoreStats {
    uint64_t reads = 0, bytes_read = 0;
    uint64_t fetches = 0;          // records the forward pass asked for
    uint64_t demand_hits = 0;      // ... that were in the cache
    uint64_t readahead_hits = 0;   // ... that read-ahead had in flight or landed
    uint64_t sync_reads = 0;       // ... read while the forward pass waited, unannounced
    uint64_t prefetched = 0, prefetch_wasted = 0;
    uint64_t guesses = 0, guesses_used = 0, guesses_dropped = 0;
    double io_wait_seconds = 0;  // time fetch() spent blocked on a read
    double read_seconds = 0;     // wall time with at least one read in flight
    bool direct_io = false;      // false when the filesystem refused O_DIRECT
    uint64_t cache_bytes_used = 0, cache_entries = 0;
    uint64_t pool_fallbacks = 0;  // reads that found every pooled buffer taken
    uint64_t cache_capacity = 0;  // now: the configured size, or less after memory pressure
    uint64_t bytes_released = 0;  // record buffer memory returned to the OS by shrinking
    uint64_t cold_takes = 0;      // reads into a record buffer not yet resident (they faulted it in)
    uint64_t warmed_bytes = 0;    // record buffer memory made resident ahead of use
    double warm_seconds = 0;      // ... and the time that took, on the pool's own thread
    std::string io_engine, policy, io_note;  // what runs, and why io_uring does not (if so)
    int io_depth = 0;
};

class ExpertStore final : public ExpertSource {
public:
    ExpertStore(const Container &c, const ExpertGeom &geom, const StoreOptions &opt);
    ~ExpertStore() override;

    Status init();  // opens the banks (direct or buffered), the pool and the read queue
    Status fetch(int layer, int expert, ExpertRef *out) override;
    // Starts reads for records not cached or in flight. Certain reads
    // (`speculative` false: the router decided) cancel the layer's queued
    // guesses that the router did not pick and go out before any guess.
    void prefetch(int layer, const std::vector<int> &experts, bool speculative);
    // Loads records into the cache in the given order until it is full; the
    // counts (may be empty) seed the policy's frequencies.
    Status preload(const std::vector<std::pair<int, int>> &order, const std::vector<uint32_t> &counts);
    ExpertStats stats() const override;
    StoreStats store_stats() const;
    // Memory pressure (pressure_watch.h): the cache's capacity, between 0
    // and the configured size. Shrinking evicts unpinned records now, in
    // the policy's order, and returns their buffers' memory to the OS;
    // records in use go when released. Growing only allows refilling.
    // Which records are cached never changes results, only timing.
    // Returns the bytes returned to the OS now.
    uint64_t set_cache_capacity(uint64_t bytes);
    uint64_t cache_capacity() const;
    uint64_t configured_cache_bytes() const { return opt_.cache_bytes; }
    // Expert-major prefill (model/ffn.cpp) holds a layer's routed records
    // for a whole wave: at most this many, the records the cache holds, so
    // that held records stay within it (0 without one). While holding is on, every record read is
    // admitted to the cache: one the policy refused would be held outside
    // the budget.
    int64_t hold_capacity() const;
    void set_holding(bool on);
    // Records of this layer read since open (read-ahead and guesses included).
    uint64_t layer_reads(int layer) const;
    // Per-(layer, expert) use counts since open, for the learned hotlist.
    std::vector<std::pair<std::pair<int, int>, uint32_t>> usage() const;

private:
    struct Inflight {
        bool done = false;
        Status st;
        ExpertRef ref;
        bool guess = false;
        bool counted = false;  // holds prefetch allowance
        bool orphan = false;   // dropped from the table: free on landing
    };
    using Key = CacheKey;

    Status validate(int layer, int expert, RecordBytes bytes, ExpertRef *out);
    Status read_sync(int layer, int expert, ExpertRef *out);
    void landed(Key k, const std::shared_ptr<Inflight> &inf, RecordBytes bytes, ssize_t result);
    void release_locked(Inflight &inf);
    void insert_locked(Key k, const ExpertRef &ref);
    uint64_t warm_cap_locked() const;  // the capacity resident memory allows now
    void note_io_locked(int delta);
    void note_guess_locked(bool used);

    const Container &c_;
    ExpertGeom geom_;
    StoreOptions opt_;
    struct Bank {
        File direct, buffered;  // direct may be closed (refused or off)
        int64_t stride = 0, experts = 0, codebook_base = 0;
    };
    std::unordered_map<int, Bank> banks_;

    mutable std::mutex mu_;
    std::condition_variable cv_done_;
    std::unordered_map<Key, ExpertRef> cache_;
    std::unique_ptr<CachePolicy> policy_;
    std::unordered_map<Key, std::shared_ptr<Inflight>> inflight_;
    std::unordered_map<Key, uint32_t> usage_;
    uint64_t used_bytes_ = 0;
    uint64_t cap_bytes_ = 0;  // current capacity (<= opt_.cache_bytes), under mu_
    uint64_t inflight_bytes_ = 0;  // queued or read, not yet fetched or cached
    int reads_running_ = 0;
    bool holding_ = false;                         // under mu_: admit every record (set_holding)
    bool cold_growth_ = false;                     // under mu_: preload grows the cache into cold slots
    size_t extra_slots_ = 0;                       // pool slots beyond the cache: read-ahead, the record in use
    static constexpr size_t kWarmStep = 8;         // slots the pool warms ahead of a cache at its warm limit
    std::unordered_map<int, uint64_t> layer_reads_;  // under mu_
    double guess_score_ = 1.0;  // recent share of lookahead guesses used (note_guess_locked)
    double busy_since_ = 0;
    StoreStats st_;
    std::shared_ptr<RecordPool> pool_;  // before queue_: buffers return here while the queue drains
    std::unique_ptr<ReadQueue> queue_;  // declared last: destroyed first, so no read lands in a dead store
};

}  // namespace sluice
