#include <cstdlib>
#include <cstring>

#include "quant/cpu_features.h"
#include "quant/kernels.h"

namespace sluice {

bool select_kernels(sluice_backend want, const Kernels **out, const char **why) {
    if (want == SLUICE_BACKEND_AUTO) {
        // The environment may only narrow the choice; it is read here, once
        // per context, never from inside a kernel.
        const char *env = std::getenv("SLUICE_BACKEND");
        if (env && *env) {
            if (!std::strcmp(env, "scalar")) want = SLUICE_BACKEND_SCALAR;
            else if (!std::strcmp(env, "avx2")) want = SLUICE_BACKEND_AVX2;
            else if (!std::strcmp(env, "avx512")) want = SLUICE_BACKEND_AVX512;
            else if (!std::strcmp(env, "neon")) want = SLUICE_BACKEND_NEON;
            else if (std::strcmp(env, "auto") != 0) {
                *why = "SLUICE_BACKEND must be scalar, avx2, avx512, neon or auto";
                return false;
            }
        }
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const bool has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    const bool has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    const bool has512 = false, has2 = false;
#endif
    const bool has_neon = cpu_has_neon();
    switch (want) {
        case SLUICE_BACKEND_SCALAR: *out = &kernels_scalar(); return true;
        case SLUICE_BACKEND_AVX512:
            if (!has512 || !kernels_avx512()) { *why = "the AVX-512 backend is not available on this CPU or build"; return false; }
            *out = kernels_avx512();
            return true;
        case SLUICE_BACKEND_AVX2:
            if (!has2 || !kernels_avx2()) { *why = "the AVX2 backend is not available on this CPU or build"; return false; }
            *out = kernels_avx2();
            return true;
        case SLUICE_BACKEND_NEON:
            if (!has_neon || !kernels_neon()) { *why = "the NEON backend is not available on this CPU or build"; return false; }
            *out = kernels_neon();
            return true;
        case SLUICE_BACKEND_AUTO:
        default:
            if (has512 && kernels_avx512()) *out = kernels_avx512();
            else if (has2 && kernels_avx2()) *out = kernels_avx2();
            else if (has_neon && kernels_neon()) *out = kernels_neon();
            else *out = &kernels_scalar();
            return true;
    }
}

}  // namespace sluice
