// CPU lists as taskset and warp write them: "0-5", "0-2,6-8", "3".
#pragma once
#include <string>
#include <vector>

namespace sluice {

// Parses a list into distinct CPU ids, ascending. CPU ids are bounded by
// kMaxCpu (the kernel's cpu_set_t size); empty entries, reversed ranges and
// non-digits are refused with *err naming the entry.
constexpr int kMaxCpu = 1024;
bool parse_cpu_list(const std::string &s, std::vector<int> *out, std::string *err);

// Checks every CPU is one this process may run on (sched_getaffinity);
// false with *err naming the first that is not, and the allowed list.
bool cpus_available(const std::vector<int> &cpus, std::string *err);

}  // namespace sluice
