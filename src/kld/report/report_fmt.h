// Number formatting shared by the text and HTML forms of `sluice kld report`
// (internal to src/eval; both must print the same digits for a value).
#pragma once
#include <cmath>
#include <cstdio>
#include <string>

namespace sluice::kld::fmt {

inline std::string g6(double v, int prec = 6) {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (std::isnan(v)) return "n/a";
    char b[40];
    std::snprintf(b, sizeof b, "%.*g", prec, v);
    return b;
}

inline std::string pct(double v, int prec = 2) {
    if (!(v >= 0)) return "n/a";
    char b[40];
    std::snprintf(b, sizeof b, "%.*f%%", prec, 100 * v);
    return b;
}

inline std::string ci_text(double lo, double hi) {
    std::string s = "[";
    s += g6(lo);
    s += ", ";
    s += g6(hi);
    s += "]";
    return s;
}

}  // namespace sluice::kld::fmt
