#include "tokenizer/bpe.h"

#include <cstring>
#include <functional>
#include <queue>

namespace sluice::tok {
namespace {

// Pieces longer than this use the heap merge. The linear scan is faster for
// the short pieces that make up nearly all text; the heap bounds the cost of
// pathological inputs (a megabyte without spaces) at O(n log n).
constexpr size_t kLinearMax = 128;

inline uint64_t mix(uint64_t h) {
    h ^= h >> 31;
    h *= 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    return h;
}

inline uint64_t hash_bytes(const unsigned char *p, size_t n) {
    uint64_t h = 0xA0761D6478BD642Full ^ (n * 0xE7037ED1A0B428DBull);
    while (n >= 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        h = mix(h ^ v) * 0xBF58476D1CE4E5B9ull;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    std::memcpy(&v, p, n);
    return mix(mix(h ^ v) * 0x94D049BB133111EBull);
}

}  // namespace

void RankTable::build(std::vector<std::pair<std::string, Token>> entries) {
    arena_.clear();
    entries_.clear();
    size_t total = 0;
    Token max_rank = -1;
    for (auto &e : entries) {
        total += e.first.size();
        if (e.second > max_rank) max_rank = e.second;
    }
    arena_.reserve(total);
    entries_.reserve(entries.size());
    for (auto &e : entries) {
        entries_.push_back({static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(e.first.size()), e.second});
        arena_ += e.first;
    }
    size_t cap = 16;
    while (cap < entries_.size() * 2) cap <<= 1;
    slots_.assign(cap, 0);
    mask_ = cap - 1;
    by_rank_.assign(static_cast<size_t>(max_rank + 1), 0);
    pair_rank_.assign(65536, kNoRank);
    for (Token &r : byte_rank_) r = kNoRank;
    for (uint32_t i = 0; i < entries_.size(); ++i) {
        const Entry &e = entries_[i];
        const auto *p = reinterpret_cast<const unsigned char *>(arena_.data()) + e.off;
        uint64_t hv = hash_bytes(p, e.len);
        size_t h = hv & mask_;
        while (slots_[h] != 0) h = (h + 1) & mask_;
        slots_[h] = (hv & 0xFFFFFFFF00000000ull) | (i + 1);
        by_rank_[static_cast<size_t>(e.rank)] = i + 1;
        if (e.len == 1) byte_rank_[p[0]] = e.rank;
        if (e.len == 2) pair_rank_[(size_t{p[0]} << 8) | p[1]] = e.rank;
    }
}

Token RankTable::find_slow(const unsigned char *p, size_t n) const {
    if (slots_.empty()) return kNoRank;
    uint64_t hv = hash_bytes(p, n);
    uint64_t tag = hv & 0xFFFFFFFF00000000ull;
    size_t h = hv & mask_;
    const auto *base = reinterpret_cast<const unsigned char *>(arena_.data());
    for (;;) {
        uint64_t s = slots_[h];
        if (s == 0) return kNoRank;
        if ((s & 0xFFFFFFFF00000000ull) == tag) {
            const Entry &e = entries_[(s & 0xFFFFFFFFu) - 1];
            if (e.len == n && std::memcmp(base + e.off, p, n) == 0) return e.rank;
        }
        h = (h + 1) & mask_;
    }
}

std::string_view RankTable::bytes_of(Token rank) const {
    if (rank < 0 || static_cast<size_t>(rank) >= by_rank_.size() || by_rank_[static_cast<size_t>(rank)] == 0)
        return {};
    const Entry &e = entries_[by_rank_[static_cast<size_t>(rank)] - 1];
    return std::string_view(arena_).substr(e.off, e.len);
}

void RankTable::merge(const unsigned char *p, size_t n, std::vector<Token> &out) const {
    if (n == 0) return;
    if (n == 1) {
        out.push_back(byte_rank_[p[0]]);
        return;
    }
    if (n <= kLinearMax)
        merge_linear(p, n, out);
    else
        merge_heap(p, n, out);
}

// A transcription of tiktoken's _byte_pair_merge: parts[i] = (start, rank of
// merging part i with part i+1); after each merge only the two neighbouring
// ranks change, and the minimum is found by a scan (strict <: leftmost wins).
void RankTable::merge_linear(const unsigned char *p, size_t n, std::vector<Token> &out) const {
    struct Part {
        uint32_t start;
        Token rank;
    };
    thread_local std::vector<Part> parts;
    parts.clear();
    for (size_t i = 0; i + 1 < n; ++i) parts.push_back({static_cast<uint32_t>(i), find(p + i, 2)});
    parts.push_back({static_cast<uint32_t>(n - 1), kNoRank});
    parts.push_back({static_cast<uint32_t>(n), kNoRank});
    auto rank_of = [&](size_t i) -> Token {
        if (i + 3 >= parts.size()) return kNoRank;
        return find(p + parts[i].start, parts[i + 3].start - parts[i].start);
    };
    for (;;) {
        Token best = kNoRank;
        size_t at = 0;
        for (size_t i = 0; i + 1 < parts.size(); ++i)
            if (parts[i].rank < best) {
                best = parts[i].rank;
                at = i;
            }
        if (best == kNoRank) break;
        if (at > 0) parts[at - 1].rank = rank_of(at - 1);
        parts[at].rank = rank_of(at);
        parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
    for (size_t i = 0; i + 1 < parts.size(); ++i)
        out.push_back(find(p + parts[i].start, parts[i + 1].start - parts[i].start));
}

// The same merge order with a min-heap keyed by (rank, start): the smallest
// rank first and, among equal ranks, the leftmost pair, exactly the choice
// the linear scan makes. Entries made stale by a merge are skipped on pop.
void RankTable::merge_heap(const unsigned char *p, size_t n, std::vector<Token> &out) const {
    struct Node {
        int64_t prev, next;  // byte offsets of neighbouring parts; -1 / n at the ends
        Token rank;          // rank of this part merged with the next
        bool alive;
    };
    std::vector<Node> nodes(n);
    auto end_of = [&](int64_t i) { return nodes[static_cast<size_t>(i)].next; };
    auto pair_rank = [&](int64_t i) -> Token {
        int64_t j = end_of(i);
        if (j >= static_cast<int64_t>(n)) return kNoRank;
        int64_t k = end_of(j);
        return find(p + i, static_cast<size_t>(k - i));
    };
    using Item = std::pair<Token, int64_t>;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
    for (size_t i = 0; i < n; ++i) nodes[i] = {static_cast<int64_t>(i) - 1, static_cast<int64_t>(i) + 1, kNoRank, true};
    for (size_t i = 0; i + 1 < n; ++i) {
        nodes[i].rank = find(p + i, 2);
        if (nodes[i].rank != kNoRank) heap.push({nodes[i].rank, static_cast<int64_t>(i)});
    }
    while (!heap.empty()) {
        auto [r, i] = heap.top();
        heap.pop();
        Node &a = nodes[static_cast<size_t>(i)];
        if (!a.alive || a.rank != r) continue;
        int64_t j = a.next;
        nodes[static_cast<size_t>(j)].alive = false;
        a.next = nodes[static_cast<size_t>(j)].next;
        if (a.next < static_cast<int64_t>(n)) nodes[static_cast<size_t>(a.next)].prev = i;
        a.rank = pair_rank(i);
        if (a.rank != kNoRank) heap.push({a.rank, i});
        if (a.prev >= 0) {
            Node &b = nodes[static_cast<size_t>(a.prev)];
            b.rank = pair_rank(a.prev);
            if (b.rank != kNoRank) heap.push({b.rank, a.prev});
        }
    }
    for (int64_t i = 0; i < static_cast<int64_t>(n); i = nodes[static_cast<size_t>(i)].next)
        out.push_back(find(p + i, static_cast<size_t>(nodes[static_cast<size_t>(i)].next - i)));
}

}  // namespace sluice::tok
