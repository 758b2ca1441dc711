// The kernel sets a target does not build: AVX2 / AVX-512 off x86-64, NEON
// off AArch64. Their slots report "not compiled in".
#include "quant/kernels.h"
namespace sluice {
#if !(defined(__x86_64__) || defined(__i386__))
const Kernels *kernels_avx2() { return nullptr; }
const Kernels *kernels_avx512() { return nullptr; }
#endif
#if !defined(__aarch64__)
const Kernels *kernels_neon() { return nullptr; }
#endif
}  // namespace sluice
