#include "quant/cpu_features.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)  // arch/arm64/include/uapi/asm/hwcap.h
#endif
#endif

namespace sluice {

bool cpu_has_neon() {
#if defined(__aarch64__) && defined(__linux__)
    static const bool yes = (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
    return yes;
#elif defined(__aarch64__)
    return true;
#else
    return false;
#endif
}

}  // namespace sluice
