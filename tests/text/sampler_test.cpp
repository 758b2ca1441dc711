// Sampling: the fixed generator, each filter on hand-made distributions,
// the repetition penalty (llama.cpp semantics) and the C API.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "sample/sample.h"
#include "sluice/sluice.h"

using namespace sluice::sample;

namespace {

std::vector<Candidate> sorted(const std::vector<float> &logits) {
    std::vector<Candidate> c;
    for (size_t i = 0; i < logits.size(); i++) c.push_back({(int32_t)i, logits[i]});
    sort_candidates(c);
    return c;
}

std::vector<int32_t> ids(const std::vector<Candidate> &c) {
    std::vector<int32_t> v;
    for (auto &x : c) v.push_back(x.id);
    return v;
}

// Logits of probabilities 0.5, 0.3, 0.15, 0.05, shuffled over ids.
const std::vector<float> kDist = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};

sluice_sampling params(float temp, int top_k = 0, float top_p = 1, float min_p = 0, uint64_t seed = 1) {
    sluice_sampling p;
    sluice_sampling_default(&p);
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = seed;
    return p;
}

std::vector<int32_t> draws(const sluice_sampling &p, const std::vector<float> &logits, int n) {
    sluice_sampler *s = sluice_sampler_new(&p);
    EXPECT_NE(s, nullptr);
    std::vector<int32_t> out;
    for (int i = 0; i < n; i++) out.push_back(sluice_sampler_sample(s, logits.data(), (int32_t)logits.size(), nullptr, 0));
    sluice_sampler_free(s);
    return out;
}

TEST(Rng, FixedAlgorithm) {
    // xoshiro256** seeded by splitmix64, values from an independent
    // implementation: the same stream on every machine.
    Rng a(0);
    EXPECT_EQ(a.next(), 0x99ec5f36cb75f2b4ull);
    EXPECT_EQ(a.next(), 0xbf6e1f784956452aull);
    EXPECT_EQ(a.next(), 0x1a5f849d4933e6e0ull);
    Rng b(42);
    EXPECT_EQ(b.next(), 0x15780b2e0c2ec716ull);
    EXPECT_EQ(b.next(), 0x6104d9866d113a7eull);
    EXPECT_EQ(b.next(), 0xae17533239e499a1ull);
    Rng c(7);
    for (int i = 0; i < 1000; i++) {
        double u = c.uniform();
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
    }
}

TEST(Filters, SortIsDeterministicOnTies) {
    auto c = sorted({1.0f, 3.0f, 3.0f, 2.0f, 1.0f});
    EXPECT_EQ(ids(c), (std::vector<int32_t>{1, 2, 3, 0, 4}));
}

TEST(Filters, TopK) {
    auto c = sorted(kDist);
    top_k(c, 2);
    EXPECT_EQ(ids(c), (std::vector<int32_t>{1, 3}));
    c = sorted(kDist);
    top_k(c, 0);  // off
    EXPECT_EQ(c.size(), 4u);
    top_k(c, 10);
    EXPECT_EQ(c.size(), 4u);
}

TEST(Filters, TopP) {
    auto c = sorted(kDist);
    top_p(c, 0.45f);  // 0.5 alone reaches it
    EXPECT_EQ(ids(c), (std::vector<int32_t>{1}));
    c = sorted(kDist);
    top_p(c, 0.75f);  // 0.5 + 0.3
    EXPECT_EQ(ids(c), (std::vector<int32_t>{1, 3}));
    c = sorted(kDist);
    top_p(c, 0.9f);  // + 0.15
    EXPECT_EQ(ids(c), (std::vector<int32_t>{1, 3, 0}));
    c = sorted(kDist);
    top_p(c, 1.0f);  // off
    EXPECT_EQ(c.size(), 4u);
}

