#include "convert/byte_level.h"

#include <array>

namespace sluice::convert {

namespace {

struct Map {
    std::array<int, 256> cp{};    // byte -> code point (< 324)
    std::array<int, 512> byte{};  // code point -> byte, -1 if none
    Map() {
        byte.fill(-1);
        int next = 256;
        for (int b = 0; b < 256; b++) {
            const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
            cp[(size_t)b] = printable ? b : next++;
            byte[(size_t)cp[(size_t)b]] = b;
        }
    }
};

const Map &map() {
    static const Map m;
    return m;
}

}  // namespace

std::string bytes_to_byte_level(std::string_view bytes) {
    std::string s;
    for (unsigned char c : bytes) {
        const int cp = map().cp[c];
        if (cp < 0x80) {
            s.push_back((char)cp);
        } else {
            s.push_back((char)(0xC0 | (cp >> 6)));
            s.push_back((char)(0x80 | (cp & 0x3F)));
        }
    }
    return s;
}

bool byte_level_to_bytes(std::string_view s, std::string *out) {
    out->clear();
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = (unsigned char)s[i];
        int cp;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < s.size()) {
            cp = ((c & 0x1F) << 6) | ((unsigned char)s[i + 1] & 0x3F);
            i += 2;
        } else {
            return false;
        }
        if (cp >= (int)map().byte.size() || map().byte[(size_t)cp] < 0) return false;
        out->push_back((char)map().byte[(size_t)cp]);
    }
    return !out->empty();
}

}  // namespace sluice::convert
