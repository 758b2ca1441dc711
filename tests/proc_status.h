// This process's memory as the kernel counts it (/proc/self/status), for
// the tests that hold RSS under a budget or watch it drop.
#pragma once
#include <cstdlib>
#include <fstream>
#include <string>

namespace sluice_test {

// A "Vm..." field's value in kB ("VmRSS", "VmHWM"); -1 when absent.
inline long proc_status_kb(const std::string &field) {
    std::ifstream f("/proc/self/status");
    std::string line;
    const std::string key = field + ":";
    while (std::getline(f, line))
        if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + key.size());
    return -1;
}
inline long vm_rss_kb() { return proc_status_kb("VmRSS"); }
inline long vm_hwm_kb() { return proc_status_kb("VmHWM"); }

}  // namespace sluice_test
