// CLI11 validators the built-in ones miss. CLI::Range compares with < and >,
// which NaN passes; an unsigned option reads "-1" as 2^64-1.
#pragma once
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <string>

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
            if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
                return "'" + s + "' is not a non-negative integer";
            return {};
        },
        "UINT");
}

}  // namespace sluice
