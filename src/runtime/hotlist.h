// The learned hotlist (FORMAT.md §10, usage.waste): per-(layer, expert)
// use counts saved by one run and used to pre-warm the next run's cache.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace sluice {

struct HotEntry {
    int layer = 0, expert = 0;
    uint32_t hits = 0, last_seen = 0;
};

// Writes atomically (temp file + rename): a crash never leaves a torn file.
Status save_hotlist(const std::string &path, uint64_t clock, const std::vector<HotEntry> &entries);
// Reads and returns entries sorted by hits descending, ties by (layer, expert).
Status load_hotlist(const std::string &path, std::vector<HotEntry> *out);

}  // namespace sluice
