// Streams routed experts from disk under a byte budget: one aligned pread
// per record (O_DIRECT where the filesystem allows it), a pool of I/O
// threads for read-ahead and router lookahead, and a bounded LFRU cache.
// Placement never changes results: every record is validated the same way
// whichever path brought it in, and the bytes are the file's bytes.
#pragma once
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/expert_source.h"

namespace sluice {

struct StoreOptions {
    uint64_t cache_bytes = 0;  // 0 = no cache: records live only while in use
    // Records read ahead but not yet fetched may hold at most this many
    // bytes outside the cache (the floor's 2 x top-k allowance); requests
    // beyond it are dropped, so read-ahead can never break the budget.
    uint64_t prefetch_bytes = 0;
    int io_threads = 2;        // 0 = synchronous reads only (no read-ahead)
    bool direct = true;        // O_DIRECT, with a buffered fallback
    bool verify_crc = false;
};

struct StoreStats {
    uint64_t reads = 0, bytes_read = 0;
    uint64_t hits = 0, misses = 0;
    uint64_t prefetched = 0, prefetch_used = 0, prefetch_wasted = 0;
    double io_wait_seconds = 0;  // time fetch() spent blocked on a read
    double read_seconds = 0;     // time inside pread, summed over threads
    bool direct_io = false;      // false when the filesystem refused O_DIRECT
    uint64_t cache_bytes_used = 0, cache_entries = 0;
    uint64_t pool_fallbacks = 0;  // reads that found every pooled buffer taken
};

class ExpertStore final : public ExpertSource {
public:
    ExpertStore(const Container &c, const ExpertGeom &geom, const StoreOptions &opt);
    ~ExpertStore() override;

    Status init();  // opens the banks (direct or buffered)
    Status fetch(int layer, int expert, ExpertRef *out) override;
    // Starts reads in the background for records not cached or in flight.
    // `speculative` marks router-lookahead guesses (counted separately).
    void prefetch(int layer, const std::vector<int> &experts, bool speculative);
    // Loads records into the cache in the given order until it is full.
    Status preload(const std::vector<std::pair<int, int>> &order);
    ExpertStats stats() const override;
    StoreStats store_stats() const;
    // Per-(layer, expert) use counts since open, for the learned hotlist.
    std::vector<std::pair<std::pair<int, int>, uint32_t>> usage() const;

private:
    struct Entry {
        ExpertRef ref;
        uint64_t hits = 0, last = 0;
        bool prefetched = false;  // brought in by a prefetch, not yet used
    };
    struct Inflight {
        bool done = false;
        Status st;
        ExpertRef ref;
        bool speculative = false;
        bool counted = false;  // holds prefetch allowance
    };
    void release_locked(Inflight &inf);
    using Key = uint64_t;
    static Key key(int l, int e) { return ((uint64_t)(uint32_t)l << 32) | (uint32_t)e; }

    Status read_record(int layer, int expert, ExpertRef *out);
    void io_loop();
    void insert_locked(Key k, const ExpertRef &ref, bool prefetched);
    void evict_locked(uint64_t need);

    const Container &c_;
    ExpertGeom geom_;
    StoreOptions opt_;
    std::unordered_map<int, File> files_;

    mutable std::mutex mu_;
    std::condition_variable cv_io_, cv_done_;
    std::unordered_map<Key, Entry> cache_;
    std::unordered_map<Key, std::shared_ptr<Inflight>> inflight_;
    std::deque<std::pair<Key, std::shared_ptr<Inflight>>> queue_;
    std::unordered_map<Key, uint32_t> usage_;
    uint64_t clock_ = 0, used_bytes_ = 0;
    uint64_t inflight_bytes_ = 0;  // queued or read, not yet fetched or cached
    StoreStats st_;
    bool stop_ = false;
    std::vector<std::thread> threads_;
    std::shared_ptr<RecordPool> pool_;  // declared last: buffers return here while members die
};

}  // namespace sluice
