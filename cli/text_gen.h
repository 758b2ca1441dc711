// Text generation shared by `sluice run` and `sluice chat`: sampling
// options, a stop-string filter for streamed text, and the decode loop.
#pragma once
#include <csignal>
#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "sluice/sluice.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace sluice {

struct SamplingOpts {
    sluice_sampling p{};
    CLI::Option *seed_opt = nullptr;
    // Fills p from the defaults and registers --temp, --top-k, --top-p,
    // --min-p, --repeat-penalty, --repeat-last-n, --seed.
    void add(CLI::App *app);
    // The seed: --seed if given, else a random one (reported, so a run can
    // be repeated).
    uint64_t resolve_seed();
};

// Holds back streamed text that may be the start of a stop string, and
// cuts the text at the first stop string found.
class StopFilter {
public:
    explicit StopFilter(std::vector<std::string> stops);
    // Appends chunk; returns the text that is safe to print now. Sets
    // stopped() when a stop string appears (the text before it is returned).
    std::string push(const std::string &chunk);
    // At the end of the stream: whatever is held back.
    std::string finish();
    bool stopped() const { return stopped_; }

private:
    std::vector<std::string> stops_;
    std::string held_;
    bool stopped_ = false;
};

enum class StopReason { limit, eos, stop_token, stop_string, context_full, error };
const char *stop_reason_name(StopReason r);

struct GenOptions {
    int n_max = 256;                   // tokens to sample at most
    std::vector<int32_t> stop_tokens;  // end the turn (not printed), besides EOS
    std::vector<std::string> stops;    // stop strings (cut from the output)
    bool print_control = false;        // print control tokens' text too
    bool ignore_eos = false;           // EOS and stop tokens do not end generation (benchmarks)
    // Set (by a SIGINT handler) to end the reply as if it hit the limit: the
    // session stays consistent and the conversation goes on.
    const volatile std::sig_atomic_t *interrupt = nullptr;
};

struct GenResult {
    // The sampled tokens. All but the last were fed to the model; the last
    // never is (it is the stop token, or the one that hit the limit).
    std::vector<int32_t> ids;
    std::string text;  // what was printed
    StopReason why = StopReason::limit;
    double seconds = 0;
    std::string error;  // when why == error
};

// Samples from `logits` (the last evaluated position), prints the text to
// `out` as it completes, and feeds each token back until a stop. `history`
// holds every token the model has seen (the repetition penalty reads it)
// and grows with each token fed.
GenResult generate(sluice_ctx *ctx, sluice_sampler *sampler, std::vector<float> &logits,
                   std::vector<int32_t> &history, const GenOptions &o, std::FILE *out);

// Calls fill(out, cap, &n) with a growing buffer until it fits.
template <class T, class F>
sluice_status fill_all(std::vector<T> &v, size_t guess, F fill) {
    v.resize(std::max<size_t>(guess, 16));
    for (;;) {
        size_t n = 0;
        sluice_status st = fill(v.data(), v.size(), &n);
        if (st == SLUICE_E_RANGE && n > v.size()) {
            v.resize(n);
            continue;
        }
        v.resize(st == SLUICE_OK ? n : 0);
        return st;
    }
}

struct ChatArgs {
    std::string model, system;
    SamplingOpts sampling;
    int n_max = 1024;  // tokens per reply
    bool print_ids = false;
    bool vision = false;  // load the vision tower so /image works
};
// The chat REPL (cli/chat_command.cpp).
int cmd_chat(ChatArgs &a, const TextHooks &h);

}  // namespace sluice
