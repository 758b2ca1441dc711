// bench_tokenizer: content-mode encoding throughput of sluice's tokenizer on
// one thread, for the comparison with tiktoken in bench/tokenizer_bench.mjs
// (driven by bench/tokenizer_bench.sh; results go to docs/PERF.md).
//
//   bench_tokenizer --ranks FILE --pattern P --corpus FILE [--specials FILE]
//                   [--reps N] [--ids-out FILE]
//
// The corpus holds "<byte length>\n<bytes>\n" records (gen_corpus.py); each
// record is one encode() call, as each is one call to the JavaScript peers.
// Loading the ranks is timed separately and kept out of the rate. One
// untimed pass warms the caches (and writes the ids for the cross-check
// with tiktoken when --ids-out is given); the rate is the best of N timed
// passes, because on a shared machine the fastest pass is the one least
// disturbed by other processes.
//
// Output: one JSON object on stdout.
// --ids-out: for every record, its id count (int32) then its ids (int32),
// little-endian.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

using namespace sluice::tok;

namespace {

int usage(const char *why) {
    std::fprintf(stderr,
                 "bench_tokenizer: %s\nusage: bench_tokenizer --ranks FILE --pattern P --corpus FILE "
                 "[--specials FILE] [--reps N] [--ids-out FILE]\n",
                 why);
    return 2;
}

bool read_file(const std::string &path, std::string &out) {
    std::FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    char buf[1 << 16];
    for (size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, got);
    std::fclose(f);
    return true;
}

// Views into `in`, so the timed loop touches no allocator for its input.
bool split_records(const std::string &in, std::vector<std::string_view> &out) {
    size_t pos = 0;
    while (pos < in.size()) {
        size_t nl = in.find('\n', pos);
        if (nl == std::string::npos) return false;
        size_t len = std::strtoull(in.c_str() + pos, nullptr, 10);
        pos = nl + 1;
        if (pos + len + 1 > in.size() || in[pos + len] != '\n') return false;
        out.emplace_back(in.data() + pos, len);
        pos += len + 1;
    }
    return true;
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char **argv) {
    std::string ranks, specials, pattern_name, corpus_path, ids_out;
    int reps = 5;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--ranks") ranks = next();
        else if (a == "--specials") specials = next();
        else if (a == "--pattern") pattern_name = next();
        else if (a == "--corpus") corpus_path = next();
        else if (a == "--ids-out") ids_out = next();
        else if (a == "--reps") reps = std::atoi(next().c_str());
        else return usage(("unknown argument " + a).c_str());
    }
    if (ranks.empty() || corpus_path.empty() || pattern_name.empty()) return usage("missing argument");
    auto pattern = pattern_from_name(pattern_name);
    if (!pattern) return usage("unknown pattern");
    if (reps < 1) reps = 1;

    std::string corpus;
    std::vector<std::string_view> texts;
    if (!read_file(corpus_path, corpus)) return usage(("cannot read " + corpus_path).c_str());
    if (!split_records(corpus, texts)) return usage("malformed corpus");
    size_t text_bytes = 0;
    for (auto t : texts) text_bytes += t.size();

    double t0 = now_s();
    auto tok = Tokenizer::load(ranks, specials, LoadOptions{*pattern, 0});
    if (!tok) {
        std::fprintf(stderr, "bench_tokenizer: %s\n", tok.error().c_str());
        return 1;
    }
    (void)char_class(0);  // the class table is built once per process: load time
    double load_s = now_s() - t0;

    std::vector<Token> ids;
    ids.reserve(1 << 16);
    size_t n_tokens = 0;
    {  // warm-up and cross-check pass (untimed)
        std::FILE *f = ids_out.empty() ? nullptr : std::fopen(ids_out.c_str(), "wb");
        if (!ids_out.empty() && !f) return usage(("cannot write " + ids_out).c_str());
        for (auto t : texts) {
            ids.clear();
            tok->encode(t, ids);
            n_tokens += ids.size();
            if (f) {
                int32_t n = static_cast<int32_t>(ids.size());
                std::fwrite(&n, sizeof n, 1, f);
                std::fwrite(ids.data(), sizeof(Token), ids.size(), f);
            }
        }
        if (f) std::fclose(f);
    }

    double best = 1e30;
    std::vector<double> times;
    size_t check = 0;  // consumed, so the passes cannot be optimised away
    for (int r = 0; r < reps; ++r) {
        double s = now_s();
        for (auto t : texts) {
            ids.clear();
            tok->encode(t, ids);
            check += ids.size();
        }
        double e = now_s() - s;
        times.push_back(e);
        best = std::min(best, e);
    }
    if (check != n_tokens * static_cast<size_t>(reps)) {
        std::fprintf(stderr, "bench_tokenizer: id counts differ between passes\n");
        return 1;
    }
    std::sort(times.begin(), times.end());
    std::printf(
        "{\"pattern\":\"%s\",\"records\":%zu,\"bytes\":%zu,\"tokens\":%zu,\"load_s\":%.4f,\"reps\":%d,"
        "\"best_s\":%.6f,\"median_s\":%.6f,\"mb_per_s\":%.3f}\n",
        pattern_name.c_str(), texts.size(), text_bytes, n_tokens, load_s, reps, best, times[times.size() / 2],
        text_bytes / 1e6 / best);
    return 0;
}
