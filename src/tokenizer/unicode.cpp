#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <array>
#include <map>
#include <vector>

namespace sluice::tok {
namespace {

struct HanRange {
    uint32_t lo, hi;
};
constexpr HanRange kHanRanges[] = {
#include "tokenizer/han_ranges.inc"
};

bool is_han(uint32_t cp) {
    for (const HanRange &r : kHanRanges)
        if (cp >= r.lo && cp <= r.hi) return true;
    return false;
}

uint8_t compute_class(uint32_t cp) {
    uint8_t f = 0;
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LT: f = kLetter | kUpperish; break;
    case UTF8PROC_CATEGORY_LL: f = kLetter | kLowerish; break;
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: f = kLetter | kUpperish | kLowerish; break;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME: f = kUpperish | kLowerish; break;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: f = kNumber; break;
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: f = kSpace; break;
    default: break;
    }
    // White_Space also holds five C0 controls and NEL (all category Cc).
    if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85) f |= kSpace;
    if (is_han(cp)) f |= kHan;
    return f;
}

// Two-stage table: 4352 blocks of 256 code points; identical blocks shared.
// Most of the code space is unassigned, so ~100 distinct blocks remain.
struct ClassTable {
    std::array<uint16_t, 0x110000 / 256> stage1{};
    std::vector<uint8_t> stage2;

    ClassTable() {
        std::map<std::array<uint8_t, 256>, uint16_t> seen;
        std::array<uint8_t, 256> block{};
        for (uint32_t b = 0; b < stage1.size(); ++b) {
            for (uint32_t i = 0; i < 256; ++i) block[i] = compute_class(b * 256 + i);
            auto [it, fresh] = seen.try_emplace(block, static_cast<uint16_t>(seen.size()));
            if (fresh) stage2.insert(stage2.end(), block.begin(), block.end());
            stage1[b] = it->second;
        }
    }
};

const ClassTable &table() {
    static const ClassTable t;  // thread-safe one-time initialisation
    return t;
}

constexpr char kReplacement[] = "\xEF\xBF\xBD";

// Expected sequence length for a lead byte and the allowed range of the
// *second* byte (Unicode Table 3-7); 0 for a byte that cannot start one.
inline int lead_info(unsigned char b, unsigned char &lo, unsigned char &hi) {
    lo = 0x80;
    hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;  // excludes surrogates
        return 3;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) lo = 0x90;  // excludes overlongs
        if (b == 0xF4) hi = 0x8F;  // excludes > U+10FFFF
        return 4;
    }
    return 0;
}

// Length of the well-formed sequence at s[i] (>0), or -(maximal subpart
// length) when ill-formed; the caller replaces that subpart with one U+FFFD.
inline long sequence_at(std::string_view s, size_t i) {
    unsigned char lo, hi;
    int need = lead_info(static_cast<unsigned char>(s[i]), lo, hi);
    if (need == 0) return -1;
    size_t j = i + 1;
    for (int k = 1; k < need; ++k, ++j) {
        if (j >= s.size()) return -static_cast<long>(j - i);
        unsigned char c = static_cast<unsigned char>(s[j]);
        if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return -static_cast<long>(j - i);
    }
    return need;
}

}  // namespace

uint8_t char_class(uint32_t cp) {
    if (cp >= 0x110000) return 0;
    const ClassTable &t = table();
    return t.stage2[static_cast<size_t>(t.stage1[cp >> 8]) * 256 + (cp & 0xFF)];
}

const char *han_unicode_version() { return SLUICE_HAN_UNICODE_VERSION; }
const char *utf8proc_unicode_version() { return ::utf8proc_unicode_version(); }

bool is_valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        long n = sequence_at(s, i);
        if (n < 0) return false;
        i += static_cast<size_t>(n);
    }
    return true;
}

std::string sanitize_utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 8);
    size_t i = 0;
    while (i < s.size()) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            out.push_back(s[i++]);
            continue;
        }
        long n = sequence_at(s, i);
        if (n > 0) {
            out.append(s.substr(i, static_cast<size_t>(n)));
            i += static_cast<size_t>(n);
        } else {
            out.append(kReplacement);
            i += static_cast<size_t>(-n);
        }
    }
    return out;
}

void append_utf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

size_t incomplete_utf8_tail(std::string_view s) {
    const size_t n = s.size();
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        unsigned char b = static_cast<unsigned char>(s[n - back]);
        if ((b & 0xC0) == 0x80) continue;  // continuation: keep looking for the lead
        unsigned char lo, hi;
        size_t need = static_cast<size_t>(lead_info(b, lo, hi));
        if (need == 0 || back >= need) return 0;
        if (back >= 2) {
            unsigned char c = static_cast<unsigned char>(s[n - back + 1]);
            if (c < lo || c > hi) return 0;
        }
        return back;
    }
    return 0;
}

}  // namespace sluice::tok
