// Where routed experts come from. The forward pass asks for (layer, expert)
// and gets a validated record; how it is read (synchronously here; cached,
// direct and read ahead in the streaming runtime) is this interface's
// business and never changes the bytes returned.
#pragma once
#include <memory>
#include <vector>

#include "format/container.h"
#include "format/expert_record.h"
#include "quant/qtensor.h"

namespace sluice {

// Record buffers are anonymous mappings, pre-faulted: freeing one returns
// its pages to the system at once (heap arenas would keep them and let RSS
// creep past the budget), and no first-touch fault lands in the read path.
struct RecordFree {
    size_t n = 0;
    void operator()(uint8_t *p) const;
};
using RecordBytes = std::unique_ptr<uint8_t[], RecordFree>;
RecordBytes record_alloc(size_t n);

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
