// sluice_ppl_summary: the window-clustered interval against values worked
// out by hand, and its argument checks.
#include <gtest/gtest.h>

#include <cmath>

#include "sluice/sluice.h"

TEST(PplSummary, ClusteredIntervalByHand) {
    // Three windows of 2 tokens with NLL sums 2, 4, 6: mean 2 nats/token.
    // Residuals 2-4, 4-4, 6-4 = -2, 0, 2; variance 3/2 * 8 / 6^2 = 1/3.
    const double nll[] = {2.0, 4.0, 6.0};
    const uint64_t cnt[] = {2, 2, 2};
    sluice_ppl_stats s;
    ASSERT_EQ(sluice_ppl_summary(nll, cnt, 3, &s), SLUICE_OK);
    const double se = std::sqrt(1.0 / 3.0);
    std::printf("nll %.6f se %.6f ppl %.6f [%.6f, %.6f]\n", s.nll_mean, s.nll_se, s.ppl, s.ppl_lo, s.ppl_hi);
    EXPECT_DOUBLE_EQ(s.nll_mean, 2.0);
    EXPECT_NEAR(s.nll_se, se, 1e-15);
    EXPECT_NEAR(s.ppl, std::exp(2.0), 1e-12);
    EXPECT_NEAR(s.ppl_lo, std::exp(2.0 - 1.96 * se), 1e-12);
    EXPECT_NEAR(s.ppl_hi, std::exp(2.0 + 1.96 * se), 1e-12);
    EXPECT_EQ(s.n_tokens, 6u);
    EXPECT_EQ(s.n_windows, 3u);
}

TEST(PplSummary, UnequalWindowsWeightByTokens) {
    // Ratio estimator: (1 + 9) / (1 + 3) = 2.5, not the mean of 1 and 3.
    const double nll[] = {1.0, 9.0};
    const uint64_t cnt[] = {1, 3};
    sluice_ppl_stats s;
    ASSERT_EQ(sluice_ppl_summary(nll, cnt, 2, &s), SLUICE_OK);
    EXPECT_DOUBLE_EQ(s.nll_mean, 2.5);
    // residuals 1-2.5 = -1.5, 9-7.5 = 1.5: variance 2 * 4.5 / 16
    EXPECT_NEAR(s.nll_se, std::sqrt(2.0 * 4.5) / 4.0, 1e-15);
}

TEST(PplSummary, OneWindowHasNoInterval) {
    const double nll[] = {3.0};
    const uint64_t cnt[] = {3};
    sluice_ppl_stats s;
    ASSERT_EQ(sluice_ppl_summary(nll, cnt, 1, &s), SLUICE_OK);
    EXPECT_DOUBLE_EQ(s.nll_mean, 1.0);
    EXPECT_TRUE(std::isnan(s.nll_se));
}

TEST(PplSummary, BadArguments) {
    sluice_ppl_stats s;
    const double nll[] = {1.0};
    const uint64_t zero[] = {0};
    EXPECT_EQ(sluice_ppl_summary(nll, zero, 1, &s), SLUICE_E_ARG);
    EXPECT_EQ(sluice_ppl_summary(nullptr, nullptr, 0, &s), SLUICE_E_ARG);
    EXPECT_EQ(sluice_ppl_summary(nll, zero, 1, nullptr), SLUICE_E_ARG);
    EXPECT_EQ(sluice_score(nullptr, nullptr, 0, 0, nullptr), SLUICE_E_ARG);
}
