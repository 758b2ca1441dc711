#include "tokenizer/pretokenize.h"

#include "tokenizer/unicode.h"

namespace sluice::tok {
namespace {

constexpr size_t npos = static_cast<size_t>(-1);

struct Ch {
    uint32_t cp;
    uint8_t f;    // CharClass bits
    uint8_t len;  // bytes
};

// One matcher per pattern; the alternatives are member functions returning
// the end offset of their match at `s`, or npos. Each comment quotes the
// alternative it implements and says how backtracking resolves it.
template <Pattern P>
class Matcher {
public:
    Matcher(std::string_view t) : b_(reinterpret_cast<const unsigned char *>(t.data())), n_(t.size()) {}

    size_t match(size_t s) const {
        size_t e;
        if constexpr (P == Pattern::cl100k) {
            if ((e = contraction(s)) != 0) return s + e;
            if ((e = letters_any(s)) != npos) return e;
        } else {
            if constexpr (P == Pattern::kimi)
                if ((e = han_run(s)) != npos) return e;
            if ((e = letters_lower(s)) != npos) return e;
            if ((e = letters_upper(s)) != npos) return e;
        }
        if ((e = numbers(s)) != npos) return e;
        if ((e = punct(s)) != npos) return e;
        if ((e = space_newline(s)) != npos) return e;
        if ((e = space_not_before_text(s)) != npos) return e;
        if ((e = space_run(s)) != npos) return e;
        // Unreachable: every character is a letter, number, space or else
        // matched by punct(). Keep the split total anyway.
        return s + at(s).len;
    }

private:
    const unsigned char *b_;
    size_t n_;

    Ch at(size_t i) const {
        Ch c;
        c.len = static_cast<uint8_t>(decode_utf8(b_ + i, b_ + n_, c.cp));
        c.f = char_class(c.cp);
        return c;
    }

    // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (Kimi: && [^\p{Han}])
    static bool upperish(const Ch &c) {
        if constexpr (P == Pattern::kimi) return (c.f & (kUpperish | kHan)) == kUpperish;
        return c.f & kUpperish;
    }
    // [\p{Ll}\p{Lm}\p{Lo}\p{M}] (Kimi: && [^\p{Han}])
    static bool lowerish(const Ch &c) {
        if constexpr (P == Pattern::kimi) return (c.f & (kLowerish | kHan)) == kLowerish;
        return c.f & kLowerish;
    }
    // [^\r\n\p{L}\p{N}]
    static bool prefix_class(const Ch &c) {
        return !(c.f & (kLetter | kNumber)) && c.cp != '\r' && c.cp != '\n';
    }
    // [^\s\p{L}\p{N}]
    static bool punct_class(const Ch &c) { return !(c.f & (kSpace | kLetter | kNumber)); }

    // Simple case folding restricted to what the contraction letters can
    // match: Rust's and Python's (?i) fold U+017F LATIN SMALL LETTER LONG S
    // to 's' (CaseFolding.txt), so "'ſ" is a contraction.
    static uint32_t fold(uint32_t c) {
        if (c >= 'A' && c <= 'Z') return c + 32;
        if (c == 0x17F) return 's';
        return c;
    }

    // (?i:'s|'t|'re|'ve|'m|'ll|'d): byte length of the match at i, or 0.
    size_t contraction(size_t i) const {
        if (i >= n_ || b_[i] != '\'' || i + 1 >= n_) return 0;
        Ch c1 = at(i + 1);
        switch (fold(c1.cp)) {
        case 's':
        case 't':
        case 'm':
        case 'd': return 1 + c1.len;
        case 'r':
        case 'v':
        case 'l': {
            size_t j = i + 1 + c1.len;
            if (j >= n_) return 0;
            Ch c2 = at(j);
            uint32_t want = fold(c1.cp) == 'l' ? 'l' : 'e';
            return fold(c2.cp) == want ? 1 + c1.len + c2.len : 0;
        }
        default: return 0;
        }
    }

    // Kimi: [\p{Han}]+
    size_t han_run(size_t s) const {
        size_t j = s;
        while (j < n_) {
            Ch c = at(j);
            if (!(c.f & kHan)) break;
            j += c.len;
        }
        return j > s ? j : npos;
    }

    // [^\r\n\p{L}\p{N}]? UPPER* LOWER+ CONTRACTION?
    // Tried first with the optional prefix taken, then without. UPPER* is
    // greedy; if no LOWER follows, it gives characters back until one that
    // is also LOWER (Lm, Lo, M) can start LOWER+, so the match then ends
    // right after the last LOWER-class character of the UPPER run.
    size_t letters_lower(size_t s) const {
        for (int with_prefix = 1; with_prefix >= 0; --with_prefix) {
            size_t i = s;
            if (with_prefix) {
                Ch c = at(i);
                if (!prefix_class(c)) continue;
                i += c.len;
            }
            size_t j = i, last_lower_end = npos;
            while (j < n_) {
                Ch c = at(j);
                if (!upperish(c)) break;
                j += c.len;
                if (lowerish(c)) last_lower_end = j;
            }
            size_t end = npos;
            if (j < n_ && lowerish(at(j))) {
                end = j;
                while (end < n_) {
                    Ch c = at(end);
                    if (!lowerish(c)) break;
                    end += c.len;
                }
            } else {
                end = last_lower_end;
            }
            if (end == npos) continue;
            return end + contraction(end);
        }
        return npos;
    }

