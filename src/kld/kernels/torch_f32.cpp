#include "kld/kernels/torch_f32.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

// Facts about torch's float32 CPU arithmetic this file reproduces (checked
// bit for bit against torch 1.13 with numpy emulations and the
// KldCompare.Festr2CompatK3VocabMatchesTorch test). L is the lane count of
// torch's Vectorized<float> (8 for AVX2, 16 for AVX-512).
//
// exp, log (elementwise, and inside log_softmax and logaddexp): SLEEF's
//   expf_u10 and logf_u10 algorithms, evaluated with FMA; results differ from
//   glibc's expf/logf by one ulp on ~10% (exp) and ~1.5% (log) of inputs.
//   Partial vectors (row tails) go through the same functions.
//
// log_softmax(x) over a contiguous last dimension of size n:
//   M = max(x); S = Σ exp(x_v - M) accumulated in L lanes: the first vector
//   initialises the accumulator, each later full vector is added lane-wise in
//   order, and a tail of t < L elements is added to lanes 0..t-1 only. The
//   lanes are then folded by a butterfly: v_i += v_{i^(L/2)}, ..., v_i +=
//   v_{i^1}; S is lane 0. For n < L, S = ((e_0 + e_1) + e_2) + ... instead.
//   out_v = (x_v - M) - log(S).
//
// logaddexp(a, b) (the vectorised kernel): m = max(a, b);
//   m + log(exp(a - m) + exp(b - m)), or a where a == b and |a| = inf.
//   (Not the log1p(exp(-|a-b|)) form: that one differs on ~1.5% of inputs.)
//
// sum(-1) of a contiguous float row of n elements, n >= L ("cascade sum"):
//   the row is read as nv = n / L vectors. Those form a (nv/4, 4) array:
//   column k (an "ILP stream") holds vectors k, k+4, k+8, ... Each stream is
//   summed with a 4-level cascade: with P = max(4, ceil_log2(nv/4) / 4),
//   every 2^P rows the level-0 accumulator is added into level 1 and cleared;
//   level j is in turn added into level j+1 (and cleared) whenever the row
//   count's bits P*j .. P*(j+1)-1 are all zero. Rows past the last full
//   group of 2^P go into level 0; then level 0 += level 1, += level 2,
//   += level 3. The nv % 4 vectors left over are added to stream 0 in order,
//   then stream 0 += stream 1, += stream 2, += stream 3. Finally, starting
//   from 0.0f, the n % L scalar tail elements are added in order, then lanes
//   0..L-1 of stream 0 in order. For n < L the same cascade runs on single
//   floats (4 streams of scalars, no lanes, no tail accumulator).
//   This holds for every row of a block of two or more rows, whatever the
//   thread count. A block of ONE row with several torch threads is instead
//   split across the threads (different order; not reproduced).

// Speed only: the row loops are built twice (target_clones), with and
// without hardware FMA, and the CPU picks one at load time. std::fma is
// exactly rounded either way, so both give the same bits.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && !defined(SLUICE_NO_TARGET_CLONES)
#define SLUICE_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define SLUICE_FMA_CLONES
#endif
#define SLUICE_INLINE inline __attribute__((always_inline))

