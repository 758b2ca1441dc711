// Scalar emulation of torch's float32 CPU arithmetic for the festr2 v0
// comparator (KLD.md §4.2, §7.4 "Compat modes"): log_softmax over the last
// dimension, elementwise exp and logaddexp, and sum(-1) over contiguous rows,
// each in the order torch's vectorised CPU kernels use. Verified bit for bit
// against torch 1.13 (Debian python3-torch) with CPU capability AVX2 (8
// lanes) and, with ATEN_CPU_CAPABILITY=avx512, AVX-512 (16 lanes); see
// docs/LEARNED.md (2026-12-02). Portable C++ (std::fma), deterministic, no
// dependence on the host's SIMD.
#pragma once

#include <cstdint>

namespace sluice::kld::torchf32 {

// Lane widths torch's CPU capability gives Vectorized<float>: 8 (AVX2, the
// default of x86-64 builds) or 16 (AVX-512).
bool lanes_supported(int lanes);

// Elementwise exp and log as torch's vectorised float kernels compute them
// (SLEEF expf_u10 / logf_u10 algorithms; faithfully rounded, not always the
// correctly rounded value libm returns).
float exp32(float d);
float log32(float d);

// torch.logaddexp(a, b) elementwise (vectorised form): m + log(exp(a-m) +
// exp(b-m)) with m = max(a, b); a when a == b is infinite.
float logaddexp32(float a, float b);

// x[0..n) reduced like torch's float32 sum(-1) of one row of a multi-row
// block (see torch_f32.cpp for the order).
float sum(const float* x, int64_t n, int lanes);

// out[0..n) = torch.log_softmax(x[0..n)) given max = the row's maximum.
void log_softmax(const float* x, int64_t n, float max, int lanes, float* out);

// The elementwise terms of §4.2 from a = log_softmax(x), b = log_softmax(y),
// as festr2's torch expressions round them: kl[v] = p (a - b) with p =
// exp(a); when js1 is not null, with q = exp(b) and lm = logaddexp(a, b) -
// float32(ln 2): js1[v] = p (a - lm), js2[v] = q (b - lm).
void divergence_terms(const float* a, const float* b, int64_t n, float* kl, float* js1, float* js2);

}  // namespace sluice::kld::torchf32
