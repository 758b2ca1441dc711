// Non-x86 builds: no AVX sets (a NEON set would slot in here).
#include "quant/kernels.h"
namespace sluice {
const Kernels *kernels_avx2() { return nullptr; }
const Kernels *kernels_avx512() { return nullptr; }
}  // namespace sluice
