// The memory plan: what must be resident (the floor), what one token's
// experts take (the working set), and how a RAM budget splits into the
// floor plus an expert cache. The budget is a hard ceiling on the process.
#pragma once
#include <cstdint>
#include <string>

#include "format/manifest.h"
#include "runtime/mem_status.h"

namespace sluice {

// Prompt reuse: a checkpoint of the KDA state (every KDA layer's S and conv
// ring) is kept every kCheckpointInterval positions, at the end of each
// prompt and at each rewind target, in a pool of kDefaultCheckpoints
// checkpoints unless the caller sizes it. 64: a rewind re-evaluates at
// most 63 tokens (an agent's turn 2 restored 1,280 of a 1,500-token prefix
// at 256 and evaluated 220 again). A wave takes only the checkpoints the
// pool keeps, and it no longer cuts the prompt there, so a finer interval
// costs no expert reads (it did when each chunk read its records).
constexpr int kCheckpointInterval = 64;
constexpr int kDefaultCheckpoints = 4;
// The replay log beside a non-empty pool: the KDA recurrences' inputs of
// the last positions, so a rewind to a target the log reaches from a
// checkpoint replays the recurrences only (model/checkpoints.cpp). Two
// intervals: a target in the last interval always has its checkpoint in the
// log (an agent's second turn diverged 72 tokens before the first's end).
constexpr int kReplayLogPositions = 2 * kCheckpointInterval;
// Sessions kept aside (sluice_session_save): the caller's bytes, or this
// for room for two sessions of the model at the planned context, each its
// KDA state, one checkpoint and its MLA rows.
constexpr uint64_t kSessionBytesAuto = ~0ull;

// Bytes of one checkpoint: every KDA layer's state and conv ring (0 without KDA).
uint64_t checkpoint_bytes(const ModelConfig &c);
// The pool for a request: -1 = kDefaultCheckpoints checkpoints; otherwise
// the bytes rounded down to whole checkpoints.
uint64_t checkpoint_pool_bytes(const ModelConfig &c, int64_t requested);
// Floats one KDA layer logs per position in the replay log: raw q, k, v
// projections, gate input z (heads x dim each) and the beta logits (heads).
uint64_t replay_log_entry_floats(const ModelConfig &c);
// Bytes of one position of the replay log: every KDA layer's entry.
uint64_t replay_log_position_bytes(const ModelConfig &c);
// Bytes one prompt token of a wave holds for the whole wave (residual
// stream, layer input and output, AttnRes history, router scores).
uint64_t wave_bytes_per_token(const ModelConfig &c);

struct MemoryPlan {
    uint64_t trunk = 0;        // resident trunk tensors (embedding rows stay on disk)
    uint64_t kda_state = 0;    // KDA state and conv rings, all KDA layers
    uint64_t checkpoints = 0;  // the prompt-reuse checkpoint pool (checkpoint_pool_bytes)
    uint64_t replay_log = 0;   // its replay log, when asked for: kReplayLogPositions positions beside a pool
    uint64_t sessions = 0;     // sessions kept aside (sluice_session_save): the caller's limit
    uint64_t mla_kv = 0;       // MLA latent cache at the planned context
    uint64_t scratch = 0;      // activations, VQ tables and logits for one prefill chunk
    // Expert-major prefill: a wave of prompt tokens goes through each layer
    // together, so each routed record is read once per wave. wave_tokens is
    // the largest wave; wave its per-layer state beyond the chunk's scratch
    // (in the floor when asked for, else taken from the cache's room).
    int64_t wave_tokens = 0;
    uint64_t wave = 0;
    // The expert batch: a wave's routed experts run for this many of its
    // tokens at once (their gate/up VQ tables are per token: 1.8 MB each on
    // the 48B shape), so more tokens share each record's codes. batch is
    // its tables beyond the chunk's, from the cache's room, leaving the
    // cache a layer's records.
    int64_t batch_tokens = 0;
    uint64_t batch = 0;
    uint64_t min_cache = 0;    // 2 x top-k expert records: one layer in use, one read ahead
    uint64_t vision = 0;       // K3 vision tower and image activations, when images are enabled
    // What the kernel keeps resident beyond the data itself (issue 14: a
    // budget that left these out let RSS reach the budget's edge and past):
    uint64_t runtime = 0;          // code, libraries, static data, the process's own bookkeeping
    uint64_t allocator_slack = 0;  // freed heap the allocator keeps instead of returning
    uint64_t thread_stacks = 0;    // resident stack of every thread the engine runs
    uint64_t page_tables = 0;      // 8-byte entries for every 4 KiB page of the budget (floor and cache)
    int threads = 0;               // threads counted in thread_stacks
    uint64_t stack_each = 0;       // resident stack counted per thread (thread_stack_bound)
    bool runtime_measured = false; // runtime is this process's footprint, not the allowance
    uint64_t floor = 0;        // sum of the above (the cache's page tables excepted: they come out of the cache)
    uint64_t record = 0;       // bytes of one expert record
    uint64_t working_set = 0;  // records one token touches: MoE layers x top-k
    uint64_t ram_limit = 0;    // RAM this process may use
    std::string ram_source;    // where ram_limit came from
    uint64_t available = 0;    // MemAvailable (capped by the cgroup's room) when planned; 0 = not measured
    uint64_t reserve = 0;      // left to the OS and page cache by the default budget
    uint64_t max_useful = 0;   // the budget at which every expert record fits in the cache
    uint64_t budget = 0;       // chosen or given
    uint64_t cache = 0;        // expert cache bytes = budget - floor + min_cache
    std::string choice;        // how the budget was chosen
};

// cgroup_root is normally /sys/fs/cgroup and proc_cgroup /proc/self/cgroup;
// tests pass fake trees. The limit is the smallest finite memory.max or
// memory.high over this cgroup and its ancestors, else physical RAM.
uint64_t ram_limit_bytes(const std::string &cgroup_root, const std::string &proc_cgroup, std::string *source);

// budget 0 = choose (default_budget below, from this machine's MemAvailable
// and cgroup now). A budget under the floor is refused with an error naming
// the floor. vision_bytes (vision/config.h) is part of the floor: 0 without
// images. threads: every thread the engine will run (compute pool, readers,
// helpers); 0 = default_thread_count().
// wave: prompt tokens per prefill wave; 0 = the largest of at most ctx that
// a quarter of the cache's room holds (never under chunk).
Status plan_memory(const Manifest &m, uint64_t budget, int64_t ctx, int64_t chunk, const MemPaths &paths,
                   MemoryPlan *out, uint64_t vision_bytes = 0, int threads = 0, int64_t checkpoint_pool = -1,
                   int64_t wave = 0, uint64_t session_bytes = 0, bool replay_log = false);

// The same with only the cgroup tree named (/proc/meminfo and PSI as they are).
inline Status plan_memory(const Manifest &m, uint64_t budget, int64_t ctx, int64_t chunk,
                          const std::string &cgroup_root, const std::string &proc_cgroup, MemoryPlan *out,
                          uint64_t vision_bytes = 0) {
    MemPaths paths;
    paths.cgroup_root = cgroup_root;
    paths.proc_cgroup = proc_cgroup;
    return plan_memory(m, budget, ctx, chunk, paths, out, vision_bytes);
}

// The same with the RAM limit given instead of read from this machine: what
// `sluice plan --config` uses to plan for machines other than this one.
// available 0: not measured (a machine that does not exist yet).
Status plan_memory_for_ram(const Manifest &m, uint64_t budget, int64_t ctx, int64_t chunk, uint64_t ram_limit,
                           const std::string &ram_source, MemoryPlan *out, uint64_t vision_bytes = 0,
                           int threads = 0, uint64_t available = 0, int64_t checkpoint_pool = -1,
                           uint64_t runtime_bytes = 0, int64_t wave = 0, uint64_t session_bytes = 0,
                           bool replay_log = false);

// Threads counted when the caller does not say, as an engine with the
// defaults starts them: one compute thread per CPU (the caller is one), the
// default read queue's (one io_uring reaper, or 8 readers), the cache's
// warming thread and the pressure watcher.
int default_thread_count();

// The most of one thread's stack that can be resident: 2 MiB where
// transparent huge pages are "always" (or the mode cannot be read), else
// 256 KiB, above what sluice's threads were measured to touch.
uint64_t thread_stack_bound(const std::string &thp_enabled = "/sys/kernel/mm/transparent_hugepage/enabled");

// What the default budget leaves to the OS, other programs and the page
// cache they need: max(1 GiB, 10 % of the RAM limit).
uint64_t budget_reserve(uint64_t ram_limit);

// The default budget: the most this machine will keep resident, never under
// the floor nor over max_useful. With available measured (> 0):
// min(available, ram_limit) - budget_reserve(ram_limit). Without: 3/4 of ram_limit (a machine planned
// before it exists: its OS, desktop and page cache are taken as a quarter).
// *why says which rule bound.
uint64_t default_budget(uint64_t floor, uint64_t max_useful, uint64_t ram_limit, uint64_t available,
                        std::string *why);


}  // namespace sluice
