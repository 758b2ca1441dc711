// tok_dump: the command-line face of sluice's tokenizer for the
// differential tests (run_difftest.sh, split_check.py).
//
//   tok_dump --mode encode|markup --ranks FILE|DIR [--specials FILE] [--pattern P] [--records]
//   tok_dump --mode split [--pattern P] [--records]
//   tok_dump --mode regex --pattern P     the regex the matcher implements
//   tok_dump --mode classes               run-length class bits of all code points
//
// Input is stdin: one text per line, or with --records a sequence of
// "<byte length>\n<bytes>\n" records (so a text may hold any byte,
// newlines included). Output: one line per text: ids separated by spaces
// (encode, markup) or pieces as hex separated by spaces (split).
// --bench prints the throughput to stderr.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

using namespace sluice::tok;

namespace {

int usage(const char *why) {
    std::fprintf(stderr, "tok_dump: %s\n", why);
    return 2;
}

bool read_records(const std::string &in, bool records, std::vector<std::string> &out) {
    if (!records) {
        size_t pos = 0;
        while (pos < in.size()) {
            size_t nl = in.find('\n', pos);
            if (nl == std::string::npos) nl = in.size();
            out.push_back(in.substr(pos, nl - pos));
            pos = nl + 1;
        }
        return true;
    }
    size_t pos = 0;
    while (pos < in.size()) {
        size_t nl = in.find('\n', pos);
        if (nl == std::string::npos) return false;
        size_t len = std::strtoull(in.c_str() + pos, nullptr, 10);
        pos = nl + 1;
        if (pos + len + 1 > in.size() || in[pos + len] != '\n') return false;
        out.push_back(in.substr(pos, len));
        pos += len + 1;
    }
    return true;
}

void dump_classes() {
    uint32_t start = 0;
    uint8_t cur = char_class(0);
    auto flush = [&](uint32_t end) { std::printf("%X %X %u\n", start, end, cur); };
    for (uint32_t cp = 1; cp <= 0x10FFFF; ++cp) {
        uint8_t f = char_class(cp);
        if (f != cur) {
            flush(cp - 1);
            start = cp;
            cur = f;
        }
    }
    flush(0x10FFFF);
}

}  // namespace

int main(int argc, char **argv) {
    std::string mode = "encode", ranks, specials, pattern_name = "kimi";
    bool records = false, bench = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--mode") mode = next();
        else if (a == "--ranks") ranks = next();
        else if (a == "--specials") specials = next();
        else if (a == "--pattern") pattern_name = next();
        else if (a == "--records") records = true;
        else if (a == "--bench") bench = true;
        else return usage(("unknown argument " + a).c_str());
    }
    auto pattern = pattern_from_name(pattern_name);
    if (!pattern) return usage("unknown pattern");
    if (mode == "regex") {
        std::printf("%s\n", pattern_regex(*pattern));
        return 0;
    }
    if (mode == "classes") {
        dump_classes();
        return 0;
    }
    std::string input;
    char buf[1 << 16];
    for (size_t got; (got = std::fread(buf, 1, sizeof buf, stdin)) > 0;) input.append(buf, got);
    std::vector<std::string> texts;
    if (!read_records(input, records, texts)) return usage("malformed --records input");

    std::string out;
    auto t0 = std::chrono::steady_clock::now();
    double load_secs = 0;
    size_t n_tokens = 0;
    if (mode == "split") {
        static const char hex[] = "0123456789abcdef";
        std::vector<Piece> pieces;
        for (const std::string &t : texts) {
            std::string v = sanitize_utf8(t);
            pieces.clear();
            pretokenize(v, *pattern, pieces);
            n_tokens += pieces.size();
            for (size_t k = 0; k < pieces.size(); ++k) {
                if (k) out.push_back(' ');
                for (size_t b = 0; b < pieces[k].size; ++b) {
                    unsigned char c = static_cast<unsigned char>(v[pieces[k].begin + b]);
                    out.push_back(hex[c >> 4]);
                    out.push_back(hex[c & 15]);
                }
            }
            out.push_back('\n');
        }
    } else if (mode == "encode" || mode == "markup") {
        if (ranks.empty()) return usage("--ranks is required");
        auto tok = Tokenizer::load(ranks, specials, LoadOptions{*pattern, 0});
        if (!tok) {
            std::fprintf(stderr, "tok_dump: %s\n", tok.error().c_str());
            return 1;
        }
        auto t1 = std::chrono::steady_clock::now();
        load_secs = std::chrono::duration<double>(t1 - t0).count();
        t0 = t1;
        (void)char_class(0);  // build the class table outside the timed part
        std::vector<Token> ids;
        for (const std::string &t : texts) {
            ids.clear();
            if (mode == "markup")
                tok->encode_markup(t, ids);
            else
                tok->encode(t, ids);
            n_tokens += ids.size();
            for (size_t k = 0; k < ids.size(); ++k) {
                if (k) out.push_back(' ');
                out += std::to_string(ids[k]);
            }
            out.push_back('\n');
        }
    } else {
        return usage("unknown mode");
    }
    auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (bench) {
        std::fprintf(stderr, "tok_dump: load %.3f s; %zu texts, %zu bytes, %zu %s in %.3f s (%.1f MB/s)\n",
                     load_secs, texts.size(), input.size(), n_tokens, mode == "split" ? "pieces" : "tokens", secs,
                     input.size() / 1e6 / (secs > 0 ? secs : 1e-9));
    }
    return 0;
}
