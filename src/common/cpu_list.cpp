#include "common/cpu_list.h"

#include <algorithm>

#if defined(__linux__)
#include <sched.h>
#endif

namespace sluice {

namespace {
bool parse_cpu(const std::string &t, int *v) {
    if (t.empty() || t.size() > 5 || t.find_first_not_of("0123456789") != std::string::npos) return false;
    *v = std::stoi(t);
    return *v < kMaxCpu;
}
}  // namespace

bool parse_cpu_list(const std::string &s, std::vector<int> *out, std::string *err) {
    out->clear();
    size_t i = 0;
    while (i <= s.size()) {
        size_t j = s.find(',', i);
        if (j == std::string::npos) j = s.size();
        const std::string e = s.substr(i, j - i);
        const size_t dash = e.find('-');
        int a = 0, b = 0;
        bool ok = dash == std::string::npos ? parse_cpu(e, &a) && parse_cpu(e, &b)
                                            : parse_cpu(e.substr(0, dash), &a) && parse_cpu(e.substr(dash + 1), &b);
        if (!ok || a > b) {
            *err = "'" + e + "' in CPU list '" + s + "' is not a CPU or a range A-B (CPUs 0 to " +
                   std::to_string(kMaxCpu - 1) + ")";
            return false;
        }
        for (int c = a; c <= b; c++) out->push_back(c);
        i = j + 1;
    }
    std::sort(out->begin(), out->end());
    out->erase(std::unique(out->begin(), out->end()), out->end());
    return true;
}

bool cpus_available(const std::vector<int> &cpus, std::string *err) {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return true;  // cannot tell: let pinning try
    for (int c : cpus)
        if (!CPU_ISSET(c, &set)) {
            std::string allowed;
            for (int k = 0; k < CPU_SETSIZE; k++)
                if (CPU_ISSET(k, &set)) {
                    // Appended piece by piece: "," + std::string trips GCC 12's -Wrestrict
                    // false positive (GCC bug 105329).
                    if (!allowed.empty()) allowed += ',';
                    allowed += std::to_string(k);
                }
            *err = "CPU " + std::to_string(c) + " is not available to this process (allowed: " + allowed + ")";
            return false;
        }
#endif
    return true;
}

}  // namespace sluice