TEST(Filters, MinP) {
    auto c = sorted(kDist);
    min_p(c, 0.25f);  // keep p >= 0.125
    EXPECT_EQ(ids(c), (std::vector<int32_t>{1, 3, 0}));
    c = sorted(kDist);
    min_p(c, 0.5f);  // keep p >= 0.25
    EXPECT_EQ(ids(c), (std::vector<int32_t>{1, 3}));
    c = sorted(kDist);
    min_p(c, 0.99f);
    EXPECT_EQ(ids(c), (std::vector<int32_t>{1}));
    c = sorted(kDist);
    min_p(c, 0.0f);  // off
    EXPECT_EQ(c.size(), 4u);
}

TEST(Filters, Probabilities) {
    auto c = sorted(kDist);
    auto p = probabilities(c, 1.0f);
    EXPECT_NEAR(p[0], 0.5, 1e-6);
    EXPECT_NEAR(p[1], 0.3, 1e-6);
    EXPECT_NEAR(p[2], 0.15, 1e-6);
    EXPECT_NEAR(p[3], 0.05, 1e-6);
    auto hot = probabilities(c, 2.0f), cold = probabilities(c, 0.5f);
    EXPECT_LT(hot[0], p[0]);
    EXPECT_GT(cold[0], p[0]);
    EXPECT_NEAR(cold[0], 0.25 / (0.25 + 0.09 + 0.0225 + 0.0025), 1e-6);  // p^2 renormalised
}

TEST(RepeatPenalty, LlamaCppSemantics) {
    std::vector<float> l = {2.0f, -2.0f, 1.0f, 0.0f};
    const std::vector<int32_t> hist = {0, 1, 0, 3, 99, -1};  // repeats count once; bad ids ignored
    apply_repeat_penalty(l, hist, 2.0f, -1);
    EXPECT_EQ(l, (std::vector<float>{1.0f, -4.0f, 1.0f, 0.0f}));
    l = {2.0f, -2.0f, 1.0f, 0.0f};
    apply_repeat_penalty(l, std::vector<int32_t>{1, 0}, 2.0f, 1);  // only the last token
    EXPECT_EQ(l, (std::vector<float>{1.0f, -2.0f, 1.0f, 0.0f}));
    l = {2.0f, -2.0f, 1.0f, 0.0f};
    apply_repeat_penalty(l, std::vector<int32_t>{1, 0}, 2.0f, 0);  // off
    EXPECT_EQ(l, (std::vector<float>{2.0f, -2.0f, 1.0f, 0.0f}));
}

TEST(RepeatPenalty, ChangesTheGreedyChoice) {
    sluice_sampling p = params(0.0f);
    p.repeat_penalty = 1.5f;
    p.repeat_last_n = 4;
    sluice_sampler *s = sluice_sampler_new(&p);
    const std::vector<float> l = {1.0f, 1.4f, 0.2f};
    const int32_t h1[] = {1};
    EXPECT_EQ(sluice_sampler_sample(s, l.data(), 3, nullptr, 0), 1);
    EXPECT_EQ(sluice_sampler_sample(s, l.data(), 3, h1, 1), 0);  // 1.4 / 1.5 < 1.0
    const int32_t h2[] = {1, 2, 2, 2, 0};                         // 1 is out of the last 4
    EXPECT_EQ(sluice_sampler_sample(s, l.data(), 3, h2, 5), 1);
    sluice_sampler_free(s);
}

TEST(Sampler, SameSeedSameSequence) {
    std::vector<float> l(200);
    Rng r(3);
    for (float &x : l) x = (float)(r.uniform() * 8.0 - 4.0);
    auto p = params(1.0f, 50, 0.95f, 0.02f, 1234);
    auto a = draws(p, l, 300), b = draws(p, l, 300);
    EXPECT_EQ(a, b);
    p.seed = 1235;
    EXPECT_NE(draws(p, l, 300), a);
    // Not stuck on one token.
    std::map<int32_t, int> seen;
    for (int32_t t : a) seen[t]++;
    EXPECT_GT(seen.size(), 5u);
}

