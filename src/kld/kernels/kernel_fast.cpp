// Scalar form of the fast kernel (the definition the SIMD kernels match bit
// for bit) and the run-time choice between scalar, AVX2, AVX-512 and NEON.
#include <cstdlib>
#include <cstring>

#include "kld/kernels/kernel.h"
#include "kld/kernels/kernel_fast.h"
#include "quant/cpu_features.h"

namespace sluice::kld {

namespace fastk {
namespace {

bool head_scalar(const float* x, int64_t V, Head* h) {
    return head_tiled(x, V, h, max_scalar, sum_scalar);
}

void pass2_scalar_row(const float* x, const float* y, int64_t V, float Mx, float My, double ox, double oy, bool want_js,
                      Pass2* o) {
    Acc A;
    pass2_scalar(x, y, 0, V, Mx, My, ox, oy, want_js, &A);
    finish(A, o);
}

const Kernels kScalar = {"scalar", head_scalar, pass2_scalar_row};

}  // namespace

const Kernels& kernels_scalar() { return kScalar; }

#if !(defined(__x86_64__) || defined(_M_X64))
const Kernels* kernels_avx2() { return nullptr; }
const Kernels* kernels_avx512() { return nullptr; }
#endif
#if !defined(__aarch64__)
const Kernels* kernels_neon() { return nullptr; }
#endif

}  // namespace fastk

namespace {

bool cpu_has(FastIsa isa) {
#if defined(__x86_64__) || defined(_M_X64)
    __builtin_cpu_init();
    switch (isa) {
        case FastIsa::scalar: return true;
        case FastIsa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && fastk::kernels_avx2();
        case FastIsa::avx512:
            return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("fma") && fastk::kernels_avx512();
        default: return false;
    }
#else
    switch (isa) {
        case FastIsa::scalar: return true;
        case FastIsa::neon: return cpu_has_neon() && fastk::kernels_neon();
        default: return false;
    }
#endif
}

const fastk::Kernels* table(FastIsa isa) {
    switch (isa) {
        case FastIsa::avx2: return fastk::kernels_avx2();
        case FastIsa::avx512: return fastk::kernels_avx512();
        case FastIsa::neon: return fastk::kernels_neon();
        default: return &fastk::kernels_scalar();
    }
}

// The best ISA, narrowed (never widened) by SLUICE_BACKEND, the variable
// the engine's kernels obey, so one setting pins both.
FastIsa pick_auto() {
    FastIsa best = cpu_has(FastIsa::avx512) ? FastIsa::avx512
                   : cpu_has(FastIsa::avx2) ? FastIsa::avx2
                   : cpu_has(FastIsa::neon) ? FastIsa::neon
                                            : FastIsa::scalar;
    const char* env = std::getenv("SLUICE_BACKEND");
    if (env && !std::strcmp(env, "scalar")) return FastIsa::scalar;
    if (env && !std::strcmp(env, "avx2") && cpu_has(FastIsa::avx2)) return FastIsa::avx2;
    return best;
}

FastIsa& current() {
    static FastIsa isa = pick_auto();
    return isa;
}

}  // namespace

bool fast_isa_available(FastIsa isa) { return cpu_has(isa); }

const char* fast_isa_name(FastIsa isa) {
    switch (isa) {
        case FastIsa::avx2: return "avx2";
        case FastIsa::avx512: return "avx512";
        case FastIsa::neon: return "neon";
        default: return "scalar";
    }
}

FastIsa fast_isa() { return current(); }

Status set_fast_isa(FastIsa isa) {
    if (isa == FastIsa::automatic) {
        current() = pick_auto();
        return {};
    }
    if (!cpu_has(isa)) return err(Code::usage, std::string("the ") + fast_isa_name(isa) + " KLD kernel is not available on this CPU or build");
    current() = isa;
    return {};
}

const fastk::Kernels& fast_kernels(FastIsa isa) { return *table(isa == FastIsa::automatic ? current() : isa); }

}  // namespace sluice::kld
