// Seconds on the monotonic clock, for intervals (never wall time: a clock
// step would make a measured rate negative or huge).
#pragma once
#include <chrono>

namespace sluice {
inline double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace sluice
