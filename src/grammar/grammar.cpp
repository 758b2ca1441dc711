// The grammar matcher (see grammar.h).
#include "grammar/grammar.h"

#include <algorithm>

namespace sluice::grammar {

namespace {

// Str phases: 0 before the opening quote, 1 body, 2 after a backslash,
// 3..6 hex digits of \u still to come (6 - a + 1), kUtf8 + ... a UTF-8
// sequence: remaining continuation bytes * 8 + range of the next one.
enum : int32_t { kStrOpen = 0, kStrBody = 1, kStrEsc = 2, kStrHex = 3, kUtf8 = 16 };
// Range of the next continuation byte (Unicode Table 3-7).
constexpr uint8_t kLo[] = {0x80, 0xA0, 0x80, 0x90, 0x80};
constexpr uint8_t kHi[] = {0xBF, 0xBF, 0x9F, 0xBF, 0x8F};

// Num phases; accepting: 2, 3, 5, 8.
// Two exponent digits keep every number finite as a double (at most ~1e115).
constexpr int32_t kMaxIntDigits = 16, kMaxFracDigits = 16, kMaxExpDigits = 2;
bool num_accepting(int32_t a) { return a == 2 || a == 3 || a == 5 || a == 8; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

constexpr uint32_t kInf = UINT32_MAX;
uint32_t sat_add(uint64_t a, uint64_t b) { return (uint32_t)std::min<uint64_t>(a + b, kInf); }
uint32_t sat_mul(uint64_t a, uint64_t b) { return (uint32_t)std::min<uint64_t>(a * b, kInf); }

// Shortest output per node, by relaxation to a fixed point (the schema
// compiler builds a DAG, but a cycle would only leave its nodes at kInf).
std::vector<uint32_t> node_minimums(const Grammar &g) {
    std::vector<uint32_t> mn(g.nodes.size(), kInf);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < g.nodes.size(); i++) {
            const Node &n = g.nodes[i];
            uint32_t v = kInf;
            switch (n.kind) {
            case Kind::lit: v = (uint32_t)n.lit.size(); break;
            case Kind::str: v = 2; break;
            case Kind::num: v = 1; break;
            case Kind::seq:
                v = 0;
                for (int32_t k : n.kids) v = sat_add(v, mn[(size_t)k]);
                break;
            case Kind::alt:
                for (int32_t k : n.kids) v = std::min(v, mn[(size_t)k]);
                break;
            case Kind::list: {
                const uint32_t item = mn[(size_t)n.item];
                v = n.min_items == 0 ? 2 : sat_add(sat_mul(n.min_items, sat_add(item, 1)), 1);  // "[" (item ",")* item "]"
                break;
            }
            }
            if (v < mn[i]) mn[i] = v, changed = true;
        }
    }
    return mn;
}

void normalize(std::vector<Stack> *v) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
}

}  // namespace

Matcher::Matcher(const Grammar *g)
    : g_(g), node_min_(std::make_shared<const std::vector<uint32_t>>(node_minimums(*g))) {
    if (g_->root >= 0) closure(Stack{Frame{g_->root, 0, 0}}, &stacks_);
    normalize(&stacks_);
}

// Brings a stack to a state where its top frame consumes bytes itself
// (or the stack is empty: complete). Alternatives fork.
void Matcher::closure(Stack s, std::vector<Stack> *out) const {
    for (;;) {
        if (s.empty()) return out->push_back(std::move(s));
        Frame &f = s.back();
        const Node &n = g_->nodes[(size_t)f.node];
        switch (n.kind) {
        case Kind::lit:
            if ((size_t)f.a < n.lit.size()) return out->push_back(std::move(s));
            s.pop_back();
            continue;
        case Kind::str: return out->push_back(std::move(s));
        case Kind::num:
            if (num_accepting(f.a)) {
                Stack done = s;
                done.pop_back();
                closure(std::move(done), out);
            }
            return out->push_back(std::move(s));
        case Kind::seq:
            if ((size_t)f.a < n.kids.size()) {
                int32_t kid = n.kids[(size_t)f.a++];
                s.push_back(Frame{kid, 0, 0});
                continue;
            }
            s.pop_back();
            continue;
        case Kind::alt: {
            s.pop_back();
            for (int32_t kid : n.kids) {
                Stack c = s;
                c.push_back(Frame{kid, 0, 0});
                closure(std::move(c), out);
            }
            return;
        }
        case Kind::list:
            if (f.a == 1) {  // after the open bracket: an item, or the close
                if ((uint32_t)f.b < n.max_items) {
                    Stack c = s;
                    c.back().a = 2;
                    c.back().b++;
                    c.push_back(Frame{n.item, 0, 0});
                    closure(std::move(c), out);
                }
                if ((uint32_t)f.b >= n.min_items) out->push_back(std::move(s));
                return;
            }
            if (f.a == 3) {  // after a separator: an item
                f.a = 2;
                f.b++;
                s.push_back(Frame{n.item, 0, 0});
                continue;
            }
            return out->push_back(std::move(s));
        }
    }
}

