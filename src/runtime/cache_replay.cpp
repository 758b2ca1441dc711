#include "runtime/cache_replay.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace sluice {
namespace {

bool in_group(const std::vector<int> &g, int e) { return std::find(g.begin(), g.end(), e) != g.end(); }

void note_miss(const RouteTrace &tr, size_t t, size_t m, int e, ReplayCounts *c) {
    if (t >= 1 && in_group(tr.tokens[t - 1][m], e)) c->misses_seen_last_token++;
    for (size_t b = 1; b <= 4 && b <= t; b++)
        if (in_group(tr.tokens[t - b][m], e)) {
            c->misses_seen_recently++;
            break;
        }
}

}  // namespace

ReplayCounts replay_policy(const RouteTrace &tr, CachePolicy &policy, size_t capacity) {
    ReplayCounts c;
    std::unordered_set<CacheKey> resident;
    for (size_t t = 0; t < tr.tokens.size(); t++) {
        for (size_t m = 0; m < tr.tokens[t].size(); m++) {
            const std::vector<int> &g = tr.tokens[t][m];
            auto pinned = [&](CacheKey k) { return (int)(k >> 32) == (int)m && in_group(g, (int)(uint32_t)k); };
            for (int e : g) {
                const CacheKey k = cache_key((int)m, e);
                c.accesses++;
                policy.access(k);
                if (resident.count(k)) {
                    c.hits++;
                    continue;
                }
                note_miss(tr, t, m, e, &c);
                if (capacity == 0) continue;
                if (resident.size() >= capacity) {
                    CacheKey v;
                    if (!policy.victim(pinned, &v) || !policy.admit(k, v)) continue;
                    policy.erased(v);
                    resident.erase(v);
                }
                policy.inserted(k);
                resident.insert(k);
            }
        }
    }
    return c;
}

ReplayCounts replay_belady(const RouteTrace &tr, size_t capacity) {
    // Next use of every access, counted in layer groups (a group's records
    // are used together, so two next uses in one group are one time), and
    // the use after it to break such ties.
    struct Acc {
        CacheKey k;
        uint32_t t, m;
        uint64_t g;
    };
    std::vector<Acc> seq;
    uint64_t groups = 0;
    for (size_t t = 0; t < tr.tokens.size(); t++)
        for (size_t m = 0; m < tr.tokens[t].size(); m++, groups++)
            for (int e : tr.tokens[t][m]) seq.push_back({cache_key((int)m, e), (uint32_t)t, (uint32_t)m, groups});
    const uint64_t never = UINT64_MAX;
    using When = std::pair<uint64_t, uint64_t>;  // (next group, the one after)
    std::vector<When> next(seq.size(), {never, never});
    std::unordered_map<CacheKey, size_t> seen;
    for (size_t i = seq.size(); i-- > 0;) {
        auto it = seen.find(seq[i].k);
        if (it != seen.end()) next[i] = {seq[it->second].g, next[it->second].first};
        seen[seq[i].k] = i;
    }
    // MIN decided per layer group. A group's hits are fixed by what is
    // resident when it starts; while it runs its resident records are
    // pinned, so afterwards the cache holds them plus, in the other slots,
    // whichever of (the other residents, the group's missed records) come
    // back soonest. Records that never come back are not kept. Deciding
    // per access instead (classic MIN) is not optimal under pinning: a
    // group's first miss can take the slot its second miss needed.
    ReplayCounts c;
    std::unordered_map<CacheKey, When> res;  // key -> its next uses
    std::vector<std::pair<When, CacheKey>> cand;
    size_t i = 0;
    while (i < seq.size()) {
        size_t j = i;
        while (j < seq.size() && seq[j].t == seq[i].t && seq[j].m == seq[i].m) j++;
        size_t pinned = 0;
        std::unordered_map<CacheKey, When> keep;
        cand.clear();
        for (size_t q = i; q < j; q++) {
            c.accesses++;
            if (res.count(seq[q].k)) {
                c.hits++;
                keep[seq[q].k] = next[q];
                pinned++;
            } else {
                note_miss(tr, seq[q].t, seq[q].m, (int)(uint32_t)seq[q].k, &c);
                cand.push_back({next[q], seq[q].k});
            }
        }
        for (const auto &[k, nu] : res)
            if (!keep.count(k)) cand.push_back({nu, k});
        std::sort(cand.begin(), cand.end());
        for (const auto &[nu, k] : cand) {
            if (keep.size() >= std::max(capacity, pinned) || nu.first == never) break;
            keep[k] = nu;
        }
        res = std::move(keep);
        i = j;
    }
    return c;
}

}  // namespace sluice
