// numpy-exact statistics (KLD.md §4.3-§4.5): pairwise summation, mean,
// median, type-7 quantiles with numpy's two-sided lerp, ddof=1 std, and the
// default_rng(seed).integers() stream (SeedSequence + PCG64 + Lemire), so the
// festr2-v0 compat mode reproduces festr2's bootstrap intervals bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::kld {

// np.sum of a contiguous 1-D array: pairwise within 8192-element blocks,
// blocks added in order (float64; float32 with a float accumulator).
double np_pairwise_sum(const double* a, size_t n);
float np_pairwise_sum_f32(const float* a, size_t n);
double np_mean(const std::vector<double>& v);
double np_median(std::vector<double> v);
// Type-7 quantile of an ascending vector, evaluated as numpy 1.24 does.
double np_quantile_sorted(const std::vector<double>& sorted, double q);
double np_std_ddof1(const std::vector<double>& v);

class NumpyPcg64 {
public:
    explicit NumpyPcg64(uint64_t seed);  // == numpy.random.default_rng(seed)
    uint64_t next64();
    uint32_t next32();
    // One draw of Generator.integers(0, n) (n <= 2^32 - 1) via Lemire.
    uint64_t bounded(uint64_t n);
private:
    unsigned __int128 state_, inc_;
    bool has32_ = false;
    uint32_t buf32_ = 0;
};

struct Bootstrap {
    double estimate = 0, standard_error = 0, ci95_low = 0, ci95_high = 0;
    int samples = 0;
    std::string unit = "window";
};

// festr2 §4.5: B x n index matrix from a fresh default_rng(seed), replicate
// = np.mean over the drawn window means, percentile CI, ddof=1 SE.
Bootstrap bootstrap_window_means(const std::vector<double>& window_means, int B, uint64_t seed);
// sluice's ratio form for unequal windows: replicate = Σ sums / Σ counts of
// the drawn windows; estimate = Σ sums / Σ counts. Same index stream.
Bootstrap bootstrap_ratio(const std::vector<double>& sums, const std::vector<double>& counts, int B, uint64_t seed);
// Paired form: one index vector per replicate shared by both sides (§7.6).
// Returns also P(Δ_b < 0) through p_below_zero.
Bootstrap bootstrap_ratio_diff(const std::vector<double>& sums_a, const std::vector<double>& sums_b,
                               const std::vector<double>& counts, int B, uint64_t seed, double* p_below_zero);

// Summary statistics in numpy's exact arithmetic.
struct Summary {
    double mean = 0, median = 0, p90 = 0, p95 = 0, p99 = 0, p99_9 = 0, max = 0, min = 0;
};
Summary summarize(const std::vector<double>& v);

}  // namespace sluice::kld
