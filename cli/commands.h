// Pieces of the CLI shared by its subcommands.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sluice/sluice.h"

namespace CLI {
class App;
}

namespace sluice {

// `sluice kld ...` (cli/kld_command.cpp); argv[0] == "kld".
int run_kld(int argc, char **argv);

// Collects sluice_set_trace callbacks and writes the trace directory that
// tools/oracle/diff.py reads: trace.json, one n_tokens x hidden f32 file per
// (layer, stage), and logits.f32.
class TraceWriter {
public:
    bool begin(const std::string &dir, int n_tokens, std::string *err);
    static void callback(void *user, int layer, const char *stage, int pos, const float *x, int hidden);
    bool finish(const std::vector<float> &logits, int vocab, const std::string &producer, std::string *err);

private:
    struct Entry {
        int layer;
        std::string stage;
        std::vector<float> data;
    };
    std::string dir_;
    int n_ = 0, hidden_ = 0, n_layers_ = 0;
    std::vector<Entry> entries_;
    std::map<std::pair<int, std::string>, size_t> index_;
};

// The text subcommands (cli/text_commands.cpp): run, chat, tokenize,
// detokenize. main.cpp lends them its shared model options through hooks.
struct TextHooks {
    std::function<void(CLI::App *)> add_common;                  // adds the shared model options
    // Opens with them (vision: load the image tower too); reports failure.
    std::function<sluice_ctx *(const std::string &model, bool vision)> open;
    std::function<void(sluice_ctx *)> print_stats;               // the full expert/I-O statistics
    std::function<void(sluice_ctx *)> before_close;              // e.g. --learn
    // Opens the manifest and side files only (tokenize, detokenize); null =
    // open(model, false).
    std::function<sluice_ctx *(const std::string &model)> open_metadata;
    std::function<bool()> quiet;  // -q: only the answer on stdout, nothing on stderr but errors
    bool is_quiet() const { return quiet && quiet(); }
};
struct TextCommands;
std::shared_ptr<TextCommands> add_text_commands(CLI::App &app, TextHooks hooks);
// Runs the text subcommand that was parsed, if any: returns true, *rc set.
bool run_text_command(TextCommands &t, int *rc);

// run/chat/serve/perplexity without a model: prints a usage naming
// models/sluice-mini, sets *rc = 2 and returns true (cli/model_hint.cpp).
bool missing_model_usage(int argc, char **argv, int *rc);

// `sluice perplexity MODEL FILE` (cli/perplexity.cpp).
struct PerplexityCommand;
std::shared_ptr<PerplexityCommand> add_perplexity_command(CLI::App &app, TextHooks hooks);
bool run_perplexity_command(PerplexityCommand &p, int *rc);

// `sluice bench MODEL` (cli/bench_command.cpp).
struct BenchCommand;
std::shared_ptr<BenchCommand> add_bench_command(CLI::App &app, TextHooks hooks);
bool run_bench_command(BenchCommand &b, int *rc);

}  // namespace sluice
