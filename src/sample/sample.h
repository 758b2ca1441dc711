// Token sampling (llama.cpp's semantics, a fixed-algorithm PRNG).
//
// One draw: repetition penalty over the last repeat_last_n history tokens,
// then top-k, top-p, min-p (on the untempered distribution, as llama.cpp's
// default chain), then temperature and a draw from the seeded generator.
// Temperature 0 is greedy: the largest (penalised) logit, lowest id on ties.
// Candidates are ordered by (logit descending, id ascending), so ties and
// the draw never depend on the sort implementation.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace sluice::sample {

// xoshiro256** seeded through splitmix64: the same seed gives the same
// stream on every machine and compiler.
class Rng {
public:
    explicit Rng(uint64_t seed = 0) { seed_with(seed); }
    void seed_with(uint64_t seed);
    uint64_t next();
    // Uniform in [0, 1) with 53 random bits.
    double uniform() { return (double)(next() >> 11) * 0x1.0p-53; }

private:
    uint64_t s_[4];
};

uint64_t splitmix64(uint64_t &state);

struct Params {
    float temperature = 0.8f;  // 0 = greedy
    int32_t top_k = 40;        // <= 0: off
    float top_p = 0.95f;       // >= 1: off
    float min_p = 0.05f;       // <= 0: off
    float repeat_penalty = 1.0f;  // 1: off
    int32_t repeat_last_n = 64;   // 0: off; -1: the whole history
    uint64_t seed = 0;
};

// Empty string if p is usable, else what is wrong.
const char *check_params(const Params &p);

struct Candidate {
    int32_t id;
    float logit;
};

// The steps, exposed for tests. Each keeps at least one candidate.
// Divides positive and multiplies non-positive logits of every distinct
// token among the last `last_n` of history (in place, indexed by id).
void apply_repeat_penalty(std::span<float> logits, std::span<const int32_t> history, float penalty, int32_t last_n);
// Sorts by (logit desc, id asc).
void sort_candidates(std::vector<Candidate> &c);
// The following expect sorted candidates.
void top_k(std::vector<Candidate> &c, int32_t k);
// Keeps the shortest prefix whose probability mass reaches p.
void top_p(std::vector<Candidate> &c, float p);
// Keeps candidates with probability >= min_p x the largest.
void min_p(std::vector<Candidate> &c, float p);
// Softmax of logit / temperature over the candidates (double precision).
std::vector<double> probabilities(const std::vector<Candidate> &c, float temperature);

// A rule on which tokens may come next (a grammar: src/grammar). The
// sampler asks it before every draw, draws among the allowed tokens only,
// and tells it the choice.
class Constraint {
public:
    virtual ~Constraint() = default;
    // allowed[id] = 1 for each token that may come next (n_vocab entries).
    virtual void allowed(std::vector<uint8_t> *allowed) = 0;
    virtual void accept(int32_t id) = 0;
    // The constrained output is complete.
    virtual bool done() const = 0;
    // Finish-now: the output and its end token must fit in `draws` more
    // draws, this one included (negative: no limit). A constraint that
    // cannot bound its output ignores it.
    virtual void set_draw_limit(int32_t draws) { (void)draws; }
    // The fewest draws that end the output, its end token included (0 once
    // ended); -1 when the constraint cannot tell.
    virtual int32_t draws_to_finish() const { return -1; }
};

class Sampler {
public:
    explicit Sampler(const Params &p) : p_(p), rng_(p.seed) {}
    // logits: n_vocab values; history: tokens so far (for the penalty).
    int32_t sample(std::span<const float> logits, std::span<const int32_t> history);
    const Params &params() const { return p_; }
    // With a constraint, a token it refuses is never drawn; -1 when it
    // allows none.
    void set_constraint(std::shared_ptr<Constraint> c) { constraint_ = std::move(c); }
    Constraint *constraint() const { return constraint_.get(); }

private:
    int32_t draw(std::span<const int32_t> history);
    Params p_;
    std::shared_ptr<Constraint> constraint_;
    std::vector<uint8_t> allowed_;
    Rng rng_;
    std::vector<float> work_;
    std::vector<Candidate> cand_;
};

}  // namespace sluice::sample
