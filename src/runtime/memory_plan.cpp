#include "runtime/memory_plan.h"

#include "common/units.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "quant/kernels.h"
#include "runtime/process_footprint.h"
#include "runtime/read_queue.h"
#include "quant/qtensor.h"

namespace sluice {
namespace {

bool read_limit(const std::string &path, uint64_t *out) {
    std::ifstream f(path);
    std::string s;
    if (!(f >> s) || s == "max") return false;
    char *end = nullptr;
    unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (!end || *end) return false;
    *out = v;
    return true;
}

}  // namespace

uint64_t ram_limit_bytes(const std::string &cgroup_root, const std::string &proc_cgroup, std::string *source) {
    uint64_t best = 0;
    // cgroup v2: the line "0::/path".
    std::ifstream pc(proc_cgroup);
    std::string line, rel;
    while (std::getline(pc, line))
        if (line.rfind("0::", 0) == 0) rel = line.substr(3);
    if (!rel.empty() || std::ifstream(cgroup_root + "/memory.max").good()) {
        // Walk from this cgroup up to the root; every ancestor's limit applies.
        std::string p = rel;
        for (;;) {
            const std::string dir = cgroup_root + (p == "/" ? "" : p);
            for (const char *f : {"memory.max", "memory.high"}) {
                uint64_t v;
                if (read_limit(dir + "/" + f, &v) && v > 0 && (best == 0 || v < best)) {
                    best = v;
                    if (source) *source = dir + "/" + f;
                }
            }
            if (p.empty() || p == "/") break;
            size_t cut = p.find_last_of('/');
            p = cut == 0 || cut == std::string::npos ? "/" : p.substr(0, cut);
        }
    }
    if (best) return best;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (source) *source = "physical RAM";
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

int default_thread_count() {
    const unsigned hw = std::thread::hardware_concurrency();
    return (int)std::max(1u, hw) + read_queue_threads(IoEngine::automatic, 8) + 2;
}

uint64_t thread_stack_bound(const std::string &thp_enabled) {
    std::ifstream f(thp_enabled);
    std::string modes;
    std::getline(f, modes);
    // "[always] madvise never": the bracketed word is the mode in force.
    // Unreadable: assume the worst.
    if (!f || modes.find("[always]") != std::string::npos) return 2ull << 20;
    return 256ull << 10;
}

uint64_t budget_reserve(uint64_t ram_limit) { return std::max<uint64_t>(1ull << 30, ram_limit / 10); }

uint64_t default_budget(uint64_t floor, uint64_t max_useful, uint64_t ram_limit, uint64_t available,
                        std::string *why) {
    max_useful = std::max(max_useful, floor);
    uint64_t cap;
    std::string rule;
    if (available > 0) {
        // A cgroup limit whose usage could not be read still bounds it.
        available = std::min(available, ram_limit);
        const uint64_t r = budget_reserve(ram_limit);
        cap = available > r ? available - r : 0;
        rule = format_size(available) + " available now - " + format_size(r) +
               " left to the OS and page cache (max(1 GiB, 10 % of " + format_size(ram_limit) + "))";
    } else {
        cap = ram_limit / 4 * 3;
        rule = "3/4 of " + format_size(ram_limit) + " (available memory not measured)";
    }
    uint64_t b = cap;
    if (b >= max_useful) {
        b = max_useful;
        rule = "floor + every expert record (the model can use no more; " + rule + " = " + format_size(cap) + ")";
    } else if (b <= floor) {
        b = floor;
        rule = "floor (" + rule + " = " + format_size(cap) + " is not above it: the cache stays at its minimum)";
    }
    if (why) *why = rule;
    return b;
}

uint64_t checkpoint_bytes(const ModelConfig &c) {
    uint64_t n_kda = 0;
    for (int L = 0; L < c.n_layers; L++) n_kda += c.is_kda[(size_t)L] ? 1 : 0;
    const uint64_t H = (uint64_t)c.kda_heads, D = (uint64_t)c.kda_dim, K = (uint64_t)std::max(1, c.conv_kernel);
    return n_kda * (H * D * D + 3 * H * D * (K - 1)) * 4;
}

uint64_t checkpoint_pool_bytes(const ModelConfig &c, int64_t requested) {
    const uint64_t one = checkpoint_bytes(c);
    if (one == 0) return 0;
    if (requested < 0) return (uint64_t)kDefaultCheckpoints * one;
    return (uint64_t)requested / one * one;
}

uint64_t replay_log_entry_floats(const ModelConfig &c) {
    const uint64_t H = (uint64_t)c.kda_heads, D = (uint64_t)c.kda_dim;
    return 4 * H * D + H;
}

uint64_t replay_log_position_bytes(const ModelConfig &c) {
    uint64_t n_kda = 0;
    for (int L = 0; L < c.n_layers; L++) n_kda += c.is_kda[(size_t)L] ? 1 : 0;
    return n_kda * replay_log_entry_floats(c) * 4;
}

uint64_t wave_bytes_per_token(const ModelConfig &c) {
    const uint64_t d = (uint64_t)c.hidden;
    // X, the normed input, the block output and the AttnRes input; with
    // AttnRes also the partial sum and one history row per block.
    uint64_t floats = 4 * d;
    if (c.attn_res_block > 0) floats += d * (uint64_t)(c.n_layers / c.attn_res_block + 2);
    floats += (uint64_t)c.n_experts + 2 * (uint64_t)c.top_k;  // router scores, selection and weights
    return floats * 4;
}

Status plan_memory(const Manifest &m, uint64_t budget, int64_t ctx, int64_t chunk, const MemPaths &paths,
                   MemoryPlan *out, uint64_t vision_bytes, int threads, int64_t checkpoint_pool, int64_t wave,
                   uint64_t session_bytes, bool replay_log) {
    std::string source;
    const uint64_t ram = ram_limit_bytes(paths.cgroup_root, paths.proc_cgroup, &source);
    const MemStatus ms = read_mem_status(paths);
    const uint64_t avail = ms.available();
    // Rounded up to 8 MiB: `sluice plan` and the run it plans for are two
    // processes whose heaps differ by a few hundred KiB when each measures,
    // and a budget set to the plan's floor must not fall under the run's.
    const ProcessFootprint fp = read_process_footprint();
    const uint64_t step = 8ull << 20;
    const uint64_t runtime = fp.measured ? (fp.total() / step + 1) * step : 0;
    return plan_memory_for_ram(m, budget, ctx, chunk, ram, source, out, vision_bytes, threads, avail, checkpoint_pool,
                               runtime, wave, session_bytes, replay_log);
}

Status plan_memory_for_ram(const Manifest &m, uint64_t budget, int64_t ctx, int64_t chunk, uint64_t ram_limit,
                           const std::string &ram_source, MemoryPlan *out, uint64_t vision_bytes, int threads,
                           uint64_t available, int64_t checkpoint_pool, uint64_t runtime_bytes, int64_t wave,
                           uint64_t session_bytes, bool replay_log) {
    const ModelConfig &c = m.cfg;
    MemoryPlan p;
    uint64_t largest_block = 0;  // the largest single allocation (allocator slack below)
    for (const TrunkEntry &t : m.trunk) {
        if (!m.tensor_prefix.empty() && t.name.compare(0, m.tensor_prefix.size(), m.tensor_prefix) != 0) continue;
        if (t.name.substr(m.tensor_prefix.size()) == "model.embed_tokens.weight" && t.fmt != 0) continue;
        int64_t cols = t.shape.empty() ? 0 : t.shape.back(), rows = 1, ng = 0, rowbytes = 0;
        for (size_t i = 0; i + 1 < t.shape.size(); i++) rows *= t.shape[i];
        // parse_manifest bounds a shape to 2^40 elements; a hand-built one
        // past that is refused rather than overflowed.
        if (rows < 1 || cols < 1 || rows > ((int64_t)1 << 40) / cols)
            return format_error("manifest: trunk '" + t.name + "' has an absurd shape");
        if (!qtensor_geometry((QFmt)t.fmt, cols, (int)t.group, &ng, &rowbytes)) continue;
        const uint64_t bytes = (uint64_t)(rows * rowbytes) + (uint64_t)(rows * ng) * 4;  // scales are held as f32
        p.trunk += bytes;
        largest_block = std::max(largest_block, bytes);
    }
    int n_moe = 0, n_kda = 0, n_mla = 0;
    for (int L = 0; L < c.n_layers; L++) {
        n_moe += c.is_moe_layer(L);
        (c.is_kda[(size_t)L] ? n_kda : n_mla)++;
    }
    const uint64_t H = (uint64_t)c.kda_heads, D = (uint64_t)c.kda_dim, K = (uint64_t)std::max(1, c.conv_kernel);
    // Twice: the live states and the copy a failed eval is rolled back to.
    p.kda_state = 2 * (uint64_t)n_kda * (H * D * D + 3 * H * D * (K - 1)) * 4;
    p.checkpoints = checkpoint_pool_bytes(c, checkpoint_pool);
    p.replay_log = replay_log && p.checkpoints > 0 ? (uint64_t)kReplayLogPositions * replay_log_position_bytes(c) : 0;
    p.mla_kv = (uint64_t)n_mla * (uint64_t)ctx * (uint64_t)(c.kv_lora + c.d_rope) * 4;
    p.sessions = session_bytes == kSessionBytesAuto
                     ? 2 * (2 * checkpoint_bytes(c) + p.mla_kv + (uint64_t)ctx * sizeof(int32_t))
                     : session_bytes;
    if (c.n_experts > 0 && !m.banks.empty()) {
        const BankEntry &b = m.banks.begin()->second;
        // parse_manifest refuses experts < 1; the guard keeps this division
        // safe for a Manifest built by hand.
        if (b.experts < 1 || b.bytes < 0) return format_error("manifest: layers.*.experts must be >= 1");
        p.record = (uint64_t)(b.bytes / b.experts);
    }
    p.min_cache = 2ull * (uint64_t)c.top_k * p.record;
    p.working_set = (uint64_t)n_moe * (uint64_t)c.top_k * p.record;
    // Scratch: per-chunk activations (a generous 16 vectors of the widest
    // projection per token), gate/up VQ tables per token of a chunk, and
    // the logits.
    const uint64_t widest = (uint64_t)std::max<int64_t>(
        {c.hidden, (int64_t)c.kda_heads * c.kda_dim, (int64_t)c.n_heads * (c.d_nope + c.d_rope + c.d_v), c.inter,
         (int64_t)c.shared_width(), c.n_experts});
    const uint64_t nv_in = (uint64_t)c.expert_in() / 8;
    const uint64_t tables = 2ull * nv_in * (uint64_t)m.eq.stages * 256 * 4;
    p.scratch = (uint64_t)chunk * (16 * widest * 4 + tables) + (uint64_t)c.vocab * 4 * (uint64_t)chunk;
    p.vision = vision_bytes;
    // Fixed allowances, 128 MiB together as before they were named: at
    // --chunk 1 on the 48B-shaped container 64 MiB in all let peak RSS reach
    // 1.015x of a 2 GiB budget (2026-12-03, bench_budget).
    // Code, libraries and static data of the process: measured in this
    // process when the caller could (plan_memory), else a 64 MiB allowance
    // (a plan for another machine).
    p.runtime = runtime_bytes > 0 ? runtime_bytes : 64ull << 20;
    p.runtime_measured = runtime_bytes > 0;
    // glibc keeps freed heap: freeing an mmap'd block of S bytes raises its
    // mmap threshold to S (at most 32 MiB on 64-bit), later blocks under S
    // come from the heap, and a heap's free top is returned only past twice
    // the threshold. So what it keeps is bounded by twice the largest block
    // this process frees, capped at 2 x 32 MiB: the largest trunk tensor
    // (loaded through a buffer of its size) or a chunk's scratch.
    const uint64_t chunk_logits = (uint64_t)c.vocab * 4 * (uint64_t)std::max<int64_t>(chunk, 1);
    largest_block = std::max({largest_block, p.scratch, chunk_logits});
    p.allocator_slack = std::min<uint64_t>(64ull << 20, 2 * largest_block);
    // A thread's stack is resident as far as it was touched: at most 2 MiB
    // each where THP is "always" (one touch can fault in a huge page), else
    // what our threads touch, measured at under 256 KiB (LEARNED, 2026-12-06).
    p.threads = threads > 0 ? threads : default_thread_count();
    p.stack_each = thread_stack_bound();
    p.thread_stacks = (uint64_t)p.threads * p.stack_each;
    if (chunk > 1) {
        // Each pool worker's buffers for the shared-code expert product
        // (model/ffn.cpp): gate/up outputs and down tables of kVqTokensMax
        // tokens, and the kernel's scratch.
        const int64_t G = kVqTokensMax, I = c.moe_inter, S = m.eq.stages, E = m.eq.entries;
        const int64_t rows = std::max<int64_t>(I, c.expert_in());
        const int64_t floats = 2 * G * I + G * (I / 8) * S * E + vq_tokens_scratch(G, rows, (int)S, (int)E);
        p.scratch += (uint64_t)p.threads * 4 * (uint64_t)floats;
    }
    // A wave asked for is part of the floor; its first chunk's tokens are
    // in the scratch already.
    const int64_t chunk1 = std::max<int64_t>(chunk, 1);
    const uint64_t per_wave_token = wave_bytes_per_token(c);
    if (wave > 0) {
        p.wave_tokens = wave;
        p.wave = wave > chunk1 ? (uint64_t)(wave - chunk1) * per_wave_token : 0;
    }
    const uint64_t base = p.trunk + p.kda_state + p.checkpoints + p.replay_log + p.sessions + p.mla_kv + p.scratch + p.wave + p.min_cache +
                          p.vision + p.runtime + p.allocator_slack + p.thread_stacks;
    // Page tables: one 8-byte entry per 4 KiB page (1/512) of everything
    // resident; huge pages need fewer, so this is the most they take.
    const uint64_t floor_pt = (base + 511) / 512;
    p.floor = base + floor_pt;
    p.ram_limit = ram_limit;
    p.ram_source = ram_source;
    p.available = available;
    p.reserve = budget_reserve(ram_limit);
    // Never more cache than there are experts (the engine caps what it
    // reserves the same way): a tiny model under a large budget otherwise
    // planned gigabytes of cache for kilobytes of records.
    uint64_t expert_total = 0;
    for (const auto &[L, b] : m.banks) expert_total += (uint64_t)b.bytes;
    const uint64_t cache_cap = expert_total + p.min_cache / 2;
    // The room beyond the floor that holds every record, with its page tables.
    const uint64_t full_room = cache_cap > p.min_cache ? (cache_cap - p.min_cache) / 512 * 513 + 513 : 0;
    // ... and, when the wave is the plan's choice, a whole-context wave.
    const uint64_t full_wave = wave <= 0 ? (uint64_t)std::max<int64_t>(ctx - chunk1, 0) * per_wave_token : 0;
    p.max_useful = p.floor + full_room + full_wave + (full_wave + 511) / 512;

    if (budget == 0) {
        p.budget = default_budget(p.floor, p.max_useful, p.ram_limit, available, &p.choice);
        p.choice += " [RAM limit from " + p.ram_source + "]";
    } else {
        if (budget < p.floor)
            return Status(SLUICE_E_NOMEM, "budget " + format_size(budget) + " is under the memory floor of " +
                                              format_size(p.floor) + " for this model at context " +
                                              std::to_string(ctx) + "; run `sluice plan MODEL` for the breakdown");
        p.budget = budget;
        p.choice = "given";
    }
    // The room beyond the floor holds cache records and their page tables:
    // 512 bytes of records per 513 of room.
    uint64_t room = p.budget - p.floor;
    uint64_t wave_pt = 0;
    if (wave <= 0) {
        // The wave takes at most a quarter of the room: the rest stays cache,
        // which must hold a layer's routed records for the wave to read them
        // once (model/ffn.cpp holds them while the wave runs).
        const int64_t top = std::max<int64_t>(ctx, chunk1);
        const uint64_t fits = room / 4 / (per_wave_token + per_wave_token / 512 + 1);
        const int64_t extra = (int64_t)std::min<uint64_t>(fits, (uint64_t)(top - chunk1));
        p.wave_tokens = chunk1 + extra;
        p.wave = (uint64_t)extra * per_wave_token;
        wave_pt = (p.wave + 511) / 512;
        room -= p.wave + wave_pt;
    }
    // The expert batch grows past the chunk with half of what the room has
    // beyond one layer's records (which the cache must hold for the wave to
    // read each once), up to where an expert averages kVqTokensMax tokens
    // (the shared-code product's group: more buys nothing).
    p.batch_tokens = std::min<int64_t>(chunk1, p.wave_tokens > 0 ? p.wave_tokens : chunk1);
    if (p.wave_tokens > chunk1 && c.n_experts > 0 && c.top_k > 0) {
        const uint64_t per = tables * (m.eq.index_bits == 6 ? 5 : 4) / 4 + (uint64_t)c.top_k * nv_in * 8 * 4;
        const uint64_t layer = (uint64_t)c.n_experts * p.record / 512 * 513;
        const int64_t top = std::min<int64_t>(p.wave_tokens, std::max<int64_t>(chunk1, kVqTokensMax * c.n_experts / c.top_k));
        if (room > layer && top > chunk1) {
            const uint64_t fits = (room - layer) / 2 / (per + per / 512 + 1);
            const int64_t extra = (int64_t)std::min<uint64_t>(fits, (uint64_t)(top - chunk1));
            p.batch_tokens = chunk1 + extra;
            p.batch = (uint64_t)extra * per;
            const uint64_t pt = (p.batch + 511) / 512;
            wave_pt += pt;
            room -= p.batch + pt;
        }
    }
    const uint64_t room_records = room / 513 * 512 + room % 513 * 512 / 513;
    p.cache = p.min_cache + room_records;
    p.page_tables = floor_pt + wave_pt + (room - room_records);
    if (p.cache > cache_cap) {
        p.cache = cache_cap;
        p.page_tables = floor_pt + wave_pt + (p.cache > p.min_cache ? (p.cache - p.min_cache + 511) / 512 : 0);
        if (budget) p.choice += "; cache capped at every expert record (" + format_size(expert_total) + ")";
    }
    *out = p;
    return Status::ok();
}

}  // namespace sluice
