// IEEE binary16 decoding exactly as warp does it (FORMAT.md §12.1).
#pragma once
#include <cstdint>
#include <cstring>

namespace sluice {

// Exponent field 31 is not Inf/NaN in warp: it decodes as a finite
// (1 + m/1024) * 2^16. We follow it so odd containers decode identically.
inline float half_to_float_bits(uint16_t h, bool flush_subnormal) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 31;
    uint32_t man = h & 1023;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0 || flush_subnormal) {
            bits = sign;  // +-0; codebook subnormals are flushed (§5.3)
        } else {
            float v = (float)man * (1.0f / 16777216.0f);  // m * 2^-24, exact
            std::memcpy(&bits, &v, 4);
            bits |= sign;
        }
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Scales (trunk groups, expert rows): subnormals kept.
inline float f16_scale(uint16_t h) { return half_to_float_bits(h, false); }
// Codebook entries: subnormals flushed to signed zero.
inline float f16_codebook(uint16_t h) { return half_to_float_bits(h, true); }

inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
inline uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

}  // namespace sluice
