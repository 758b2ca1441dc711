#include "kld/stats/npstats.h"

#include <algorithm>
#include <cmath>

namespace sluice::kld {

namespace {

template <typename T>
T pairwise(const T* a, size_t n) {
    // numpy/core/src/umath/loops_utils.h.src pairwise_sum, PW_BLOCKSIZE 128.
    if (n < 8) {
        T res = 0.;
        for (size_t i = 0; i < n; ++i) res += a[i];
        return res;
    }
    if (n <= 128) {
        T r[8];
        for (int j = 0; j < 8; ++j) r[j] = a[j];
        size_t i;
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; ++j) r[j] += a[i + j];
        T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; ++i) res += a[i];
        return res;
    }
    size_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise(a, n2) + pairwise(a + n2, n - n2);
}

}  // namespace

// np.sum over a contiguous 1-D array: the reduction's inner loop sees at most
// one buffer (8192 elements) at a time, so numpy sums 8192-element blocks
// pairwise and adds the block sums in order (checked against numpy 1.24).
template <typename T>
T blocked(const T* a, size_t n) {
    T res = 0.;
    for (size_t i = 0; i < n; i += 8192) res += pairwise(a + i, std::min<size_t>(8192, n - i));
    return res;
}

double np_pairwise_sum(const double* a, size_t n) { return blocked(a, n); }
float np_pairwise_sum_f32(const float* a, size_t n) { return blocked(a, n); }

double np_mean(const std::vector<double>& v) {
    if (v.empty()) return std::nan("");
    return blocked(v.data(), v.size()) / double(v.size());
}

double np_median(std::vector<double> v) {
    if (v.empty()) return std::nan("");
    std::sort(v.begin(), v.end());
    size_t n = v.size(), h = n / 2;
    if (n % 2) return v[h];
    double s = 0.;  // np.mean of the two middle values: 0 + lo + hi, then / 2
    s += v[h - 1];
    s += v[h];
    return s / 2.0;
}

double np_quantile_sorted(const std::vector<double>& v, double q) {
    const size_t n = v.size();
    if (n == 0) return std::nan("");
    double h = double(n - 1) * q;  // 'linear': (n-1)*q
    double fl = std::floor(h);
    size_t i, j;
    if (h >= double(n - 1)) {
        i = j = n - 1;
    } else if (h < 0) {
        i = j = 0;
    } else {
        i = size_t(fl);
        j = i + 1;
    }
    double g = h - fl;
    double a = v[i], b = v[j];
    double d = b - a;
    double r = a + d * g;
    if (g >= 0.5) r = b - d * (1 - g);
    return r;
}

double np_std_ddof1(const std::vector<double>& v) {
    const size_t n = v.size();
    if (n < 2) return std::nan("");
    double mean = blocked(v.data(), n) / double(n);
    std::vector<double> x(n);
    for (size_t i = 0; i < n; ++i) {
        double d = v[i] - mean;
        x[i] = d * d;
    }
    return std::sqrt(blocked(x.data(), n) / double(n - 1));
}

// ---- SeedSequence + PCG64 -------------------------------------------------
NumpyPcg64::NumpyPcg64(uint64_t seed) {
    // SeedSequence(seed): entropy as uint32 words, pool of 4.
    std::vector<uint32_t> entropy;
    do {
        entropy.push_back(uint32_t(seed));
        seed >>= 32;
    } while (seed);
    uint32_t hc = 0x43b0d7e5u;
    auto hashmix = [&hc](uint32_t v) {
        v ^= hc;
        hc *= 0x931e8875u;
        v *= hc;
        v ^= v >> 16;
        return v;
    };
    auto mix = [](uint32_t x, uint32_t y) {
        uint32_t r = 0xca01f9ddu * x - 0x4973f715u * y;
        r ^= r >> 16;
        return r;
    };
    uint32_t pool[4];
    for (size_t i = 0; i < 4; ++i) pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0u);
    for (int s = 0; s < 4; ++s)
        for (int d = 0; d < 4; ++d)
            if (s != d) pool[d] = mix(pool[d], hashmix(pool[s]));
    for (size_t s = 4; s < entropy.size(); ++s)
        for (int d = 0; d < 4; ++d) pool[d] = mix(pool[d], hashmix(entropy[s]));
    uint32_t h = 0x8b51f9ddu, w[8];
    for (int k = 0; k < 8; ++k) {
        uint32_t v = pool[k % 4];
        v ^= h;
        h *= 0x58f38dedu;
        v *= h;
        v ^= v >> 16;
        w[k] = v;
    }
    uint64_t u[4];
    for (int j = 0; j < 4; ++j) u[j] = uint64_t(w[2 * j]) | uint64_t(w[2 * j + 1]) << 32;
    using u128 = unsigned __int128;
    const u128 s = u128(u[0]) << 64 | u[1], iseed = u128(u[2]) << 64 | u[3];
    const u128 mult = u128(0x2360ED051FC65DA4ull) << 64 | 0x4385DF649FCCF645ull;
    inc_ = iseed << 1 | 1;
    state_ = 0;
    state_ = state_ * mult + inc_;
    state_ += s;
    state_ = state_ * mult + inc_;
}

