// Which expert record the cache gives up, and whether a new one may enter.
// The expert store and the offline replay (bench/policy_replay, `sluice plan`
// projections) drive the same objects, so what the replay measures is what
// the engine does.
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace sluice {

using CacheKey = uint64_t;  // (layer << 32) | expert
inline CacheKey cache_key(int layer, int expert) { return ((uint64_t)(uint32_t)layer << 32) | (uint32_t)expert; }

class CachePolicy {
public:
    virtual ~CachePolicy() = default;
    virtual const char *name() const = 0;
    // A demand fetch of k, hit or miss, before any insertion it causes.
    virtual void access(CacheKey k) = 0;
    virtual void inserted(CacheKey k) = 0;
    virtual void erased(CacheKey k) = 0;
    // The resident key to give up next, skipping those `pinned` says are in
    // use. False when every resident key is pinned.
    virtual bool victim(const std::function<bool(CacheKey)> &pinned, CacheKey *out) = 0;
    // Whether non-resident k should take victim v's place (false: k is used
    // from its read buffer and dropped, v stays).
    virtual bool admit(CacheKey k, CacheKey v) { return true; }
    // Prior knowledge (a hotlist's use count) for k.
    virtual void seed(CacheKey k, uint32_t count) {}
};

// "freq" (default), "pred", "lfru" (the rule before 2026-12-03, kept for
// comparison) or "lru". capacity is the cache size in records. nullptr for
// an unknown name.
std::unique_ptr<CachePolicy> make_cache_policy(const std::string &name, size_t capacity);
const char *cache_policy_names();  // "freq|pred|lfru|lru", for usage lines

// Least recently used.
class LruPolicy final : public CachePolicy {
public:
    const char *name() const override { return "lru"; }
    void access(CacheKey k) override;
    void inserted(CacheKey k) override;
    void erased(CacheKey k) override;
    bool victim(const std::function<bool(CacheKey)> &pinned, CacheKey *out) override;

private:
    std::list<CacheKey> order_;  // front = most recent
    std::unordered_map<CacheKey, std::list<CacheKey>::iterator> pos_;
};

// The store's rule until 2026-12-03: hits since insertion over a recency
// decay of 256 accesses. Its counts die with the entry and one token of a
// 48B-shaped model makes 208 fetches, so below one working set it behaves
// like LRU on a loop and hits nothing (issue 13's replay).
class LfruPolicy final : public CachePolicy {
public:
    const char *name() const override { return "lfru"; }
    void access(CacheKey k) override;
    void inserted(CacheKey k) override;
    void erased(CacheKey k) override;
    bool victim(const std::function<bool(CacheKey)> &pinned, CacheKey *out) override;

private:
    struct E {
        uint64_t hits = 0, last = 0;
    };
    std::unordered_map<CacheKey, E> res_;
    uint64_t clock_ = 0;
};

// Decayed frequency with memory, admission and an adaptive time scale.
// Every record ever fetched keeps an exponentially decayed use count,
// resident or not, so an evicted record comes back with its history (the
// previous rule lost it, and below one token's working set hit nothing).
// The victim is the resident record with the lowest decayed count; a
// missing record enters only when its count is at least the victim's.
// Why counts: decode walks the layers in a fixed cycle, so every resident
// record's next use is about one token away and recency alone cannot rank
// them; how often, and how lately, a record was routed to is what predicts
// its return.
// The half-life that ranks best depends on the cache size and the routing
// (on the 48B trace, 4-8 x capacity fetches at 3 % of the expert set, 1 x
// at 12 %), so the policy keeps the count at a grid of half-lives (1/8 to 8
// 2, 4 and 8 x capacity fetches), replays each one in a shadow cache of
// keys only, and ranks real victims by the half-life whose shadow has hit
// most so far (adaptive caching with ghost experts, in the manner of ARC
// and ACME). No constant here is fitted to a trace.
class FreqPolicy final : public CachePolicy {
public:
    explicit FreqPolicy(size_t capacity);
    const char *name() const override { return "freq"; }
    void access(CacheKey k) override;
    void inserted(CacheKey k) override;
    void erased(CacheKey k) override;
    bool victim(const std::function<bool(CacheKey)> &pinned, CacheKey *out) override;
    bool admit(CacheKey k, CacheKey v) override;
    void seed(CacheKey k, uint32_t count) override;
    int chosen() const;                   // index into half_lives()
    const std::vector<double> &half_lives() const { return half_; }

private:
    static constexpr int kH = 7;
    struct Info {
        // log2(decayed count) + clock / half-life: the order this induces
        // does not change as time passes, only when the record is used.
        double key[kH];
        uint64_t last = 0;
        bool resident = false;
    };
    using Rank = std::pair<double, CacheKey>;
    void bump(Info &i, double amount);
    bool shadow_pinned(CacheKey q) const;

    size_t cap_;
    std::vector<double> half_;
    uint64_t clock_ = 0, layer_start_ = 0;
    int cur_layer_ = -1;
    std::unordered_map<CacheKey, Info> info_;
    std::set<Rank> real_[kH];  // real residents under each half-life
    struct Shadow {
        std::set<Rank> order;
        std::unordered_map<CacheKey, double> keys;
        uint64_t hits = 0;
    } shadow_[kH];
};

// Next-visit probability, learned online. Decode visits every MoE layer
// once a token, so what matters about a record is the chance that the next
// visit of its layer routes to it. Routing has two parts that one decayed
// count cannot hold at once: popularity (how often a layer picks the
// record at all) and persistence (a record picked this token is picked
// again next token far more often than its popularity says). The policy
// estimates both from the routing it has seen:
//   f   = the record's uses over the layer's visits, decayed with a
//         half-life of H visits (popularity);
//   per = the share of last-visit records used again beyond what their f
//         explains: from reuse events B, chances A and the f sum F of those
//         chances, per = (B - F) / (A - F) (solving B = per*A + (1-per)*F);
// and ranks a record by per + (1 - per) * f when its layer's latest visit
// used it, by f otherwise. The victim is the lowest rank; a missing record
// enters only when its rank is at least the victim's.
// H is not a tuned constant: the policy keeps f for a grid of half-lives
// (8 to 128 visits, and no decay) and ranks with the one whose predictions
// of each visit have the lowest Brier score so far, scored over every
// record the layer has used, at every visit. Victim search scans the
// residents (linear in the cache's records, a few thousand at most).
class PredPolicy final : public CachePolicy {
public:
    PredPolicy();
    const char *name() const override { return "pred"; }
    void access(CacheKey k) override;
    void inserted(CacheKey k) override;
    void erased(CacheKey k) override;
    bool victim(const std::function<bool(CacheKey)> &pinned, CacheKey *out) override;
    bool admit(CacheKey k, CacheKey v) override;
    void seed(CacheKey k, uint32_t count) override;
    static constexpr int kH = 6;
    int chosen() const;                      // index into half_lives()
    double half_life(int h) const { return half_[(size_t)h]; }  // 0: no decay
    double persistence(int h) const;

private:
    struct Rec {
        double uses[kH] = {};  // decayed to the visit last_visit
        uint64_t last_visit = 0;
        bool used = false, resident = false;
    };
    struct Layer {
        uint64_t visits = 0;              // visits so far; the latest is number `visits`
        std::vector<CacheKey> cur, prev;  // records of the latest visit and the one before
        std::vector<CacheKey> members;    // every record the layer has used
        std::vector<double> predicted;    // members x kH, made when the latest visit began
    };
    double freq(const Rec &r, const Layer &l, int h) const;
    double rank(CacheKey k, int h) const;
    double decay(int h, uint64_t n) const;
    void start_visit(int layer);

    std::vector<double> half_, alpha_;
    std::unordered_map<CacheKey, Rec> rec_;
    std::unordered_map<int, Layer> layers_;
    std::vector<CacheKey> res_;  // residents, unordered (swap-erase)
    std::unordered_map<CacheKey, size_t> res_pos_;
    int cur_layer_ = -1;
    double reuse_ = 0, chances_ = 0, fsum_[kH] = {}, brier_[kH] = {};
};

}  // namespace sluice