TEST(Sampler, GreedyIsArgmax) {
    std::vector<float> l = {0.1f, 3.0f, -1.0f, 3.0f, 2.9f};
    for (uint64_t seed : {1ull, 2ull, 99ull})
        for (int32_t t : draws(params(0.0f, 0, 1, 0, seed), l, 20)) EXPECT_EQ(t, 1);  // first maximum
    for (int32_t t : draws(params(1.5f, 1, 1, 0, 5), l, 50)) EXPECT_EQ(t, 1);        // top-k 1
    for (int32_t t : draws(params(1.0f, 0, 1e-6f, 0, 5), l, 50)) EXPECT_EQ(t, 1);    // tiny top-p
}

TEST(Sampler, FrequenciesFollowTheFilteredDistribution) {
    const int N = 20000;
    std::map<int32_t, int> f;
    for (int32_t t : draws(params(1.0f, 0, 1.0f, 0.0f, 11), kDist, N)) f[t]++;
    EXPECT_NEAR(f[1] / (double)N, 0.5, 0.02);
    EXPECT_NEAR(f[3] / (double)N, 0.3, 0.02);
    EXPECT_NEAR(f[0] / (double)N, 0.15, 0.02);
    EXPECT_NEAR(f[2] / (double)N, 0.05, 0.01);

    f.clear();  // top-p 0.75 leaves {0.5, 0.3}, renormalised
    for (int32_t t : draws(params(1.0f, 0, 0.75f, 0.0f, 12), kDist, N)) f[t]++;
    EXPECT_EQ(f.count(0) + f.count(2), 0u);
    EXPECT_NEAR(f[1] / (double)N, 0.625, 0.02);

    f.clear();  // min-p 0.25 drops 0.05
    for (int32_t t : draws(params(1.0f, 0, 1.0f, 0.25f, 13), kDist, N)) f[t]++;
    EXPECT_EQ(f.count(2), 0u);
    EXPECT_NEAR(f[0] / (double)N, 0.15 / 0.95, 0.02);
}

TEST(Sampler, InvalidParams) {
    sluice_sampling p = params(1.0f);
    EXPECT_EQ(sluice_sampler_new(nullptr), nullptr);
    p.temperature = -1;
    EXPECT_EQ(sluice_sampler_new(&p), nullptr);
    p = params(1.0f);
    p.top_p = 0;
    EXPECT_EQ(sluice_sampler_new(&p), nullptr);
    p = params(1.0f);
    p.min_p = 1.5f;
    EXPECT_EQ(sluice_sampler_new(&p), nullptr);
    p = params(1.0f);
    p.repeat_penalty = 0;
    EXPECT_EQ(sluice_sampler_new(&p), nullptr);
    p = params(1.0f);
    p.struct_size = 0;
    EXPECT_EQ(sluice_sampler_new(&p), nullptr);
    p = params(1.0f);
    sluice_sampler *s = sluice_sampler_new(&p);
    float l[2] = {0, 1};
    EXPECT_EQ(sluice_sampler_sample(s, nullptr, 2, nullptr, 0), -1);
    EXPECT_EQ(sluice_sampler_sample(s, l, 0, nullptr, 0), -1);
    EXPECT_EQ(sluice_sampler_sample(s, l, 2, nullptr, 3), -1);
    EXPECT_EQ(sluice_sampler_sample(nullptr, l, 2, nullptr, 0), -1);
    sluice_sampler_free(s);
}

TEST(Sampler, DefaultsAreLlamaCpps) {
    sluice_sampling p;
    sluice_sampling_default(&p);
    EXPECT_EQ(p.struct_size, sizeof(sluice_sampling));
    EXPECT_FLOAT_EQ(p.temperature, 0.8f);
    EXPECT_EQ(p.top_k, 40);
    EXPECT_FLOAT_EQ(p.top_p, 0.95f);
    EXPECT_FLOAT_EQ(p.min_p, 0.05f);
    EXPECT_FLOAT_EQ(p.repeat_penalty, 1.0f);
    EXPECT_EQ(p.repeat_last_n, 64);
}

}  // namespace
