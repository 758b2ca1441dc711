// Pre-tokenization: splitting text into the pieces that BPE then encodes.
//
// Each supported pattern is a hand-written matcher that reproduces, piece for
// piece, what a backtracking regex engine (tiktoken's fancy-regex, Python's
// `regex`) returns for that pattern: leftmost match, alternatives tried in
// order, greedy quantifiers giving back one character at a time. No regex
// library runs in the hot path. The matchers are proven against tiktoken
// (o200k_base, cl100k_base) and against Python's `regex` (all three) by the
// tests in tests/tokenizer.
#pragma once
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace sluice::tok {

enum class Pattern {
    kimi,    // Kimi-Linear, K2, K3 (TOKENIZER.md §3)
    o200k,   // OpenAI o200k_base
    cl100k,  // OpenAI cl100k_base
};

// "kimi", "o200k_base", "cl100k_base".
const char *pattern_name(Pattern p);
// Accepts the names above and "o200k"/"cl100k".
std::optional<Pattern> pattern_from_name(std::string_view name);
// The exact regex the matcher implements, as the releases ship it.
const char *pattern_regex(Pattern p);

struct Piece {
    size_t begin;
    size_t size;
};

// Splits `text`, which must be valid UTF-8 (see sanitize_utf8), appending
// the pieces to `out`. The pieces tile the text: every byte is in exactly
// one piece, in order.
void pretokenize(std::string_view text, Pattern p, std::vector<Piece> &out);

}  // namespace sluice::tok
