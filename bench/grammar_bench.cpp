// Constrained decoding's per-token cost at K3's vocabulary size (163840).
//
// There is no 163840-token tokenizer in the fixtures, so the vocabulary is
// synthetic with a BPE's shape: the 256 bytes, then pieces drawn from
// English-like words (with and without a leading space), digit runs, JSON
// punctuation runs (quotes, braces, colons), 2-3 byte UTF-8 characters and
// some cut UTF-8 sequences; lengths 2-16 bytes. For several schemas it
// samples constrained outputs (temperature 1, random logits, seeded) and
// times, per token and in the same run:
//   - the mask alone (TokenTable::mask),
//   - the mask with a draw limit (finish-now: every allowed token's cost
//     to complete is computed; the limit is loose, so the same tokens pass),
//   - the sampler with the constraint (mask + draw among allowed tokens),
//   - the sampler without it (the baseline: a draw over the whole vocabulary).
// Usage: bench_grammar [tokens_per_schema]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "grammar/constraint.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"

using namespace sluice::grammar;
using Clock = std::chrono::steady_clock;

static std::vector<std::string> synthetic_vocab(size_t n, uint64_t seed) {
    std::vector<std::string> v;
    for (int b = 0; b < 256; b++) v.push_back(std::string(1, (char)b));
    std::mt19937_64 rng(seed);
    const char *syll[] = {"th", "e", "an", "in", "er", "on", "re", "at", "st", "en", "ing", "ion", "al", "ou",
                          "or", "ar", "is", "it", "ed", "es", "le", "ro", "co", "de", "ma", "ne", "ti", "ra"};
    const char *punct[] = {"\"", "{", "}", "[", "]", ":", ",", "\":", "\",", "{\"", "\"}", "\\n", "\\\"", " ",
                           "  ", "\n", ".", "(", ")", "=", "_"};
    while (v.size() < n) {
        std::string t;
        switch (rng() % 10) {
        case 0: case 1: case 2: case 3:  // words
            if (rng() % 2) t.assign(1, ' ');
            for (int k = 1 + (int)(rng() % 4); k > 0; k--) t += syll[rng() % std::size(syll)];
            break;
        case 4:  // digits
            for (int k = 1 + (int)(rng() % 4); k > 0; k--) t += (char)('0' + rng() % 10);
            break;
        case 5: case 6:  // punctuation runs
            for (int k = 1 + (int)(rng() % 3); k > 0; k--) t += punct[rng() % std::size(punct)];
            break;
        case 7: case 8: {  // CJK / accented characters
            for (int k = 1 + (int)(rng() % 3); k > 0; k--) {
                uint32_t cp = rng() % 2 ? 0x4E00 + (uint32_t)(rng() % 20000) : 0xC0 + (uint32_t)(rng() % 300);
                if (cp < 0x800) t += (char)(0xC0 | (cp >> 6)), t += (char)(0x80 | (cp & 63));
                else t += (char)(0xE0 | (cp >> 12)), t += (char)(0x80 | ((cp >> 6) & 63)), t += (char)(0x80 | (cp & 63));
            }
            break;
        }
        default: {  // a character cut in two, then a word
            uint32_t cp = 0x4E00 + (uint32_t)(rng() % 20000);
            t += (char)(0x80 | ((cp >> 6) & 63));
            t += (char)(0x80 | (cp & 63));
            t += syll[rng() % std::size(syll)];
        }
        }
        if (t.size() > 16) t.resize(16);
        if (t.size() >= 2) v.push_back(t);
    }
    return v;
}

