// What the CPU offers, for choosing kernel sets at run time (never at build
// time: one binary runs on any CPU of its architecture).
#pragma once

namespace sluice {

// AArch64 Advanced SIMD. Linux: the kernel's hwcaps (getauxval(AT_HWCAP));
// macOS on Apple silicon: always (NEON is part of the architecture). False on
// other architectures.
bool cpu_has_neon();

}  // namespace sluice
