// The memory plan: what must be resident (the floor), what one token's
// experts take (the working set), and how a RAM budget splits into the
// floor plus an expert cache. The budget is a hard ceiling on the process.
#pragma once
#include <cstdint>
#include <string>

#include "format/manifest.h"

namespace sluice {

struct MemoryPlan {
    uint64_t trunk = 0;        // resident trunk tensors (embedding rows stay on disk)
    uint64_t kda_state = 0;    // KDA state and conv rings, all KDA layers
    uint64_t mla_kv = 0;       // MLA latent cache at the planned context
    uint64_t scratch = 0;      // activations, VQ tables, I/O buffers, runtime overhead
    uint64_t min_cache = 0;    // 2 x top-k expert records: one layer in use, one read ahead
    uint64_t vision = 0;       // K3 vision tower and image activations, when images are enabled
    uint64_t floor = 0;        // sum of the above
    uint64_t record = 0;       // bytes of one expert record
    uint64_t working_set = 0;  // records one token touches: MoE layers x top-k
    uint64_t ram_limit = 0;    // RAM this process may use
    std::string ram_source;    // where ram_limit came from
    uint64_t budget = 0;       // chosen or given
    uint64_t cache = 0;        // expert cache bytes = budget - floor + min_cache
    std::string choice;        // how the budget was chosen
};

// cgroup_root is normally /sys/fs/cgroup and proc_cgroup /proc/self/cgroup;
// tests pass fake trees. The limit is the smallest finite memory.max or
// memory.high over this cgroup and its ancestors, else physical RAM.
uint64_t ram_limit_bytes(const std::string &cgroup_root, const std::string &proc_cgroup, std::string *source);

// budget 0 = choose: the largest of floor + 3, + 2 or + 1 working sets that
// fits under 3/4 of the RAM limit, else the floor. A budget under the floor
// is refused with an error naming the floor.
// vision_bytes (vision/config.h) is part of the floor: 0 without images.
Status plan_memory(const Manifest &m, uint64_t budget, int64_t ctx, int64_t chunk, const std::string &cgroup_root,
                   const std::string &proc_cgroup, MemoryPlan *out, uint64_t vision_bytes = 0);

// The same with the RAM limit given instead of read from this machine: what
// `sluice plan --config` uses to plan for machines other than this one.
Status plan_memory_for_ram(const Manifest &m, uint64_t budget, int64_t ctx, int64_t chunk, uint64_t ram_limit,
                           const std::string &ram_source, MemoryPlan *out, uint64_t vision_bytes = 0);

// "2G", "1.5GiB", "512M", "1073741824" -> bytes. False on junk.
bool parse_size(const std::string &s, uint64_t *out);
std::string format_size(uint64_t bytes);

}  // namespace sluice
