// How much memory the machine (and this process's cgroup) can still give,
// read the way the kernel reports it: MemAvailable from /proc/meminfo, PSI's
// `some avg10` from /proc/pressure/memory, and for a cgroup v2 member its
// own memory.max / memory.high, memory.current, memory.stat's inactive_file
// and memory.events. The default budget and the pressure watcher both read
// it; every path is a parameter so tests can point it at a fake tree.
#pragma once
#include <cstdint>
#include <string>

namespace sluice {

struct MemPaths {
    std::string meminfo = "/proc/meminfo";
    std::string psi = "/proc/pressure/memory";
    std::string cgroup_root = "/sys/fs/cgroup";
    std::string proc_cgroup = "/proc/self/cgroup";
};

struct MemStatus {
    bool have_meminfo = false;
    uint64_t mem_total = 0, mem_available = 0;
    bool have_psi = false;
    double psi_some_avg10 = 0;  // % of the last 10 s some task stalled on memory
    // This process's own cgroup (v2), when it has a finite limit.
    bool have_cgroup = false;
    std::string cgroup_dir;
    uint64_t cg_limit = 0;          // smallest finite memory.max / memory.high of the cgroup
    uint64_t cg_usage = 0;          // memory.current
    uint64_t cg_inactive_file = 0;  // page cache the kernel reclaims first: counted as available
    uint64_t cg_events = 0;         // memory.events high + max + oom + oom_kill: grows when the limit bites
    // What this process can still take before someone pages or is killed:
    // MemAvailable, capped by the cgroup's room (limit - usage + inactive_file).
    uint64_t available() const;
};

// Reads what exists; a missing file leaves its have_* false. The cgroup is
// this process's own (the 0:: line of proc_cgroup) and only its own limit is
// read: ancestors' limits are ram_limit_bytes's business.
MemStatus read_mem_status(const MemPaths &paths);

}  // namespace sluice
