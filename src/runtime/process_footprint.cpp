#include "runtime/process_footprint.h"

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace sluice {

ProcessFootprint read_process_footprint(const std::string &maps, const std::string &status) {
    ProcessFootprint f;
    std::ifstream m(maps);
    if (!m) return f;
    std::map<std::string, uint64_t> bytes_of;  // path -> bytes mapped
    std::set<std::string> executable;          // paths mapped r-x somewhere
    std::string line;
    while (std::getline(m, line)) {
        // start-end perms offset dev inode path
        uint64_t lo = 0, hi = 0, inode = 0;
        char perms[8] = {0}, dev[16] = {0};
        unsigned long long off = 0;
        int used = 0;
        if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %llx %15s %" SCNu64 " %n", &lo, &hi, perms, &off,
                        dev, &inode, &used) < 6)
            continue;
        if (inode == 0 || hi <= lo || used <= 0 || (size_t)used >= line.size()) continue;
        const std::string path = line.substr((size_t)used);
        bytes_of[path] += hi - lo;
        if (perms[2] == 'x') executable.insert(path);
    }
    for (const std::string &p : executable) f.image_bytes += bytes_of[p];
    std::ifstream s(status);
    if (!s) return f;
    while (std::getline(s, line)) {
        unsigned long long kb = 0;
        if (std::sscanf(line.c_str(), "RssAnon: %llu kB", &kb) == 1) {
            f.anon_rss = (uint64_t)kb * 1024;
            f.measured = !executable.empty();
            break;
        }
    }
    return f;
}

}  // namespace sluice
