// A byte-level grammar for JSON output, and its incremental matcher.
//
// The grammar is a small graph of nodes (literals, JSON strings and
// numbers, sequences, alternatives, bracketed lists); recursion (nested
// values) lives on an explicit stack, so the matcher is a pushdown
// automaton. anyOf branches that share a prefix are followed together: the
// state is a set of stacks, kept sorted and deduplicated. Every node bounds
// its length (string bytes, list items, number digits), so every output the
// grammar allows is finite, and a generation that follows the mask always
// completes once the budget allows.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sluice::grammar {

enum class Kind : uint8_t { lit, str, num, seq, alt, list };

struct Node {
    Kind kind = Kind::lit;
    std::string lit;          // lit: the bytes
    std::vector<int32_t> kids;  // seq / alt
    int32_t item = -1;        // list: the item node
    char open = 0, close = 0;  // list: brackets
    bool integer = false;     // num: no fraction or exponent
    uint32_t min_items = 0, max_items = 0;  // list
    uint32_t max_bytes = 0;   // str: body bytes (escapes counted as written)
};

struct Grammar {
    std::vector<Node> nodes;
    int32_t root = -1;
    int32_t add(Node n) {
        nodes.push_back(std::move(n));
        return (int32_t)nodes.size() - 1;
    }
};

struct Frame {
    int32_t node;
    int32_t a;  // phase / position / next child
    int32_t b;  // count (bytes, items, digits)
    bool operator==(const Frame &o) const { return node == o.node && a == o.a && b == o.b; }
    bool operator<(const Frame &o) const {
        return node != o.node ? node < o.node : a != o.a ? a < o.a : b < o.b;
    }
};
using Stack = std::vector<Frame>;

// The matcher's state: the stacks still alive. An empty stack means the
// value is complete.
class Matcher {
public:
    explicit Matcher(const Grammar *g);
    const Grammar *grammar() const { return g_; }

    // Advances by one byte; false (state unchanged) if no stack accepts it.
    bool step(uint8_t byte);
    // Advances by bytes; false (state unchanged) if any byte is refused.
    bool step_bytes(const std::string &bytes);
    // The output so far is a complete value.
    bool accepting() const;
    // Complete, and no byte can follow.
    bool finished() const;
    bool dead() const { return stacks_.empty(); }

    // The fewest bytes that complete the value from `stacks` (0: complete
    // already; UINT32_MAX: dead). The finish-now mode of the token mask
    // (token_mask.h) keeps this within the tokens a generation has left.
    uint32_t min_bytes_to_accept(const std::vector<Stack> &stacks) const;
    uint32_t min_bytes_to_accept() const { return min_bytes_to_accept(stacks_); }

    // For the token mask: the single stack's top when it is a plain string
    // body (no escape or UTF-8 sequence pending): *room = bytes it may still
    // take. False otherwise.
    bool in_plain_string(uint32_t *room) const;

    const std::vector<Stack> &stacks() const { return stacks_; }
    void set_stacks(std::vector<Stack> s) { stacks_ = std::move(s); }
    // One step from `from` into `to` (reuses to's storage); false if dead.
    bool step_into(const std::vector<Stack> &from, uint8_t byte, std::vector<Stack> *to) const;

private:
    void closure(Stack s, std::vector<Stack> *out) const;
    bool step_frame(Stack &s, uint8_t c) const;
    uint32_t frame_cost(const Frame &f) const;
    const Grammar *g_;
    std::vector<Stack> stacks_;
    // Per node: the length of its shortest output (shared by copies).
    std::shared_ptr<const std::vector<uint32_t>> node_min_;
};

}  // namespace sluice::grammar