// The top frame consumes c; false if it cannot. May pop the frame.
bool Matcher::step_frame(Stack &s, uint8_t c) const {
    Frame &f = s.back();
    const Node &n = g_->nodes[(size_t)f.node];
    switch (n.kind) {
    case Kind::lit:
        if ((uint8_t)n.lit[(size_t)f.a] != c) return false;
        f.a++;
        return true;
    case Kind::str: {
        const bool room = (uint32_t)f.b < n.max_bytes;
        if (f.a == kStrOpen) {
            if (c != '"') return false;
            f.a = kStrBody;
            return true;
        }
        if (f.a == kStrBody) {
            if (c == '"') return s.pop_back(), true;
            if (!room || c < 0x20) return false;
            // An escape is budgeted whole: the backslash only with room
            // for a two-byte escape, 'u' only with room for its four digits.
            if (c == '\\') return (uint32_t)f.b + 2 <= n.max_bytes ? (f.a = kStrEsc, f.b++, true) : false;
            if (c < 0x80) return f.b++, true;
            int rem = 0, range = 0;
            if (c >= 0xC2 && c <= 0xDF) rem = 1;
            else if (c >= 0xE0 && c <= 0xEF) rem = 2, range = c == 0xE0 ? 1 : c == 0xED ? 2 : 0;
            else if (c >= 0xF0 && c <= 0xF4) rem = 3, range = c == 0xF0 ? 3 : c == 0xF4 ? 4 : 0;
            else return false;
            // The whole character must fit in the budget.
            if ((uint32_t)f.b + (uint32_t)rem + 1 > n.max_bytes) return false;
            f.a = kUtf8 + rem * 8 + range;
            f.b++;
            return true;
        }
        if (f.a == kStrEsc) {
            if (c == 'u') {
                if ((uint32_t)f.b + 5 > n.max_bytes) return false;
                f.b++;
                return f.a = kStrHex, true;
            }
            f.b++;
            if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't')
                return f.a = kStrBody, true;
            return false;
        }
        if (f.a >= kStrHex && f.a < kStrHex + 4) {
            if (!is_hex(c)) return false;
            f.b++;
            f.a = f.a == kStrHex + 3 ? kStrBody : f.a + 1;
            return true;
        }
        // UTF-8 continuation (its bytes were budgeted with the lead byte).
        const int rem = (f.a - kUtf8) / 8, range = (f.a - kUtf8) % 8;
        if (c < kLo[range] || c > kHi[range]) return false;
        f.b++;
        f.a = rem == 1 ? kStrBody : kUtf8 + (rem - 1) * 8;
        return true;
    }
    case Kind::num:
        switch (f.a) {
        case 0:
            if (c == '-') return f.a = 1, true;
            [[fallthrough]];
        case 1:
            if (c == '0') return f.a = 3, f.b = 1, true;
            if (c >= '1' && c <= '9') return f.a = 2, f.b = 1, true;
            return false;
        case 2:
            if (is_digit(c)) return f.b < kMaxIntDigits ? (f.b++, true) : false;
            [[fallthrough]];
        case 3:
            if (n.integer) return false;
            if (c == '.') return f.a = 4, f.b = 0, true;
            if (c == 'e' || c == 'E') return f.a = 6, f.b = 0, true;
            return false;
        case 4:
            if (is_digit(c)) return f.a = 5, f.b = 1, true;
            return false;
        case 5:
            if (is_digit(c)) return f.b < kMaxFracDigits ? (f.b++, true) : false;
            if (c == 'e' || c == 'E') return f.a = 6, f.b = 0, true;
            return false;
        case 6:
            if (c == '+' || c == '-') return f.a = 7, true;
            [[fallthrough]];
        case 7:
            if (is_digit(c)) return f.a = 8, f.b = 1, true;
            return false;
        case 8:
            if (is_digit(c)) return f.b < kMaxExpDigits ? (f.b++, true) : false;
            return false;
        }
        return false;
    case Kind::list:
        if (f.a == 0) return c == (uint8_t)n.open ? (f.a = 1, true) : false;
        if (f.a == 1) return c == (uint8_t)n.close ? (s.pop_back(), true) : false;
        if (f.a == 2) {
            if (c == ',' && (uint32_t)f.b < n.max_items) return f.a = 3, true;
            if (c == (uint8_t)n.close && (uint32_t)f.b >= n.min_items) return s.pop_back(), true;
        }
        return false;
    case Kind::seq:
    case Kind::alt: return false;  // never on top after closure
    }
    return false;
}

