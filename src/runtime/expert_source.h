// Where routed experts come from. The forward pass asks for (layer, expert)
// and gets a validated record; how it is read (synchronously here; cached,
// direct and read ahead in the streaming runtime) is this interface's
// business and never changes the bytes returned.
#pragma once
#include <condition_variable>
#include <memory>
#include <cstdint>
#include <thread>
#include <mutex>
#include <vector>

#include "format/container.h"
#include "format/expert_record.h"
#include "quant/qtensor.h"

namespace sluice {

class RecordPool;

// Record buffers come from a RecordPool of pre-faulted slots when the store
// has one, else they are anonymous mappings of their own. Either way freeing
// one returns its memory at once (heap arenas would keep freed pages and let
// RSS creep past the budget).
struct RecordFree {
    size_t n = 0;
    std::shared_ptr<RecordPool> pool;  // null: a mapping of its own
    void operator()(uint8_t *p) const;
};
using RecordBytes = std::unique_ptr<uint8_t[], RecordFree>;
RecordBytes record_alloc(size_t n);

// A fixed set of equal, 4 KiB-aligned slots in one mapping, faulted in once
// at creation (transparent huge pages where the kernel allows). Each fresh
// mapping per read cost ~650 first-touch faults per 2.6 MB record on these
// VMs (about 20 us each), more than the read itself; slots are reused, so
// the read path never faults. When every slot is taken, take() falls back to
// a mapping of its own, so a caller that pins many records is slower, never
// stuck.
class RecordPool : public std::enable_shared_from_this<RecordPool> {
public:
    // slots x slot_bytes (rounded up to platform::io_align(): 4 KiB, or the
    // page size if larger); nullptr when it cannot map.
    static std::shared_ptr<RecordPool> create(size_t slot_bytes, size_t slots);
    ~RecordPool();
    RecordPool(const RecordPool &) = delete;
    RecordPool &operator=(const RecordPool &) = delete;

    RecordBytes take();
    size_t slots() const { return slots_; }
    size_t slot_bytes() const { return slot_; }
    size_t fallbacks() const;  // takes that found no free slot

    // At most `n` slots keep their memory (memory pressure, issue 14): free
    // slots past that are returned to the OS now (MADV_DONTNEED), and slots
    // given back while past it are returned as they come. A returned slot
    // is still handed out when nothing else is free (it faults in again),
    // so a caller is slower, never stuck. n >= slots() lifts the limit.
    // Returns the bytes returned now.
    uint64_t set_resident_limit(size_t n);
    uint64_t bytes_released() const;  // since creation

private:
    RecordPool() = default;
    friend struct RecordFree;
    void give(uint8_t *p);
    bool owns(const uint8_t *p) const { return p >= base_ && p < base_ + slot_ * slots_; }
    uint64_t release_locked(uint8_t *p);  // madvise; bytes that were faulted in


    uint8_t *base_ = nullptr, *map_base_ = nullptr;
    size_t map_bytes_ = 0, slot_ = 0, slots_ = 0;
    mutable std::mutex mu_;
    std::vector<uint8_t *> free_;
    size_t fallbacks_ = 0;
    std::vector<uint8_t *> released_;  // free slots whose memory went back to the OS
    size_t limit_ = SIZE_MAX;          // slots that may keep their memory
    size_t resident_ = 0;              // slots not in released_ (free or in use)
    uint64_t bytes_released_ = 0;
    size_t populated_ = 0;             // bytes from base_ the pre-faulter has reached (under mu_)
    bool stop_populate_ = false;   // under mu_
    size_t high_water_ = 0;        // bytes from base_ up to the highest slot handed out (under mu_)
    std::condition_variable cv_populate_;
    std::thread populate_;  // pre-faults slots in the background, ahead of high_water_
};

struct ExpertBuffer {
    RecordBytes bytes;
    ExpertView view;
    int layer = -1, expert = -1;
};
using ExpertRef = std::shared_ptr<const ExpertBuffer>;

struct ExpertStats {
    uint64_t reads = 0, bytes_read = 0;
    uint64_t cache_hits = 0, cache_misses = 0;
};

class ExpertSource {
public:
    virtual ~ExpertSource() = default;
    virtual Status fetch(int layer, int expert, ExpertRef *out) = 0;
    virtual ExpertStats stats() const = 0;
};

// One pread per record into a 4 KiB-aligned buffer, validated on every read.
class SyncExpertSource final : public ExpertSource {
public:
    SyncExpertSource(const Container &c, const ExpertGeom &geom, bool verify_crc)
        : c_(c), geom_(geom), verify_(verify_crc) {}
    Status fetch(int layer, int expert, ExpertRef *out) override;
    ExpertStats stats() const override { return stats_; }

private:
    const Container &c_;
    ExpertGeom geom_;
    bool verify_;
    ExpertStats stats_;
};

}  // namespace sluice
