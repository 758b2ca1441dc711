// The rank table and tiktoken's byte-pair merge.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::tok {

using Token = int32_t;
constexpr Token kNoRank = INT32_MAX;

// Byte strings -> rank, open addressing over one arena. Lookups take a
// pointer and a length so the merge loop never builds a std::string.
class RankTable {
public:
    // Builds from (bytes, rank) pairs; bytes must be distinct (the loader
    // has checked). Ranks index the decode table, so they must be < n + gaps.
    void build(std::vector<std::pair<std::string, Token>> entries);

    Token find(const unsigned char *p, size_t n) const {
        if (n == 1) return byte_rank_[p[0]];
        if (n == 2) return pair_rank_[(size_t{p[0]} << 8) | p[1]];
        return find_slow(p, n);
    }
    Token find(std::string_view s) const {
        return find(reinterpret_cast<const unsigned char *>(s.data()), s.size());
    }
    // Bytes of a rank, or an empty view if no token has it.
    std::string_view bytes_of(Token rank) const;
    size_t size() const { return entries_.size(); }

    // tiktoken's merge: start from single bytes and repeatedly merge the
    // adjacent pair of lowest rank (leftmost on ties). Appends the ids.
    // Every single byte must have a rank (the loader checks). Long pieces
    // use a heap with the same choice order instead of the O(n^2) scan.
    void merge(const unsigned char *p, size_t n, std::vector<Token> &out) const;
    // Both strategies, exposed so tests can prove them equal.
    void merge_linear(const unsigned char *p, size_t n, std::vector<Token> &out) const;
    void merge_heap(const unsigned char *p, size_t n, std::vector<Token> &out) const;

private:
    struct Entry {
        uint32_t off, len;
        Token rank;
    };
    Token find_slow(const unsigned char *p, size_t n) const;

    std::string arena_;
    std::vector<Entry> entries_;
    // (hash tag << 32) | (entry index + 1); 0 = empty. The tag rejects most
    // misses (the common case while merging) without touching the entry.
    std::vector<uint64_t> slots_;
    uint64_t mask_ = 0;
    std::vector<uint32_t> by_rank_;  // rank -> entry index + 1
    std::vector<Token> pair_rank_;   // 65536 two-byte tokens
    Token byte_rank_[256];
};

}  // namespace sluice::tok