    // [^\r\n\p{L}\p{N}]? UPPER+ LOWER* CONTRACTION?  (LOWER* cannot fail)
    size_t letters_upper(size_t s) const {
        for (int with_prefix = 1; with_prefix >= 0; --with_prefix) {
            size_t i = s;
            if (with_prefix) {
                Ch c = at(i);
                if (!prefix_class(c)) continue;
                i += c.len;
            }
            size_t j = i;
            while (j < n_) {
                Ch c = at(j);
                if (!upperish(c)) break;
                j += c.len;
            }
            if (j == i) continue;
            while (j < n_) {
                Ch c = at(j);
                if (!lowerish(c)) break;
                j += c.len;
            }
            return j + contraction(j);
        }
        return npos;
    }

    // cl100k: [^\r\n\p{L}\p{N}]?\p{L}+
    size_t letters_any(size_t s) const {
        for (int with_prefix = 1; with_prefix >= 0; --with_prefix) {
            size_t i = s;
            if (with_prefix) {
                Ch c = at(i);
                if (!prefix_class(c)) continue;
                i += c.len;
            }
            size_t j = i;
            while (j < n_) {
                Ch c = at(j);
                if (!(c.f & kLetter)) break;
                j += c.len;
            }
            if (j > i) return j;
        }
        return npos;
    }

    // \p{N}{1,3}
    size_t numbers(size_t s) const {
        size_t j = s;
        for (int k = 0; k < 3 && j < n_; ++k) {
            Ch c = at(j);
            if (!(c.f & kNumber)) break;
            j += c.len;
        }
        return j > s ? j : npos;
    }

    // ` ?[^\s\p{L}\p{N}]+[\r\n]*` (o200k: `[\r\n/]*`). Without the space the
    // class cannot match a space, so a space not followed by the class fails.
    size_t punct(size_t s) const {
        size_t i = s;
        if (b_[i] == ' ') ++i;
        size_t j = i;
        while (j < n_) {
            Ch c = at(j);
            if (!punct_class(c)) break;
            j += c.len;
        }
        if (j == i) return npos;
        while (j < n_ && (b_[j] == '\r' || b_[j] == '\n' || (P == Pattern::o200k && b_[j] == '/'))) ++j;
        return j;
    }

    // \s*[\r\n]+ : \s* backtracks to the last CR/LF of the space run, and
    // [\r\n]+ then takes that one character (what follows is not CR/LF).
    size_t space_newline(size_t s) const {
        size_t j = s, end = npos;
        while (j < n_) {
            Ch c = at(j);
            if (!(c.f & kSpace)) break;
            j += c.len;
            if (c.cp == '\r' || c.cp == '\n') end = j;
        }
        return end;
    }

    // \s+(?!\S) : the whole space run at the end of the text; otherwise the
    // run minus its last character (which then begins the next piece), and
    // no match for a single space before non-space.
    size_t space_not_before_text(size_t s) const {
        size_t j = s, last = s, count = 0;
        while (j < n_) {
            Ch c = at(j);
            if (!(c.f & kSpace)) break;
            last = j;
            j += c.len;
            ++count;
        }
        if (count == 0) return npos;
        if (j == n_) return j;
        return count >= 2 ? last : npos;
    }

    // \s+
    size_t space_run(size_t s) const {
        size_t j = s;
        while (j < n_) {
            Ch c = at(j);
            if (!(c.f & kSpace)) break;
            j += c.len;
        }
        return j > s ? j : npos;
    }
};

template <Pattern P>
void split_with(std::string_view text, std::vector<Piece> &out) {
    Matcher<P> m(text);
    size_t s = 0;
    while (s < text.size()) {
        size_t e = m.match(s);
        out.push_back({s, e - s});
        s = e;
    }
}

}  // namespace

const char *pattern_name(Pattern p) {
    switch (p) {
    case Pattern::kimi: return "kimi";
    case Pattern::o200k: return "o200k_base";
    case Pattern::cl100k: return "cl100k_base";
    }
    return "?";
}

std::optional<Pattern> pattern_from_name(std::string_view name) {
    if (name == "kimi") return Pattern::kimi;
    if (name == "o200k_base" || name == "o200k") return Pattern::o200k;
    if (name == "cl100k_base" || name == "cl100k") return Pattern::cl100k;
    return std::nullopt;
}

const char *pattern_regex(Pattern p) {
    switch (p) {
    case Pattern::kimi:
        return R"([\p{Han}]+)"
               R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
               R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
               R"(|\p{N}{1,3})"
               R"(| ?[^\s\p{L}\p{N}]+[\r\n]*)"
               R"(|\s*[\r\n]+)"
               R"(|\s+(?!\S))"
               R"(|\s+)";
    case Pattern::o200k:
        return R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
               R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
               R"(|\p{N}{1,3})"
               R"(| ?[^\s\p{L}\p{N}]+[\r\n/]*)"
               R"(|\s*[\r\n]+)"
               R"(|\s+(?!\S))"
               R"(|\s+)";
    case Pattern::cl100k:
        return R"((?i:'s|'t|'re|'ve|'m|'ll|'d))"
               R"(|[^\r\n\p{L}\p{N}]?\p{L}+)"
               R"(|\p{N}{1,3})"
               R"(| ?[^\s\p{L}\p{N}]+[\r\n]*)"
               R"(|\s*[\r\n]+)"
               R"(|\s+(?!\S))"
               R"(|\s+)";
    }
    return "";
}

void pretokenize(std::string_view text, Pattern p, std::vector<Piece> &out) {
    switch (p) {
    case Pattern::kimi: split_with<Pattern::kimi>(text, out); break;
    case Pattern::o200k: split_with<Pattern::o200k>(text, out); break;
    case Pattern::cl100k: split_with<Pattern::cl100k>(text, out); break;
    }
}

}  // namespace sluice::tok
