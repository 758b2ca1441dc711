#include "sample/sample.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace sluice::sample {

uint64_t splitmix64(uint64_t &state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void Rng::seed_with(uint64_t seed) {
    uint64_t st = seed;
    for (uint64_t &s : s_) s = splitmix64(st);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t Rng::next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

const char *check_params(const Params &p) {
    if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) return "temperature must be a number >= 0";
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return "top_p must be in (0, 1]";
    if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return "min_p must be in [0, 1]";
    if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty)) return "repeat_penalty must be > 0";
    if (p.repeat_last_n < -1) return "repeat_last_n must be >= -1";
    return "";
}

void apply_repeat_penalty(std::span<float> logits, std::span<const int32_t> history, float penalty, int32_t last_n) {
    if (penalty == 1.0f || last_n == 0 || history.empty()) return;
    size_t n = last_n < 0 ? history.size() : std::min(history.size(), (size_t)last_n);
    std::unordered_set<int32_t> seen;
    for (size_t i = history.size() - n; i < history.size(); i++) {
        int32_t id = history[i];
        if (id < 0 || (size_t)id >= logits.size() || !seen.insert(id).second) continue;
        float &l = logits[(size_t)id];
        l = l > 0.0f ? l / penalty : l * penalty;
    }
}

void sort_candidates(std::vector<Candidate> &c) {
    std::sort(c.begin(), c.end(), [](const Candidate &a, const Candidate &b) {
        return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
    });
}

void top_k(std::vector<Candidate> &c, int32_t k) {
    if (k > 0 && (size_t)k < c.size()) c.resize((size_t)k);
}

std::vector<double> probabilities(const std::vector<Candidate> &c, float temperature) {
    std::vector<double> p(c.size());
    if (c.empty()) return p;
    const double t = temperature > 0.0f ? (double)temperature : 1.0;
    double mx = c[0].logit;
    for (const Candidate &x : c) mx = std::max(mx, (double)x.logit);
    if (!std::isfinite(mx)) {  // all -inf (or +inf): uniform over the maxima
        size_t n = 0;
        for (const Candidate &x : c) n += (double)x.logit == mx;
        for (size_t i = 0; i < c.size(); i++) p[i] = (double)c[i].logit == mx ? 1.0 / (double)n : 0.0;
        return p;
    }
    double sum = 0.0;
    for (size_t i = 0; i < c.size(); i++) {
        p[i] = std::exp(((double)c[i].logit - mx) / t);
        sum += p[i];
    }
    for (double &v : p) v /= sum;
    return p;
}

void top_p(std::vector<Candidate> &c, float p) {
    if (p >= 1.0f || c.size() <= 1) return;
    std::vector<double> pr = probabilities(c, 1.0f);
    double cum = 0.0;
    for (size_t i = 0; i < c.size(); i++) {
        cum += pr[i];
        if (cum >= (double)p) {
            c.resize(i + 1);
            return;
        }
    }
}

void min_p(std::vector<Candidate> &c, float p) {
    if (p <= 0.0f || c.size() <= 1) return;
    // prob_i >= p * prob_max  <=>  logit_i >= logit_max + log(p).
    const double cut = (double)c[0].logit + std::log((double)p);
    size_t keep = 1;
    while (keep < c.size() && (double)c[keep].logit >= cut) keep++;
    c.resize(keep);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
    if (logits.empty()) return -1;
    work_.assign(logits.begin(), logits.end());
    if (!constraint_) return draw(history);
    constraint_->allowed(&allowed_);
    allowed_.resize(work_.size(), 0);
    int32_t first = -1;
    for (size_t i = 0; i < work_.size(); i++) {
        if (!allowed_[i]) work_[i] = NAN;  // NaN: never a candidate, never the greedy pick
        else if (first < 0) first = (int32_t)i;
    }
    if (first < 0) return -1;
    int32_t id = draw(history);
    // A model that rules out every allowed token (all -inf or NaN logits)
    // still gets a legal one.
    if (id < 0 || !allowed_[(size_t)id]) id = first;
    constraint_->accept(id);
    return id;
}

int32_t Sampler::draw(std::span<const int32_t> history) {
    apply_repeat_penalty(work_, history, p_.repeat_penalty, p_.repeat_last_n);
    if (p_.temperature <= 0.0f) {
        // Greedy: first maximum. NaN never wins.
        int32_t best = 0;
        for (size_t i = 1; i < work_.size(); i++)
            if (work_[i] > work_[(size_t)best] || std::isnan(work_[(size_t)best])) best = (int32_t)i;
        return best;
    }
    cand_.clear();
    cand_.reserve(work_.size());
    for (size_t i = 0; i < work_.size(); i++)
        if (!std::isnan(work_[i])) cand_.push_back({(int32_t)i, work_[i]});
    if (cand_.empty()) return 0;
    sort_candidates(cand_);
    top_k(cand_, p_.top_k);
    top_p(cand_, p_.top_p);
    min_p(cand_, p_.min_p);
    std::vector<double> pr = probabilities(cand_, p_.temperature);
    const double u = rng_.uniform();
    double cum = 0.0;
    for (size_t i = 0; i < cand_.size(); i++) {
        cum += pr[i];
        if (u < cum) return cand_[i].id;
    }
    return cand_.back().id;  // rounding left u above the last sum
}

}  // namespace sluice::sample
