// Unicode facts the pre-tokenization patterns depend on, and UTF-8 handling.
//
// Sources (never a hand-picked table of ranges):
//  - general categories (L*, M*, N*, Z*) come from utf8proc;
//  - \s is Unicode's White_Space property (PropList.txt), which is exactly
//    categories Zs/Zl/Zp plus U+0009..U+000D and U+0085; that is what Rust's
//    regex crate (tiktoken) and Python's `regex` module use for \s;
//  - \p{Han} is Script=Han, generated from Unicode's Scripts.txt into
//    han_ranges.inc (utf8proc has no Script property).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::tok {

// Per-code-point class bits.
enum CharClass : uint8_t {
    kLetter = 1 << 0,   // \p{L}
    kNumber = 1 << 1,   // \p{N}
    kUpperish = 1 << 2, // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
    kLowerish = 1 << 3, // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    kSpace = 1 << 4,    // \s (White_Space)
    kHan = 1 << 5,      // \p{Han} (Script=Han)
};

// Class bits of a code point (0 for values above U+10FFFF). Lock-free after
// the first call, which builds a two-stage table from utf8proc (~1 ms).
uint8_t char_class(uint32_t cp);

// The Unicode version of the Han table (Scripts-X.txt) and of utf8proc.
const char *han_unicode_version();
const char *utf8proc_unicode_version();

// True if s is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF).
bool is_valid_utf8(std::string_view s);

// Replaces every ill-formed subsequence with U+FFFD using the "maximal
// subpart" practice of the Unicode Standard (ch. 3, U+FFFD substitution),
// which is also what the WHATWG TextDecoder and Python's
// bytes.decode('utf-8', 'replace') do. Valid input is returned unchanged.
std::string sanitize_utf8(std::string_view s);

// Decodes one code point of *valid* UTF-8 at p (p < end); returns its length.
inline size_t decode_utf8(const unsigned char *p, const unsigned char *end, uint32_t &cp) {
    unsigned char b = p[0];
    if (b < 0x80) { cp = b; return 1; }
    if (b < 0xE0 && end - p >= 2) { cp = ((b & 0x1Fu) << 6) | (p[1] & 0x3Fu); return 2; }
    if (b < 0xF0 && end - p >= 3) {
        cp = ((b & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
        return 3;
    }
    if (end - p >= 4) {
        cp = ((b & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
        return 4;
    }
    cp = 0xFFFD;  // truncated: cannot happen on validated input
    return 1;
}

void append_utf8(std::string &out, uint32_t cp);

// Length of the longest suffix of s that is a proper, still-completable
// prefix of a UTF-8 sequence (0..3). A streaming decoder holds these back.
size_t incomplete_utf8_tail(std::string_view s);

}  // namespace sluice::tok
