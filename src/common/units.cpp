#include "common/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace sluice {

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
