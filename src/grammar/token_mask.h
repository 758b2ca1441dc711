// Which tokens a grammar state allows: the token mask.
//
// Built once per vocabulary: every usable token's bytes, sorted, with the
// common-prefix length of neighbours. A mask walks that order once: the
// matcher state after each prefix is kept per depth, a token sharing a
// prefix with the previous one resumes from there, and a byte the state
// refuses skips every following token with that prefix. Inside a string
// body (most of a JSON output's tokens) the walk is not needed: tokens
// that are plain string text (valid UTF-8, no quote, backslash or control
// byte) are allowed by length alone, and only the rest are walked.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace sluice::grammar {

class TokenTable {
public:
    // bytes[id]: the token's bytes; usable[id]: false for control tokens and
    // ids without text (they are never allowed by the grammar).
    TokenTable(std::vector<std::string> bytes, const std::vector<bool> &usable);
    int32_t vocab() const { return (int32_t)bytes_.size(); }
    const std::string &bytes(int32_t id) const { return bytes_[(size_t)id]; }

    // allowed[id] = 1 for every token whose bytes the matcher accepts in
    // full; the caller adds end tokens when m.accepting(). Returns the count.
    // Finish-now: with max_after set, a token is allowed only if the value
    // can be completed in at most max_after more bytes after it
    // (Matcher::min_bytes_to_accept). *min_after, if given, receives the
    // least such count over every token the grammar accepts, limit or not.
    static constexpr uint32_t kNoLimit = UINT32_MAX;
    size_t mask(const Matcher &m, std::vector<uint8_t> *allowed, uint32_t max_after = kNoLimit,
                uint32_t *min_after = nullptr) const;
    // Every byte value is a token of its own: then a completion of n bytes
    // takes at most n tokens, and the finish-now bound holds in tokens.
    bool has_all_bytes() const { return all_bytes_; }

private:
    struct Order {
        std::vector<int32_t> ids;  // sorted by bytes
        std::vector<uint32_t> lcp;  // lcp[i]: common prefix of ids[i-1] and ids[i]
    };
    static Order make_order(std::vector<int32_t> ids, const std::vector<std::string> &bytes);
    size_t walk(const Matcher &m, const Order &o, std::vector<uint8_t> *allowed, uint32_t max_after,
                uint32_t *min_after) const;

    std::vector<std::string> bytes_;
    Order all_, unsafe_;
    std::vector<int32_t> safe_by_len_;  // plain string text, shortest first
    std::vector<uint32_t> safe_len_;
    bool all_bytes_ = false;
    mutable std::vector<std::vector<Stack>> depth_;  // walk scratch
};

}  // namespace sluice::grammar
