// Cache policies against the offline optimum on real routing (issue 13).
//
//   bench_policy_replay TRACE.jsonl [--experts N] [--sizes 3,6,12]
//   bench_policy_replay --synthetic zipf|drift --seed S [--tokens 300] [--layers 26] [--experts 256] [--top-k 8]
//
// Replays the trace token by token, layer by layer, through each policy the
// store can run (the same objects, src/runtime/cache_policy.h) and through
// Belady's MIN, at caches of the given percentages of the expert set, and
// prints hits, the fraction of Belady's hits each policy reaches, and how
// many misses a history predictor (the same layer's experts one, or up to
// four, tokens before) could have read ahead. The synthetic generators are
// routing nobody tuned a policy on: Zipf popularity per layer over a random
// permutation (exponent 0.8), next-token persistence 0.3, and for "drift" a
// popularity order that changes a little every token. On synthetic routing
// an "oracle-p" row ranks by the generator's own probabilities: the
// reference for what an online rule could learn there.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "runtime/cache_replay.h"

using namespace sluice;

// What the generator draws from, for the oracle-probability policy below.
struct Generator {
    std::vector<std::vector<double>> p;  // [layer][expert]: one Zipf draw's probability
    double persistence = 0.3;
    int k = 8;
};

// Not a policy the store can run: it ranks records by the probability, under
// the generator's own parameters (the initial popularity order, so for
// "drift" it is slightly stale), that the next visit of their layer uses
// them. An online rule learns at best these probabilities from the routing
// it sees, so this row is the reference for what eviction alone can reach
// here (not a proof of optimality: ranking by next-visit probability is
// greedy over one token).
class OracleProbPolicy final : public CachePolicy {
public:
    explicit OracleProbPolicy(const Generator &g) : g_(g), last_(g.p.size()), cur_(g.p.size()) {}
    const char *name() const override { return "oracle-p"; }
    void access(CacheKey k) override {
        const int m = (int)(k >> 32), e = (int)(uint32_t)k;
        if (m != cur_layer_) {  // a new visit of layer m begins
            if (cur_layer_ >= 0) last_[(size_t)cur_layer_] = cur_[(size_t)cur_layer_];
            cur_layer_ = m;
            cur_[(size_t)m].clear();
        }
        cur_[(size_t)m].insert(e);
    }
    void inserted(CacheKey k) override { res_.insert(k); }
    void erased(CacheKey k) override { res_.erase(k); }
    bool victim(const std::function<bool(CacheKey)> &pinned, CacheKey *out) override {
        bool found = false;
        double best = 0;
        for (CacheKey r : res_) {
            if (pinned(r)) continue;
            const double s = next_use(r);
            if (!found || s < best) found = true, best = s, *out = r;
        }
        return found;
    }
    bool admit(CacheKey k, CacheKey v) override { return next_use(k) >= next_use(v); }

private:
    double next_use(CacheKey key) const {
        const int m = (int)(key >> 32), e = (int)(uint32_t)key;
        // The layer's latest visit is what its next visit persists from.
        const std::set<int> &prev = m == cur_layer_ ? cur_[(size_t)m] : last_[(size_t)m];
        const double pe = g_.p[(size_t)m][(size_t)e];
        const double draws = g_.k * (1.0 - g_.persistence);
        const double fresh = 1.0 - std::pow(1.0 - pe, draws);
        return prev.count(e) ? g_.persistence + (1.0 - g_.persistence) * fresh : fresh;
    }
    const Generator &g_;
    std::vector<std::set<int>> last_, cur_;
    int cur_layer_ = -1;
    std::set<CacheKey> res_;
};

static RouteTrace synthetic(const std::string &kind, uint64_t seed, int tokens, int layers, int experts, int k,
                            Generator *gen) {
    std::mt19937_64 rng(seed);
    RouteTrace tr;
    tr.moe_layers = layers;
    tr.top_k = k;
    tr.max_expert = experts - 1;
    std::vector<std::vector<int>> perm((size_t)layers);
    for (auto &p : perm) {
        p.resize((size_t)experts);
        for (int e = 0; e < experts; e++) p[(size_t)e] = e;
        std::shuffle(p.begin(), p.end(), rng);
    }
    std::vector<double> w((size_t)experts);
    for (int r = 0; r < experts; r++) w[(size_t)r] = 1.0 / std::pow((double)(r + 1), 0.8);
    double wsum = 0;
    for (double x : w) wsum += x;
    gen->k = k;
    gen->p.assign((size_t)layers, std::vector<double>((size_t)experts));
    for (int m = 0; m < layers; m++)
        for (int r = 0; r < experts; r++) gen->p[(size_t)m][(size_t)perm[(size_t)m][(size_t)r]] = w[(size_t)r] / wsum;
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<std::vector<int>> prev((size_t)layers);
    for (int t = 0; t < tokens; t++) {
        std::vector<std::vector<int>> tok((size_t)layers);
        for (int m = 0; m < layers; m++) {
            if (kind == "drift")
                for (int s = 0; s < 2; s++) {  // two adjacent-rank swaps per layer per token
                    const int r = (int)(u(rng) * (experts - 1));
                    std::swap(perm[(size_t)m][(size_t)r], perm[(size_t)m][(size_t)r + 1]);
                }
            std::set<int> chosen;
            for (int e : prev[(size_t)m])
                if ((int)chosen.size() < k && u(rng) < 0.3) chosen.insert(e);
            while ((int)chosen.size() < k) {
                std::discrete_distribution<int> d(w.begin(), w.end());
                chosen.insert(perm[(size_t)m][(size_t)d(rng)]);
            }
            tok[(size_t)m].assign(chosen.begin(), chosen.end());
        }
        prev = tok;
        tr.tokens.push_back(tok);
    }
    tr.path = "synthetic-" + kind + "-seed" + std::to_string(seed);
    return tr;
}