namespace sluice::kld::torchf32 {

namespace {

constexpr int kMaxLanes = 16;

float pow2i(int k) {  // 2^k for -126 <= k <= 127
    return std::bit_cast<float>(uint32_t(k + 127) << 23);
}

int ceil_log2(int64_t x) {  // as torch's helper: 1 for x <= 2
    if (x <= 2) return 1;
    int b = 0;
    for (uint64_t v = uint64_t(x - 1); v; v >>= 1) ++b;
    return b;
}

// Double-float helpers (value = hi + lo), each step one IEEE operation.
struct F2 {
    float hi, lo;
};

F2 add2(float x, float y) {  // exact sum of two floats
    const float s = x + y, v = s - x;
    return {s, (x - (s - v)) + (y - v)};
}

// The 4-stream, 4-level cascade over `rows` rows of 4 vectors of W lanes
// (row i = vectors 4i..4i+3, vector j at x + j * W), plus the leftover
// vectors and the stream merge; acc0 receives the W lane sums.
template <int W>
void cascade(const float* x, int64_t nvec, float* acc0) {
    constexpr int kIlp = 4, kLevels = 4;
    const int64_t rows = nvec / kIlp;
    const int P = std::max(4, ceil_log2(rows) / kLevels);
    const int64_t step = int64_t(1) << P, mask = step - 1;
    float acc[kLevels][kIlp][W];
    std::memset(acc, 0, sizeof acc);
    auto add_row = [&](int64_t i) {
        const float* r = x + i * kIlp * W;
        for (int k = 0; k < kIlp; ++k)
            for (int l = 0; l < W; ++l) acc[0][k][l] += r[k * W + l];
    };
    int64_t i = 0;
    while (i + step <= rows) {
        for (int64_t j = 0; j < step; ++j) add_row(i++);
        for (int j = 1; j < kLevels; ++j) {
            for (int k = 0; k < kIlp; ++k)
                for (int l = 0; l < W; ++l) {
                    acc[j][k][l] += acc[j - 1][k][l];
                    acc[j - 1][k][l] = 0.f;
                }
            if ((i & (mask << (j * P))) != 0) break;
        }
    }
    for (; i < rows; ++i) add_row(i);
    for (int j = 1; j < kLevels; ++j)
        for (int k = 0; k < kIlp; ++k)
            for (int l = 0; l < W; ++l) acc[0][k][l] += acc[j][k][l];
    for (int64_t v = rows * kIlp; v < nvec; ++v)
        for (int l = 0; l < W; ++l) acc[0][0][l] += x[v * W + l];
    for (int k = 1; k < kIlp; ++k)
        for (int l = 0; l < W; ++l) acc[0][0][l] += acc[0][k][l];
    for (int l = 0; l < W; ++l) acc0[l] = acc[0][0][l];
}

template <int L>
float vec_sum(const float* x, int64_t n) {
    float lanes[L];
    cascade<L>(x, n / L, lanes);
    float s = 0.f;
    for (int64_t k = (n / L) * L; k < n; ++k) s += x[k];
    for (int l = 0; l < L; ++l) s += lanes[l];
    return s;
}

SLUICE_INLINE float exp_k(float d) {
    if (d != d) return d;
    if (d < -104.f) return 0.f;
    if (d > 104.f) return std::numeric_limits<float>::infinity();
    // Cody-Waite: d = q ln2 + s with ln2 split in two parts, then a degree-6
    // polynomial for e^s, scaled by 2^q in two exact-or-once-rounded steps.
    const float q = std::nearbyint(d * 1.442695040888963407359924681001892137426645954152985934135449406931f);
    float s = std::fma(q, -0.693145751953125f, d);
    s = std::fma(q, -1.428606765330187045e-06f, s);
    float u = 0.000198527617612853646278381f;
    u = std::fma(u, s, 0.00139304355252534151077271f);
    u = std::fma(u, s, 0.00833336077630519866943359f);
    u = std::fma(u, s, 0.0416664853692054748535156f);
    u = std::fma(u, s, 0.166666671633720397949219f);
    u = std::fma(u, s, 0.5f);
    u = 1.f + std::fma(s * s, u, s);
    const int qi = int(q);
    return (u * pow2i(qi >> 1)) * pow2i(qi - (qi >> 1));
}

SLUICE_INLINE float log_k(float d) {
    if (d != d || d < 0.f) return std::numeric_limits<float>::quiet_NaN();
    if (d == 0.f) return -std::numeric_limits<float>::infinity();
    if (d == std::numeric_limits<float>::infinity()) return d;
    const bool sub = d < std::numeric_limits<float>::min();
    if (sub) d *= 18446744073709551616.f;  // 2^64
    // d = m 2^e with m in [0.75, 1.5); log d = e ln2 + 2 atanh((m-1)/(m+1)),
    // carried in double-float.
    int e = int((std::bit_cast<uint32_t>(d * (1.0f / 0.75f)) >> 23) & 0xff) - 0x7f;
    const float m = std::bit_cast<float>(std::bit_cast<uint32_t>(d) - (uint32_t(e) << 23));
    if (sub) e -= 64;
    const float ef = float(e);
    const float L2U = 0.69314718246459960938f, L2L = -1.904654323148236017e-09f;
    F2 s{L2U * ef, 0.f};
    s.lo = std::fma(L2L, ef, std::fma(L2U, ef, -s.hi));
    // x = (m - 1) / (m + 1) in double-float
    const F2 n = add2(-1.f, m), dd = add2(1.f, m);
    const float t = 1.f / dd.hi;
    const float xh = n.hi * t;
    const float u = std::fma(t, n.hi, -xh);
    const float v = std::fma(-dd.lo, t, std::fma(-dd.hi, t, 1.f));
    const float xl = std::fma(xh, v, std::fma(n.lo, t, u));
    const float x2 = xh * xh;
    float p = 0.3027294874f;
    p = std::fma(p, x2, 0.3996108174f);
    p = std::fma(p, x2, 0.6666694880f);
    // s += 2x (double-float + double-float)
    const float yh = xh * 2.f, yl = xl * 2.f;
    const float s2 = s.hi + yh;
    const float s2l = (((s.hi - s2) + yh) + s.lo) + yl;
    // s += x^3 p (double-float + float)
    const float w = (x2 * xh) * p;
    const float s3 = s2 + w;
    const float s3l = ((s2 - s3) + w) + s2l;
    return s3 + s3l;
}

SLUICE_INLINE float logaddexp_k(float a, float b) {
    if (a != a || b != b) return std::numeric_limits<float>::quiet_NaN();
    if (a == b && std::fabs(a) == std::numeric_limits<float>::infinity()) return a;
    const float m = a > b ? a : b;
    return m + log_k(exp_k(a - m) + exp_k(b - m));
}

// Σ exp(x_v - M) in log_softmax's lane order (see the top of the file).
SLUICE_INLINE float lse_sum(const float* x, int64_t n, float M, int L) {
    if (n < L) {
        float s = exp_k(x[0] - M);
        for (int64_t v = 1; v < n; ++v) s += exp_k(x[v] - M);
        return s;
    }
    float acc[kMaxLanes];
    for (int l = 0; l < L; ++l) acc[l] = exp_k(x[l] - M);
    const int64_t full = n / L;
    for (int64_t j = 1; j < full; ++j) {
        const float* r = x + j * L;
        for (int l = 0; l < L; ++l) acc[l] += exp_k(r[l] - M);
    }
    const int64_t t = n - full * L;
    for (int64_t l = 0; l < t; ++l) acc[l] += exp_k(x[full * L + l] - M);
    for (int w = L / 2; w >= 1; w /= 2) {
        float nx[kMaxLanes];
        for (int l = 0; l < L; ++l) nx[l] = acc[l] + acc[l ^ w];
        for (int l = 0; l < L; ++l) acc[l] = nx[l];
    }
    return acc[0];
}

}  // namespace

bool lanes_supported(int lanes) { return lanes == 8 || lanes == 16; }

float exp32(float d) { return exp_k(d); }
float log32(float d) { return log_k(d); }
float logaddexp32(float a, float b) { return logaddexp_k(a, b); }

float sum(const float* x, int64_t n, int lanes) {
    if (n <= 0) return 0.f;
    if (n < lanes) {
        float s;
        cascade<1>(x, n, &s);
        return s;
    }
    return lanes == 16 ? vec_sum<16>(x, n) : vec_sum<8>(x, n);
}

SLUICE_FMA_CLONES
void log_softmax(const float* x, int64_t n, float max, int lanes, float* out) {
    if (n <= 0) return;
    const float lse = log_k(lse_sum(x, n, max, lanes));
    for (int64_t v = 0; v < n; ++v) out[v] = (x[v] - max) - lse;
}

SLUICE_FMA_CLONES
void divergence_terms(const float* a, const float* b, int64_t n, float* kl, float* js1, float* js2) {
    const float ln2f = float(0.69314718055994530942);  // math.log(2) as torch subtracts it from a float tensor
    for (int64_t v = 0; v < n; ++v) {
        const float p = exp_k(a[v]);
        kl[v] = p * (a[v] - b[v]);
        if (js1) {
            const float q = exp_k(b[v]);
            const float lm = logaddexp_k(a[v], b[v]) - ln2f;
            js1[v] = p * (a[v] - lm);
            js2[v] = q * (b[v] - lm);
        }
    }
}

}  // namespace sluice::kld::torchf32
