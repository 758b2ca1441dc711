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

// A fixed set of equal, 4 KiB-aligned slots in one mapping (transparent
// huge pages where the kernel allows). Each fresh mapping per read cost ~650
// first-touch faults per 2.6 MB record on these VMs (about 20 us each), more
// than the read itself; slots are reused, so a read into a warm slot never
// faults. Slots are made resident ("warmed") by a thread of the pool's own,
// as far as warm_to() asks, never all at creation: an 8 GB pool touched at
// open took 1.6-13.7 s, and one a tiny model never fills is memory and CPU
// spent for nothing. When no warm slot is free, take() hands out a cold one
// (its read faults it in, counted in Stats::cold_takes); when every slot is
// taken, a mapping of its own, so a caller that pins many records is
// slower, never stuck.
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
    size_t fallbacks() const { return stats().fallbacks; }  // takes that found no free slot

    // Warm slots in the background until `n` are resident. Urgent targets
    // (what the first prompt needs) are warmed at once; the rest only while
    // the forward pass waits for a read (note_waiting). Never lowers a
    // target; the resident limit below still holds.
    void warm_to(size_t n, bool urgent);
    // Slots whose memory is resident: warm and free, or in use.
    size_t resident_slots() const;
    // The forward pass starts (+1) or stops (-1) waiting for a read: lazy
    // warming runs only then.
    void note_waiting(int delta);

    // At most `n` slots keep their memory (memory pressure, issue 14): free
    // slots past that are returned to the OS now (MADV_DONTNEED), and slots
    // given back while past it are returned as they come. A returned slot
    // is still handed out when nothing else is free (it faults in again),
    // so a caller is slower, never stuck. n >= slots() lifts the limit.
    // Returns the bytes returned now.
    uint64_t set_resident_limit(size_t n);
    uint64_t bytes_released() const { return stats().bytes_released; }  // since creation

    struct Stats {
        uint64_t fallbacks = 0;
        uint64_t cold_takes = 0;      // slots handed out before they were warm: the read faulted them in
        uint64_t warmed_bytes = 0;    // made resident ahead of use by the warming thread
        double warm_seconds = 0;      // its time touching them
        uint64_t bytes_released = 0;
    };
    Stats stats() const;

private:
    RecordPool() = default;
    friend struct RecordFree;
    void give(uint8_t *p);
    bool owns(const uint8_t *p) const { return p >= base_ && p < base_ + slot_ * slots_; }
    size_t index_of(const uint8_t *p) const { return (size_t)(p - base_) / slot_; }
    uint64_t release_locked(uint8_t *p);  // madvise; the slot's bytes
    void warm_loop();
    static constexpr size_t kUrgentStep = 8;  // slots warmed ahead of a read that found none warm

    uint8_t *base_ = nullptr, *map_base_ = nullptr;
    size_t map_bytes_ = 0, slot_ = 0, slots_ = 0;
    mutable std::mutex mu_;
    // Every slot is in exactly one place: in use, free_ (warm), released_
    // (memory returned to the OS), warming_, or cold (index >= next_cold_,
    // never touched).
    std::vector<uint8_t *> free_;
    std::vector<uint8_t *> released_;
    size_t next_cold_ = 0;
    size_t resident_ = 0;               // slots handed out or warmed, less released_
    size_t limit_ = SIZE_MAX;           // slots that may keep their memory
    size_t urgent_ = 0, lazy_ = 0;      // warm_to targets (slots)
    int waiting_ = 0;                   // forward-pass threads waiting for a read (note_waiting)
    bool stop_ = false;
    size_t fallbacks_ = 0, cold_takes_ = 0;
    uint64_t warmed_bytes_ = 0, bytes_released_ = 0;
    double warm_seconds_ = 0;
    uint8_t *warming_ = nullptr;        // the slot the warming thread has claimed
    bool hurry_ = false;                // a take() waits for it: finish it now
    std::condition_variable cv_warm_;   // wakes the warming thread
    std::condition_variable cv_warmed_; // it finished a slot
    std::thread warmer_;  // last: started after every member above exists
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
