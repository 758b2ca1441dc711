// Constrained generations on a model, for the JSON Schema validator check
// (run_ajv.sh): for each schema file and each seed, a sampled generation
// (temperature 1, nothing else filtering) constrained to the schema, one
// JSON line per output: {"schema", "seed", "text", "tokens", "ended"}.
// Also times the sampler per token with and without the constraint on the
// same logits, and prints the mask's share.
//
// Usage: schema_gen MODEL SCHEMA_DIR SEEDS OUT.jsonl
#include <algorithm>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "sluice/sluice.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int main(int argc, char **argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: schema_gen MODEL SCHEMA_DIR SEEDS OUT.jsonl\n");
        return 2;
    }
    const int seeds = std::atoi(argv[3]);
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.max_context = 8192;
    sluice_ctx *ctx = nullptr;
    if (sluice_open(argv[1], &cfg, &ctx) != SLUICE_OK) {
        std::fprintf(stderr, "schema_gen: %s\n", ctx ? sluice_last_error(ctx) : "cannot open");
        sluice_close(ctx);
        return 1;
    }
    std::vector<fs::path> files;
    for (const auto &e : fs::directory_iterator(argv[2]))
        if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    std::ofstream out(argv[4]);
    const int32_t V = sluice_n_vocab(ctx), eos = sluice_token_eos(ctx);
    std::vector<float> logits((size_t)V);
    const char *prompt_text = "Answer in JSON:";
    std::vector<int32_t> prompt(64);
    size_t np = 0;
    if (sluice_tokenize(ctx, prompt_text, std::strlen(prompt_text), prompt.data(), prompt.size(), &np) != SLUICE_OK) {
        std::fprintf(stderr, "schema_gen: %s\n", sluice_last_error(ctx));
        return 1;
    }
    prompt.resize(np);
    prompt.insert(prompt.begin(), sluice_token_bos(ctx));
    double t_con = 0, t_free = 0;
    long long tok_total = 0;
    int failures = 0;
    for (const auto &f : files) {
        std::ifstream in(f);
        std::stringstream ss;
        ss << in.rdbuf();
        const std::string schema = ss.str();
        for (int seed = 1; seed <= seeds; seed++) {
            sluice_sampling sp;
            sluice_sampling_default(&sp);
            sp.temperature = 1.0f;
            sp.top_k = 0;
            sp.top_p = 1.0f;
            sp.min_p = 0.0f;
            sp.seed = (uint64_t)seed;
            sluice_sampler *con = sluice_sampler_new(&sp), *free_s = sluice_sampler_new(&sp);
            if (sluice_sampler_set_json_schema(con, ctx, schema.data(), schema.size(), &eos, 1) != SLUICE_OK) {
                std::fprintf(stderr, "schema_gen: %s: %s\n", f.filename().c_str(), sluice_last_error(ctx));
                return 1;
            }
            sluice_reset(ctx);
            if (sluice_eval(ctx, prompt.data(), prompt.size(), logits.data()) != SLUICE_OK) {
                std::fprintf(stderr, "schema_gen: %s\n", sluice_last_error(ctx));
                return 1;
            }
            std::vector<int32_t> ids;
            bool ended = false;
            for (int i = 0; i < 4096; i++) {
                auto t0 = Clock::now();
                int32_t id = sluice_sampler_sample(con, logits.data(), V, nullptr, 0);
                auto t1 = Clock::now();
                (void)sluice_sampler_sample(free_s, logits.data(), V, nullptr, 0);
                auto t2 = Clock::now();
                t_con += std::chrono::duration<double>(t1 - t0).count();
                t_free += std::chrono::duration<double>(t2 - t1).count();
                tok_total++;
                if (id < 0) break;
                if (id == eos) {
                    ended = true;
                    break;
                }
                ids.push_back(id);
                if (sluice_eval(ctx, &id, 1, logits.data()) != SLUICE_OK) break;
            }
            std::string text(ids.size() * 8 + 16, '\0');
            size_t nt = 0;
            if (sluice_detokenize(ctx, ids.data(), ids.size(), text.data(), text.size(), &nt) == SLUICE_E_RANGE) {
                text.resize(nt);
                sluice_detokenize(ctx, ids.data(), ids.size(), text.data(), text.size(), &nt);
            }
            text.resize(nt);
            failures += !ended || sluice_sampler_constraint_state(con) != 2;
            nlohmann::json line = {{"schema", f.filename().string()},
                                   {"seed", seed},
                                   {"text", text},
                                   {"tokens", ids.size()},
                                   {"ended", ended}};
            out << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
            sluice_sampler_free(con);
            sluice_sampler_free(free_s);
        }
    }
    std::printf("schema_gen: %zu schemas x %d seeds, %lld sampled tokens (vocab %d); sampler per token: "
                "constrained %.1f us, unconstrained %.1f us (mask overhead %.1f us/token); unfinished: %d\n",
                files.size(), seeds, tok_total, V, 1e6 * t_con / (double)tok_total, 1e6 * t_free / (double)tok_total,
                1e6 * (t_con - t_free) / (double)tok_total, failures);
    sluice_close(ctx);
    return failures ? 1 : 0;
}