bool Matcher::step_into(const std::vector<Stack> &from, uint8_t byte, std::vector<Stack> *to) const {
    to->clear();
    for (const Stack &s : from) {
        if (s.empty()) continue;
        Stack c = s;
        if (step_frame(c, byte)) closure(std::move(c), to);
    }
    if (to->size() > 1) normalize(to);
    return !to->empty();
}

bool Matcher::step(uint8_t byte) {
    std::vector<Stack> next;
    if (!step_into(stacks_, byte, &next)) return false;
    stacks_ = std::move(next);
    return true;
}

bool Matcher::step_bytes(const std::string &bytes) {
    std::vector<Stack> cur = stacks_, next;
    for (unsigned char c : bytes) {
        if (!step_into(cur, c, &next)) return false;
        cur.swap(next);
    }
    stacks_ = std::move(cur);
    return true;
}

bool Matcher::accepting() const {
    return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack &s) { return s.empty(); });
}

bool Matcher::finished() const {
    return !stacks_.empty() && std::all_of(stacks_.begin(), stacks_.end(), [](const Stack &s) { return s.empty(); });
}

// Bytes the frame still needs, at least. A frame below the top has handed
// control to the one above it: a seq its remaining children, a list (phase
// 2, its item above) the items still required and the close.
uint32_t Matcher::frame_cost(const Frame &f) const {
    const Node &n = g_->nodes[(size_t)f.node];
    const std::vector<uint32_t> &mn = *node_min_;
    switch (n.kind) {
    case Kind::lit: return (uint32_t)(n.lit.size() - (size_t)f.a);
    case Kind::str:
        if (f.a == kStrOpen) return 2;
        if (f.a == kStrBody) return 1;
        if (f.a == kStrEsc) return 2;
        if (f.a >= kStrHex && f.a < kStrHex + 4) return (uint32_t)(4 - (f.a - kStrHex)) + 1;
        return (uint32_t)((f.a - kUtf8) / 8) + 1;
    case Kind::num:
        return num_accepting(f.a) ? 0 : 1;
    case Kind::seq: {
        uint32_t v = 0;
        for (size_t k = (size_t)f.a; k < n.kids.size(); k++) v = sat_add(v, mn[(size_t)n.kids[k]]);
        return v;
    }
    case Kind::alt: return kInf;  // never on a stack after closure
    case Kind::list: {
        const uint32_t item = mn[(size_t)n.item];
        if (f.a == 0) return mn[(size_t)f.node];
        const uint32_t have = (uint32_t)f.b, need = n.min_items > have ? n.min_items - have : 0;
        if (f.a == 1 && need > 0) return sat_add(sat_mul(need, sat_add(item, 1)), 0);  // items, separators, "]"
        return sat_add(sat_mul(need, sat_add(item, 1)), 1);  // ("," item)* "]"
    }
    }
    return kInf;
}

uint32_t Matcher::min_bytes_to_accept(const std::vector<Stack> &stacks) const {
    uint32_t best = kInf;
    for (const Stack &s : stacks) {
        uint32_t v = 0;
        for (size_t i = 0; i < s.size() && v < best; i++) v = sat_add(v, frame_cost(s[i]));
        best = std::min(best, v);
    }
    return best;
}

bool Matcher::in_plain_string(uint32_t *room) const {
    if (stacks_.size() != 1 || stacks_[0].empty()) return false;
    const Frame &f = stacks_[0].back();
    const Node &n = g_->nodes[(size_t)f.node];
    if (n.kind != Kind::str || f.a != kStrBody) return false;
    *room = n.max_bytes - (uint32_t)f.b;
    return true;
}

}  // namespace sluice::grammar
