// Offline replay of a routing trace through a cache of `capacity` records:
// the engine's own policies, and Belady's MIN (the offline optimum). Decode
// order: token by token, MoE layer by layer; a layer's own experts stay
// pinned while the layer runs (they are in use), so they are never victims.
#pragma once
#include <cstdint>

#include "runtime/cache_policy.h"
#include "runtime/route_trace.h"

namespace sluice {

struct ReplayCounts {
    uint64_t accesses = 0, hits = 0;
    uint64_t misses_seen_last_token = 0;  // misses routed to in the same layer one token before
    uint64_t misses_seen_recently = 0;    // ... in any of the previous 4 tokens
    double hit_rate() const { return accesses ? (double)hits / (double)accesses : 0.0; }
};

ReplayCounts replay_policy(const RouteTrace &tr, CachePolicy &policy, size_t capacity);
// Belady's MIN decided per layer group, with bypass: after each group the
// cache keeps its pinned records and, in the other slots, the records that
// come back soonest (ties by the use after). The offline reference: on
// small traces it matches an exhaustive search (tests/unit/cache_policy_test)
// in most cases and is within a few percent otherwise; exact optimality
// under pinning is not claimed.
ReplayCounts replay_belady(const RouteTrace &tr, size_t capacity);

}  // namespace sluice