int main(int argc, char **argv) {
    const int per_schema = argc > 1 ? std::atoi(argv[1]) : 400;
    constexpr size_t kVocab = 163840;
    auto vocab = synthetic_vocab(kVocab - 1, 42);
    vocab.push_back("<end>");
    std::vector<bool> usable(vocab.size(), true);
    usable.back() = false;
    const int32_t end = (int32_t)vocab.size() - 1;
    auto t0 = Clock::now();
    auto table = std::make_shared<TokenTable>(vocab, usable);
    const double t_index = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("vocabulary %zu tokens (synthetic, BPE-shaped); index built in %.1f ms\n", vocab.size(), 1e3 * t_index);

    const char *schemas[][2] = {
        {"person", R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
          "tags":{"type":"array","items":{"type":"string"}}},"required":["name","age","tags"]})"},
        {"numbers", R"({"type":"array","items":{"type":"number"}})"},
        {"anyOf", R"({"type":"array","items":{"anyOf":[{"type":"object","properties":{"k":{"enum":["a","b"]},
          "v":{"type":"integer"}},"required":["k","v"]},{"type":"string"},{"type":"null"}]}})"},
        {"json_object", ""},
    };
    std::normal_distribution<float> nd(0.0f, 2.0f);
    std::vector<float> logits(vocab.size());
    std::vector<uint8_t> allowed;
    double all_mask = 0, all_con = 0, all_free = 0, all_lim = 0;
    long all_n = 0;
    for (const auto &s : schemas) {
        Limits lim;
        auto g = std::make_shared<Grammar>();
        std::string err;
        if (*s[1]) {
            if (!compile_json_schema(s[1], lim, g.get(), &err)) return std::fprintf(stderr, "%s\n", err.c_str()), 1;
        } else {
            *g = any_json_object(lim);
        }
        double t_mask = 0, t_con = 0, t_free = 0, t_lim = 0;
        long n = 0;
        size_t allowed_sum = 0;
        std::mt19937_64 rng(7);
        uint64_t seed = 1;
        while (n < per_schema) {
            sluice::sample::Params p;
            p.temperature = 1.0f, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f, p.seed = seed++;
            sluice::sample::Sampler con(p), free_s(p);
            auto c = std::make_shared<GrammarConstraint>(g, table, std::vector<int32_t>{end});
            con.set_constraint(c);
            for (int i = 0; i < 4096 && n < per_schema; i++) {
                for (float &x : logits) x = nd(rng);
                auto a = Clock::now();
                allowed_sum += c->matcher().finished() ? 0 : table->mask(c->matcher(), &allowed);
                auto b = Clock::now();
                if (!c->matcher().finished()) table->mask(c->matcher(), &allowed, TokenTable::kNoLimit - 1);
                auto b2 = Clock::now();
                t_lim += std::chrono::duration<double>(b2 - b).count();
                b = Clock::now();
                int32_t id = con.sample(logits, {});
                auto d = Clock::now();
                (void)free_s.sample(logits, {});
                auto e = Clock::now();
                t_mask += std::chrono::duration<double>(b - a).count();
                t_con += std::chrono::duration<double>(d - b).count();
                t_free += std::chrono::duration<double>(e - d).count();
                n++;
                if (id == end || id < 0) break;
            }
        }
        std::printf("%-12s %5ld tokens: mask %7.1f us/token (%.0f tokens allowed on average), with a draw limit "
                    "%7.1f us; sampler with constraint %7.1f us, without %7.1f us (overhead %+.1f us/token, x%.2f)\n",
                    s[0], n, 1e6 * t_mask / n, (double)allowed_sum / n, 1e6 * t_lim / n, 1e6 * t_con / n,
                    1e6 * t_free / n, 1e6 * (t_con - t_free) / n, t_con / t_free);
        all_mask += t_mask, all_con += t_con, all_free += t_free, all_lim += t_lim, all_n += n;
    }
    std::printf("all          %5ld tokens: mask %7.1f us/token, with a draw limit %7.1f us; sampler with constraint "
                "%7.1f us, without %7.1f us (overhead %+.1f us/token)\n",
                all_n, 1e6 * all_mask / all_n, 1e6 * all_lim / all_n, 1e6 * all_con / all_n, 1e6 * all_free / all_n,
                1e6 * (all_con - all_free) / all_n);
    return 0;
}
