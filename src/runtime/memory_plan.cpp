#include "runtime/memory_plan.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

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

Status plan_memory(const Manifest &m, uint64_t budget, int64_t ctx, int64_t chunk, const std::string &cgroup_root,
                   const std::string &proc_cgroup, MemoryPlan *out, uint64_t vision_bytes) {
    std::string source;
    const uint64_t ram = ram_limit_bytes(cgroup_root, proc_cgroup, &source);
    return plan_memory_for_ram(m, budget, ctx, chunk, ram, source, out, vision_bytes);
}

Status plan_memory_for_ram(const Manifest &m, uint64_t budget, int64_t ctx, int64_t chunk, uint64_t ram_limit,
                           const std::string &ram_source, MemoryPlan *out, uint64_t vision_bytes) {
    const ModelConfig &c = m.cfg;
    MemoryPlan p;
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
        p.trunk += (uint64_t)(rows * rowbytes) + (uint64_t)(rows * ng) * 4;  // scales are held as f32
    }
    int n_moe = 0, n_kda = 0, n_mla = 0;
    for (int L = 0; L < c.n_layers; L++) {
        n_moe += c.is_moe_layer(L);
        (c.is_kda[(size_t)L] ? n_kda : n_mla)++;
    }
    const uint64_t H = (uint64_t)c.kda_heads, D = (uint64_t)c.kda_dim, K = (uint64_t)std::max(1, c.conv_kernel);
    // Twice: the live states and the copy a failed eval is rolled back to.
    p.kda_state = 2 * (uint64_t)n_kda * (H * D * D + 3 * H * D * (K - 1)) * 4;
    p.mla_kv = (uint64_t)n_mla * (uint64_t)ctx * (uint64_t)(c.kv_lora + c.d_rope) * 4;
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
    // projection per token), gate/up VQ tables per token of a chunk, the
    // logits, and a fixed allowance for code, libraries and allocator slack:
    // 128 MiB, because at --chunk 1 on the 48B-shaped container 64 MiB let
    // peak RSS reach 1.015x of a 2 GiB budget (2026-12-03, bench_budget).
    const uint64_t widest = (uint64_t)std::max<int64_t>(
        {c.hidden, (int64_t)c.kda_heads * c.kda_dim, (int64_t)c.n_heads * (c.d_nope + c.d_rope + c.d_v), c.inter,
         (int64_t)c.shared_width(), c.n_experts});
    const uint64_t nv_in = (uint64_t)c.expert_in() / 8;
    const uint64_t tables = 2ull * nv_in * (uint64_t)m.eq.stages * 256 * 4;
    p.scratch = (uint64_t)chunk * (16 * widest * 4 + tables) + (uint64_t)c.vocab * 4 * (uint64_t)chunk +
                (128ull << 20);
    p.vision = vision_bytes;
    p.floor = p.trunk + p.kda_state + p.mla_kv + p.scratch + p.min_cache + p.vision;
    p.ram_limit = ram_limit;
    p.ram_source = ram_source;

    if (budget == 0) {
        const uint64_t cap = p.ram_limit / 4 * 3;
        p.budget = p.floor;
        p.choice = "floor (nothing larger fits under 3/4 of " + format_size(p.ram_limit) + ")";
        for (int k : {3, 2, 1}) {
            const uint64_t b = p.floor + (uint64_t)k * p.working_set;
            if (b <= cap) {
                p.budget = b;
                p.choice = "floor + " + std::to_string(k) + " token working set" + (k > 1 ? "s" : "") +
                           " (fits under 3/4 of " + format_size(p.ram_limit) + " from " + p.ram_source + ")";
                break;
            }
        }
    } else {
        if (budget < p.floor)
            return Status(SLUICE_E_NOMEM, "budget " + format_size(budget) + " is under the memory floor of " +
                                              format_size(p.floor) + " for this model at context " +
                                              std::to_string(ctx) + "; run `sluice plan MODEL` for the breakdown");
        p.budget = budget;
        p.choice = "given";
    }
    p.cache = p.budget - p.floor + p.min_cache;
    // Never more cache than there are experts (the engine caps what it
    // reserves the same way): a tiny model under a large budget otherwise
    // planned gigabytes of cache for kilobytes of records.
    uint64_t expert_total = 0;
    for (const auto &[L, b] : m.banks) expert_total += (uint64_t)b.bytes;
    if (p.cache > expert_total + p.min_cache / 2) {
        p.cache = expert_total + p.min_cache / 2;
        p.choice += "; cache capped at every expert record (" + format_size(expert_total) + ")";
    }
    *out = p;
    return Status::ok();
}

bool parse_size(const std::string &s, uint64_t *out) {
    if (s.empty()) return false;
    char *end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || !(v >= 0) || !std::isfinite(v)) return false;
    std::string unit(end);
    for (auto &ch : unit) ch = (char)std::toupper((unsigned char)ch);
    double mult = 1;
    if (unit.empty() || unit == "B") mult = 1;
    else if (unit == "K" || unit == "KB" || unit == "KIB") mult = 1024.0;
    else if (unit == "M" || unit == "MB" || unit == "MIB") mult = 1024.0 * 1024;
    else if (unit == "G" || unit == "GB" || unit == "GIB") mult = 1024.0 * 1024 * 1024;
    else if (unit == "T" || unit == "TB" || unit == "TIB") mult = 1024.0 * 1024 * 1024 * 1024;
    else return false;
    const double b = v * mult;
    if (b > 1.8e19) return false;
    *out = (uint64_t)b;
    return true;
}

std::string format_size(uint64_t b) {
    char buf[64];
    if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
    else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
    else std::snprintf(buf, sizeof buf, "%llu B", (unsigned long long)b);
    return buf;
}

}  // namespace sluice
