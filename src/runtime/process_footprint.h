// What this process holds before a model is loaded, measured rather than
// assumed: the memory plan's "runtime" term. A fixed 64 MiB allowance was
// three times what the demo's whole process peaked at (21 MiB with the
// model, issue 27), and so put a 6 MB model's floor at 184 MiB.
#pragma once
#include <cstdint>
#include <string>

namespace sluice {

struct ProcessFootprint {
    bool measured = false;
    // Every mapping of a file that this process maps executable somewhere:
    // the code, read-only data and relocations of the executable and its
    // shared libraries, counted whole (untouched pages may still fault in).
    uint64_t image_bytes = 0;
    // RssAnon now: the heap and stacks already resident.
    uint64_t anon_rss = 0;
    uint64_t total() const { return image_bytes + anon_rss; }
};

// Reads /proc/self/maps and /proc/self/status (paths for tests); measured
// stays false when either cannot be read or parsed.
ProcessFootprint read_process_footprint(const std::string &maps = "/proc/self/maps",
                                        const std::string &status = "/proc/self/status");

}  // namespace sluice
