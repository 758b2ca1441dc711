// A quick measure of the disk a container will live on, before it exists
// (`sluice plan --config --probe DIR`, issue 14): a temporary file in DIR,
// random reads of one expert record each at record-sized, 4 KiB-aligned
// offsets with `depth` reads in flight (one thread each, as the store's
// reader threads do), O_DIRECT where the filesystem allows it. The file is
// removed before returning, on every path.
#pragma once
#include <cstdint>
#include <string>

#include "common/status.h"

namespace sluice {

struct DiskProbeResult {
    double gbps = 0;        // bytes read / wall seconds, 1e9 bytes per GB
    uint64_t bytes = 0;     // read
    uint64_t reads = 0;
    double seconds = 0;     // reading only (writing the file is not counted)
    double write_seconds = 0;  // writing and syncing the file
    uint64_t file_bytes = 0;
    bool direct = false;    // false: the filesystem refused O_DIRECT and the rate includes its page cache
    int depth = 0;
};

// file_bytes is rounded up to hold at least 4 records; reads stop after
// max_seconds (at least 4 x depth reads are made).
Status probe_disk(const std::string &dir, uint64_t record_bytes, uint64_t file_bytes, double max_seconds, int depth,
                  DiskProbeResult *out);

}  // namespace sluice
