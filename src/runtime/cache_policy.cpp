#include "runtime/cache_policy.h"

#include <algorithm>
#include <cmath>

namespace sluice {

std::unique_ptr<CachePolicy> make_cache_policy(const std::string &name, size_t capacity) {
    if (name == "freq" || name.empty()) return std::make_unique<FreqPolicy>(capacity);
    if (name == "lfru") return std::make_unique<LfruPolicy>();
    if (name == "lru") return std::make_unique<LruPolicy>();
    return nullptr;
}

const char *cache_policy_names() { return "freq|lfru|lru"; }

// ---- LRU ----------------------------------------------------------------

void LruPolicy::access(CacheKey k) {
    auto it = pos_.find(k);
    if (it != pos_.end()) order_.splice(order_.begin(), order_, it->second);
}

void LruPolicy::inserted(CacheKey k) {
    if (pos_.count(k)) return;
    order_.push_front(k);
    pos_[k] = order_.begin();
}

void LruPolicy::erased(CacheKey k) {
    auto it = pos_.find(k);
    if (it == pos_.end()) return;
    order_.erase(it->second);
    pos_.erase(it);
}

bool LruPolicy::victim(const std::function<bool(CacheKey)> &pinned, CacheKey *out) {
    for (auto it = order_.rbegin(); it != order_.rend(); ++it)
        if (!pinned(*it)) {
            *out = *it;
            return true;
        }
    return false;
}

// ---- LFRU (the previous rule) -------------------------------------------

void LfruPolicy::access(CacheKey k) {
    clock_++;
    auto it = res_.find(k);
    if (it == res_.end()) return;
    it->second.hits++;
    it->second.last = clock_;
}

void LfruPolicy::inserted(CacheKey k) { res_[k] = E{0, ++clock_}; }

void LfruPolicy::erased(CacheKey k) { res_.erase(k); }

bool LfruPolicy::victim(const std::function<bool(CacheKey)> &pinned, CacheKey *out) {
    const double window = 256.0;
    bool found = false;
    double best = 0;
    uint64_t best_last = 0;
    for (const auto &[k, e] : res_) {
        const double score = (double)(e.hits + 1) / (1.0 + (double)(clock_ - e.last) / window);
        const bool better = !found || score < best || (score == best && e.last < best_last);
        if (better && !pinned(k)) {
            found = true;
            best = score;
            best_last = e.last;
            *out = k;
        }
    }
    return found;
}

// ---- Decayed frequency, adaptive half-life ------------------------------

FreqPolicy::FreqPolicy(size_t capacity) : cap_(capacity) {
    const double c = (double)std::max<size_t>(capacity, 8);
    for (double m : {0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0}) half_.push_back(m * c);
}

int FreqPolicy::chosen() const {
    // Ties (at the start, before any shadow hit) go to 1 x capacity.
    int b = 3;
    for (int i = 0; i < kH; i++)
        if (shadow_[i].hits > shadow_[b].hits) b = i;
    return b;
}

void FreqPolicy::bump(Info &in, double amount) {
    const double now = (double)clock_;
    for (int h = 0; h < kH; h++) {
        const double old = in.key[h] == -HUGE_VAL ? 0.0 : std::exp2(in.key[h] - now / half_[(size_t)h]);
        in.key[h] = std::log2(old + amount) + now / half_[(size_t)h];
    }
}

bool FreqPolicy::shadow_pinned(CacheKey q) const {
    // The layer being run: its records are in use, as in the real cache.
    if ((int)(q >> 32) != cur_layer_) return false;
    auto it = info_.find(q);
    return it != info_.end() && it->second.last >= layer_start_;
}

void FreqPolicy::access(CacheKey k) {
    clock_++;
    const int layer = (int)(k >> 32);
    auto [it, fresh] = info_.try_emplace(k);
    Info &in = it->second;
    // A layer visit ends when another layer runs or this one asks for a
    // record it already asked for (a model with one MoE layer).
    if (layer != cur_layer_ || (!fresh && in.last >= layer_start_)) {
        cur_layer_ = layer;
        layer_start_ = clock_;
    }
    if (fresh)
        for (double &x : in.key) x = -HUGE_VAL;
    if (in.resident)
        for (int h = 0; h < kH; h++) real_[h].erase({in.key[h], k});
    bump(in, 1.0);
    in.last = clock_;
    if (in.resident)
        for (int h = 0; h < kH; h++) real_[h].insert({in.key[h], k});
    // Each shadow cache runs its half-life's rule on keys alone.
    for (int h = 0; h < kH; h++) {
        Shadow &s = shadow_[h];
        if (auto r = s.keys.find(k); r != s.keys.end()) {
            s.hits++;
            s.order.erase({r->second, k});
            r->second = in.key[h];
            s.order.insert({in.key[h], k});
            continue;
        }
        if (cap_ == 0) continue;
        if (s.keys.size() >= cap_) {
            auto v = s.order.begin();
            while (v != s.order.end() && shadow_pinned(v->second)) ++v;
            if (v == s.order.end() || in.key[h] < v->first) continue;  // not admitted
            s.keys.erase(v->second);
            s.order.erase(v);
        }
        s.keys[k] = in.key[h];
        s.order.insert({in.key[h], k});
    }
}

void FreqPolicy::inserted(CacheKey k) {
    auto [it, fresh] = info_.try_emplace(k);
    Info &in = it->second;
    if (fresh) {
        for (double &x : in.key) x = -HUGE_VAL;
        bump(in, 0.0);  // never used: ranks below everything used
    }
    if (in.resident) return;
    in.resident = true;
    for (int h = 0; h < kH; h++) real_[h].insert({in.key[h], k});
}

void FreqPolicy::erased(CacheKey k) {
    auto it = info_.find(k);
    if (it == info_.end() || !it->second.resident) return;
    for (int h = 0; h < kH; h++) real_[h].erase({it->second.key[h], k});
    it->second.resident = false;
}

bool FreqPolicy::victim(const std::function<bool(CacheKey)> &pinned, CacheKey *out) {
    for (const Rank &r : real_[chosen()])
        if (!pinned(r.second)) {
            *out = r.second;
            return true;
        }
    return false;
}

bool FreqPolicy::admit(CacheKey k, CacheKey v) {
    const int h = chosen();
    auto a = info_.find(k), b = info_.find(v);
    if (a == info_.end()) return false;
    if (b == info_.end()) return true;
    return a->second.key[h] >= b->second.key[h];
}

void FreqPolicy::seed(CacheKey k, uint32_t count) {
    auto [it, fresh] = info_.try_emplace(k);
    Info &in = it->second;
    if (fresh)
        for (double &x : in.key) x = -HUGE_VAL;
    if (in.resident)
        for (int h = 0; h < kH; h++) real_[h].erase({in.key[h], k});
    bump(in, (double)count);
    if (in.resident)
        for (int h = 0; h < kH; h++) real_[h].insert({in.key[h], k});
}

}  // namespace sluice