int main(int argc, char **argv) {
    std::string path, synth;
    uint64_t seed = 1;
    int experts = 0, tokens = 300, layers = 26, k = 8;
    std::vector<double> sizes = {3, 6, 12};
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto val = [&](const char *name) -> const char * {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n", name);
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--experts") experts = std::atoi(val("--experts"));
        else if (a == "--synthetic") synth = val("--synthetic");
        else if (a == "--seed") seed = std::strtoull(val("--seed"), nullptr, 10);
        else if (a == "--tokens") tokens = std::atoi(val("--tokens"));
        else if (a == "--layers") layers = std::atoi(val("--layers"));
        else if (a == "--top-k") k = std::atoi(val("--top-k"));
        else if (a == "--sizes") {
            sizes.clear();
            std::string s = val("--sizes");
            for (size_t p = 0; p < s.size();) {
                size_t q = s.find(',', p);
                sizes.push_back(std::atof(s.substr(p, q - p).c_str()));
                p = q == std::string::npos ? s.size() : q + 1;
            }
        } else if (!a.empty() && a[0] != '-' && path.empty()) path = a;
        else {
            std::fprintf(stderr, "usage: bench_policy_replay TRACE.jsonl [--experts N] [--sizes 3,6,12]\n"
                                 "       bench_policy_replay --synthetic zipf|drift [--seed S] [--tokens N] "
                                 "[--layers N] [--experts N] [--top-k K]\n");
            return 2;
        }
    }
    RouteTrace tr;
    Generator gen;
    if (!synth.empty()) {
        if (synth != "zipf" && synth != "drift") {
            std::fprintf(stderr, "--synthetic must be zipf or drift\n");
            return 2;
        }
        tr = synthetic(synth, seed, tokens, layers, experts > 0 ? experts : 256, k, &gen);
        if (experts <= 0) experts = 256;
    } else {
        if (path.empty()) {
            std::fprintf(stderr, "usage: bench_policy_replay TRACE.jsonl | --synthetic zipf|drift\n");
            return 2;
        }
        Status st = load_route_trace(path, &tr);
        if (!st) {
            std::fprintf(stderr, "%s\n", st.message().c_str());
            return 1;
        }
        if (experts <= 0) experts = tr.max_expert + 1;
    }
    const uint64_t set = (uint64_t)tr.moe_layers * (uint64_t)experts;
    std::printf("routing: %s, %zu tokens, %d MoE layers x %d experts = %llu records, top-%d\n", tr.path.c_str(),
                tr.tokens.size(), tr.moe_layers, experts, (unsigned long long)set, tr.top_k);
    std::printf("%-7s %9s %8s %8s %10s %14s %14s\n", "cache", "records", "policy", "hit", "of Belady",
                "miss@prev tok", "miss@prev 4");
    for (double pct : sizes) {
        const size_t cap = (size_t)((double)set * pct / 100.0);
        const ReplayCounts opt = replay_belady(tr, cap);
        auto row = [&](const char *name, const ReplayCounts &c) {
            const uint64_t miss = c.accesses - c.hits;
            std::printf("%6.1f%% %9zu %8s %7.1f%% %9.1f%% %13.1f%% %13.1f%%\n", pct, cap, name, 100 * c.hit_rate(),
                        opt.hits ? 100.0 * (double)c.hits / (double)opt.hits : 0.0,
                        miss ? 100.0 * (double)c.misses_seen_last_token / (double)miss : 0.0,
                        miss ? 100.0 * (double)c.misses_seen_recently / (double)miss : 0.0);
        };
        for (const char *name : {"lru", "lfru", "freq", "pred"}) {
            auto p = make_cache_policy(name, cap);
            row(name, replay_policy(tr, *p, cap));
            if (auto *pp = dynamic_cast<PredPolicy *>(p.get()))
                std::printf("%27s half-life %g visits (0: none), persistence %.3f\n", "pred:",
                            pp->half_life(pp->chosen()), pp->persistence(pp->chosen()));
        }
        if (!synth.empty()) {
            OracleProbPolicy o(gen);
            row("oracle-p", replay_policy(tr, o, cap));
        }
        row("belady", opt);
    }
    return 0;
}