uint64_t NumpyPcg64::next64() {
    using u128 = unsigned __int128;
    const u128 mult = u128(0x2360ED051FC65DA4ull) << 64 | 0x4385DF649FCCF645ull;
    state_ = state_ * mult + inc_;
    uint64_t x = uint64_t(state_ >> 64) ^ uint64_t(state_);
    unsigned rot = unsigned(state_ >> 122);
    return (x >> rot) | (x << ((64 - rot) & 63));
}

uint32_t NumpyPcg64::next32() {
    if (has32_) {
        has32_ = false;
        return buf32_;
    }
    uint64_t v = next64();
    has32_ = true;
    buf32_ = uint32_t(v >> 32);
    return uint32_t(v);
}

uint64_t NumpyPcg64::bounded(uint64_t n) {
    const uint64_t rng = n - 1;
    if (rng == 0) return 0;
    if (rng == 0xFFFFFFFFull) return next32();
    const uint64_t excl = rng + 1;
    uint64_t m = uint64_t(next32()) * excl;
    uint32_t left = uint32_t(m);
    if (left < excl) {
        const uint32_t t = uint32_t((0xFFFFFFFFull - rng) % excl);
        while (left < t) {
            m = uint64_t(next32()) * excl;
            left = uint32_t(m);
        }
    }
    return m >> 32;
}

namespace {

Bootstrap finish(std::vector<double>& reps, double estimate, int B) {
    Bootstrap b;
    b.samples = B;
    b.estimate = estimate;
    b.standard_error = np_std_ddof1(reps);
    std::sort(reps.begin(), reps.end());
    b.ci95_low = np_quantile_sorted(reps, 0.025);
    b.ci95_high = np_quantile_sorted(reps, 0.975);
    return b;
}

}  // namespace

Bootstrap bootstrap_window_means(const std::vector<double>& w, int B, uint64_t seed) {
    NumpyPcg64 rng(seed);
    const size_t n = w.size();
    std::vector<double> reps(static_cast<size_t>(B)), row(n);
    for (int b = 0; b < B; ++b) {  // the matrix is filled row by row
        for (size_t j = 0; j < n; ++j) row[j] = w[rng.bounded(n)];
        reps[size_t(b)] = np_pairwise_sum(row.data(), n) / double(n);
    }
    return finish(reps, np_mean(w), B);
}

Bootstrap bootstrap_ratio(const std::vector<double>& sums, const std::vector<double>& counts, int B, uint64_t seed) {
    NumpyPcg64 rng(seed);
    const size_t n = sums.size();
    std::vector<double> reps(static_cast<size_t>(B));
    for (int b = 0; b < B; ++b) {
        double s = 0, c = 0;
        for (size_t j = 0; j < n; ++j) {
            size_t k = rng.bounded(n);
            s += sums[k];
            c += counts[k];
        }
        reps[size_t(b)] = s / c;
    }
    double S = 0, C = 0;
    for (size_t j = 0; j < n; ++j) {
        S += sums[j];
        C += counts[j];
    }
    return finish(reps, S / C, B);
}

Bootstrap bootstrap_ratio_diff(const std::vector<double>& sa, const std::vector<double>& sb,
                               const std::vector<double>& counts, int B, uint64_t seed, double* p_below) {
    NumpyPcg64 rng(seed);
    const size_t n = sa.size();
    std::vector<double> reps(static_cast<size_t>(B));
    size_t below = 0;
    for (int b = 0; b < B; ++b) {
        double s = 0, c = 0;
        for (size_t j = 0; j < n; ++j) {
            size_t k = rng.bounded(n);
            s += sa[k] - sb[k];
            c += counts[k];
        }
        reps[size_t(b)] = s / c;
        below += reps[size_t(b)] < 0;
    }
    double S = 0, C = 0;
    for (size_t j = 0; j < n; ++j) {
        S += sa[j] - sb[j];
        C += counts[j];
    }
    if (p_below) *p_below = double(below) / double(B);
    return finish(reps, S / C, B);
}

Summary summarize(const std::vector<double>& v) {
    Summary s;
    if (v.empty()) return s;
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    s.mean = np_mean(v);
    s.median = np_median(sorted);
    s.p90 = np_quantile_sorted(sorted, 0.90);
    s.p95 = np_quantile_sorted(sorted, 0.95);
    s.p99 = np_quantile_sorted(sorted, 0.99);
    s.p99_9 = np_quantile_sorted(sorted, 0.999);
    s.max = sorted.back();
    s.min = sorted.front();
    return s;
}

}  // namespace sluice::kld
