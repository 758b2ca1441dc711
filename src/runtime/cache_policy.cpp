#include "runtime/cache_policy.h"

#include <algorithm>
#include <cmath>

namespace sluice {

std::unique_ptr<CachePolicy> make_cache_policy(const std::string &name, size_t capacity) {
    if (name == "freq" || name.empty()) return std::make_unique<FreqPolicy>(capacity);
    if (name == "pred") return std::make_unique<PredPolicy>();
    if (name == "lfru") return std::make_unique<LfruPolicy>();
    if (name == "lru") return std::make_unique<LruPolicy>();
    return nullptr;
}

const char *cache_policy_names() { return "freq|pred|lfru|lru"; }

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

// ---- Next-visit probability ----------------------------------------------

PredPolicy::PredPolicy() : half_{8, 16, 32, 64, 128, 0} {
    for (double h : half_) alpha_.push_back(h > 0 ? std::exp2(-1.0 / h) : 1.0);
}

double PredPolicy::decay(int h, uint64_t n) const {
    return half_[(size_t)h] > 0 ? std::pow(alpha_[(size_t)h], (double)n) : 1.0;
}

int PredPolicy::chosen() const {
    // Before any visit has been scored every Brier sum is 0: the last entry
    // (no decay) wins the tie, the plain frequency.
    int b = kH - 1;
    for (int h = 0; h < kH; h++)
        if (brier_[h] < brier_[b]) b = h;
    return b;
}

double PredPolicy::freq(const Rec &r, const Layer &l, int h) const {
    // Over all of the layer's visits, not those since the record's first
    // use: counting from the first use made every newcomer look popular
    // (1 use in 1 visit) and pushed out records that really were.
    if (!r.used || l.visits == 0) return 0.0;
    const double a = alpha_[(size_t)h];
    const double norm = a < 1.0 ? (1.0 - decay(h, l.visits)) / (1.0 - a) : (double)l.visits;
    return std::min(1.0, r.uses[h] * decay(h, l.visits - r.last_visit) / norm);
}

double PredPolicy::persistence(int h) const {
    if (chances_ - fsum_[h] <= 0) return 0.0;
    return std::clamp((reuse_ - fsum_[h]) / (chances_ - fsum_[h]), 0.0, 1.0);
}

void PredPolicy::start_visit(int layer) {
    Layer &l = layers_[layer];
    // Score the predictions made when the visit that just ended began.
    if (!l.predicted.empty())
        for (size_t i = 0; i < l.predicted.size() / kH; i++) {
            const double y = rec_[l.members[i]].last_visit == l.visits ? 1.0 : 0.0;
            for (int h = 0; h < kH; h++) {
                const double d = l.predicted[i * kH + (size_t)h] - y;
                brier_[h] += d * d;
            }
        }
    // That visit's records get their first chance of reuse in this one.
    l.prev.swap(l.cur);
    l.cur.clear();
    l.visits++;
    for (CacheKey k : l.prev) {
        chances_ += 1;
        const Rec &r = rec_[k];
        for (int h = 0; h < kH; h++) fsum_[h] += freq(r, l, h);
    }
    cur_layer_ = layer;
    // Predict this visit for every record the layer has used.
    l.predicted.resize(l.members.size() * kH);
    double per[kH];
    for (int h = 0; h < kH; h++) per[h] = persistence(h);
    for (size_t i = 0; i < l.members.size(); i++) {
        const Rec &r = rec_[l.members[i]];
        const bool last = r.last_visit + 1 == l.visits;
        for (int h = 0; h < kH; h++) {
            const double f = freq(r, l, h);
            l.predicted[i * kH + (size_t)h] = last ? per[h] + (1.0 - per[h]) * f : f;
        }
    }
}

void PredPolicy::access(CacheKey k) {
    const int layer = (int)(k >> 32);
    Rec &r = rec_[k];
    auto lit = layers_.find(layer);
    // A visit ends when another layer runs or this one asks again for a
    // record it already has (a model with one MoE layer).
    if (layer != cur_layer_ || lit == layers_.end() || (r.used && r.last_visit == lit->second.visits))
        start_visit(layer);
    Layer &l = layers_[layer];
    if (r.used && r.last_visit + 1 == l.visits) reuse_ += 1;
    if (!r.used) l.members.push_back(k);
    for (int h = 0; h < kH; h++) r.uses[h] = (r.used ? r.uses[h] * decay(h, l.visits - r.last_visit) : 0.0) + 1.0;
    r.used = true;
    r.last_visit = l.visits;
    l.cur.push_back(k);
}

void PredPolicy::inserted(CacheKey k) {
    Rec &r = rec_[k];
    if (r.resident) return;
    r.resident = true;
    res_pos_[k] = res_.size();
    res_.push_back(k);
}

void PredPolicy::erased(CacheKey k) {
    auto it = rec_.find(k);
    if (it == rec_.end() || !it->second.resident) return;
    it->second.resident = false;
    const size_t i = res_pos_[k];
    res_pos_[res_.back()] = i;
    res_[i] = res_.back();
    res_.pop_back();
    res_pos_.erase(k);
}

double PredPolicy::rank(CacheKey k, int h) const {
    auto it = rec_.find(k);
    if (it == rec_.end() || !it->second.used) return -1.0;  // never used: below everything used
    const Rec &r = it->second;
    auto lit = layers_.find((int)(k >> 32));
    if (lit == layers_.end()) return r.uses[h] > 0 ? 0.0 : -1.0;  // a hotlist seed before its layer ran
    const double f = freq(r, lit->second, h);
    const double per = persistence(h);
    return r.last_visit == lit->second.visits ? per + (1.0 - per) * f : f;
}

bool PredPolicy::victim(const std::function<bool(CacheKey)> &pinned, CacheKey *out) {
    const int h = chosen();
    bool found = false;
    double best = 0;
    uint64_t best_last = 0;
    for (CacheKey k : res_) {
        const double s = rank(k, h);
        const uint64_t last = rec_[k].last_visit;
        // Ties (equal rank) go to the record used longest ago, then the key,
        // so the choice never depends on the order of res_.
        if (found && (s > best || (s == best && (last > best_last || (last == best_last && k > *out))))) continue;
        if (pinned(k)) continue;
        found = true;
        best = s;
        best_last = last;
        *out = k;
    }
    return found;
}

bool PredPolicy::admit(CacheKey k, CacheKey v) {
    const int h = chosen();
    return rank(k, h) >= rank(v, h);
}

void PredPolicy::seed(CacheKey k, uint32_t count) {
    // A hotlist's count stands for that many past uses: the preloaded set
    // ranks by it until its layers have run and real counts take over.
    Rec &r = rec_[k];
    if (r.used || count == 0) return;
    r.used = true;
    for (double &u : r.uses) u = count;
    r.last_visit = 0;
    layers_[(int)(k >> 32)].members.push_back(k);
}

}  // namespace sluice
