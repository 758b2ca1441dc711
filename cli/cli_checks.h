// CLI11 validators the built-in ones miss. CLI::Range compares with < and >,
// which NaN passes; an unsigned option reads "-1" as 2^64-1.
#pragma once
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/cpu_list.h"
#include "common/parse_number.h"

namespace sluice {

inline CLI::Validator finite_number() {
    return CLI::Validator(
        [](std::string &s) -> std::string {
            char *end = nullptr;
            const double v = std::strtod(s.c_str(), &end);
            if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) return "'" + s + "' is not a finite number";
            return {};
        },
        "FINITE");
}

inline CLI::Validator unsigned_integer() {
    return CLI::Validator(
        [](std::string &s) -> std::string {
            // One parser (common/parse_number.h): past 2^64-1 is refused,
            // not saturated by the conversion that follows.
            uint64_t v;
            std::string err;
            return parse_u64(s, &v, &err) ? std::string() : err;
        },
        "UINT");
}

// A CPU list as taskset writes it ("0-5", "0-2,6-8"); the library checks
// that the CPUs exist for this process when it opens.
inline CLI::Validator cpu_list() {
    return CLI::Validator(
        [](std::string &s) -> std::string {
            std::vector<int> v;
            std::string err;
            return parse_cpu_list(s, &v, &err) ? std::string() : err;
        },
        "LIST");
}

}  // namespace sluice
