#include "runtime/mem_status.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace sluice {
namespace {

bool read_u64(const std::string &path, uint64_t *out) {
    std::ifstream f(path);
    std::string s;
    if (!(f >> s) || s == "max") return false;
    char *end = nullptr;
    const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (!end || *end) return false;
    *out = v;
    return true;
}

// "key value" lines (memory.stat, memory.events): the value of key, or 0.
uint64_t keyed(const std::string &path, const char *key) {
    std::ifstream f(path);
    std::string k;
    unsigned long long v = 0;
    while (f >> k >> v)
        if (k == key) return v;
    return 0;
}

}  // namespace

uint64_t MemStatus::available() const {
    uint64_t a = have_meminfo ? mem_available : UINT64_MAX;
    if (have_cgroup) {
        const uint64_t used = cg_usage > cg_inactive_file ? cg_usage - cg_inactive_file : 0;
        a = std::min(a, cg_limit > used ? cg_limit - used : 0);
    }
    return a == UINT64_MAX ? 0 : a;
}

MemStatus read_mem_status(const MemPaths &p) {
    MemStatus s;
    {
        std::ifstream f(p.meminfo);
        std::string line;
        bool total = false, avail = false;
        while (std::getline(f, line)) {
            // "MemAvailable:   23430968 kB"
            unsigned long long kb = 0;
            if (line.rfind("MemTotal:", 0) == 0 && std::sscanf(line.c_str() + 9, "%llu", &kb) == 1) {
                s.mem_total = (uint64_t)kb * 1024;
                total = true;
            } else if (line.rfind("MemAvailable:", 0) == 0 && std::sscanf(line.c_str() + 13, "%llu", &kb) == 1) {
                s.mem_available = (uint64_t)kb * 1024;
                avail = true;
            }
        }
        s.have_meminfo = total && avail;
    }
    {
        // "some avg10=0.00 avg60=0.00 avg300=0.00 total=0"
        std::ifstream f(p.psi);
        std::string line;
        while (std::getline(f, line))
            if (line.rfind("some ", 0) == 0) {
                const size_t at = line.find("avg10=");
                if (at != std::string::npos) {
                    s.psi_some_avg10 = std::strtod(line.c_str() + at + 6, nullptr);
                    s.have_psi = true;
                }
            }
    }
    // cgroup v2: "0::/path". Every ancestor's limit binds; the tightest
    // room (limit - usage + inactive page cache) is what this process has.
    std::ifstream pc(p.proc_cgroup);
    std::string line, rel;
    while (std::getline(pc, line))
        if (line.rfind("0::", 0) == 0) rel = line.substr(3);
    if (rel.empty()) {
        // No v2 line: a v2 tree mounted at the root still limits everything.
        if (!std::ifstream(p.cgroup_root + "/memory.max").good()) return s;
        rel = "/";
    }
    uint64_t best_room = UINT64_MAX;
    for (std::string q = rel;;) {
        const std::string dir = p.cgroup_root + (q == "/" ? "" : q);
        uint64_t lim = 0, v = 0;
        for (const char *f : {"memory.max", "memory.high"})
            if (read_u64(dir + "/" + f, &v) && v > 0 && (lim == 0 || v < lim)) lim = v;
        uint64_t cur = 0;
        if (lim && read_u64(dir + "/memory.current", &cur)) {
            const uint64_t inactive = keyed(dir + "/memory.stat", "inactive_file");
            const uint64_t used = cur > inactive ? cur - inactive : 0;
            const uint64_t room = lim > used ? lim - used : 0;
            if (room < best_room) {
                best_room = room;
                s.have_cgroup = true;
                s.cgroup_dir = dir;
                s.cg_limit = lim;
                s.cg_usage = cur;
                s.cg_inactive_file = inactive;
            }
        }
        if (q.empty() || q == "/") break;
        const size_t cut = q.find_last_of('/');
        q = cut == 0 || cut == std::string::npos ? "/" : q.substr(0, cut);
    }
    if (s.have_cgroup) {
        const std::string ev = s.cgroup_dir + "/memory.events";
        s.cg_events = keyed(ev, "high") + keyed(ev, "max") + keyed(ev, "oom") + keyed(ev, "oom_kill");
    }
    return s;
}

}  // namespace sluice
