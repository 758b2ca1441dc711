#include "convert/numeric.h"

#include "format/f16.h"

#include <cmath>
#include <cstring>

namespace sluice::convert {

uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t absx = x & 0x7FFFFFFFu;
    if (absx >= 0x7F800000u) {  // Inf or NaN
        return static_cast<uint16_t>(sign | 0x7C00u | (absx > 0x7F800000u ? 0x200u : 0u));
    }
    const int32_t exp = static_cast<int32_t>(absx >> 23) - 127;
    uint32_t mant = absx & 0x7FFFFFu;
    if (exp > 15) return static_cast<uint16_t>(sign | 0x7C00u);
    if (exp >= -14) {
        // Normal half: keep 10 mantissa bits, round the 13 dropped ones.
        uint32_t h = (static_cast<uint32_t>(exp + 15) << 10) | (mant >> 13);
        const uint32_t rem = mant & 0x1FFFu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h += 1;  // may carry into Inf: correct
        return static_cast<uint16_t>(sign | h);
    }
    if (exp < -25) return sign;  // below half the smallest subnormal
    // Subnormal half: value = m * 2^-24 with the implicit bit made explicit.
    mant |= 0x800000u;
    const int shift = -exp - 14 + 13;  // 14..24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) h += 1;
    return static_cast<uint16_t>(sign | h);
}

float fp8_e4m3_to_f32(uint8_t v) {
    const float sign = (v & 0x80) ? -1.0f : 1.0f;
    const int e = (v >> 3) & 15;
    const int m = v & 7;
    if (e == 15 && m == 7) return std::nanf("");
    if (e == 0) return sign * std::ldexp(static_cast<float>(m) / 8.0f, -6);
    return sign * std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
}

float fp8_e5m2_to_f32(uint8_t v) {
    // E5M2 is the top byte of an IEEE half, with real Inf/NaN at exponent 31.
    if (((v >> 2) & 31) == 31) return (v & 3) ? std::nanf("") : ((v & 0x80) ? -INFINITY : INFINITY);
    return f16_scale(static_cast<uint16_t>(v << 8));  // warp's decoding; Inf/NaN handled above
}

float fp4_e2m1_to_f32(uint8_t code) {
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float m = mag[code & 7];
    return (code & 8) ? -m : m;
}

float e8m0_to_f32(uint8_t e) {
    if (e == 0) return 0.0f;
    return std::ldexp(1.0f, static_cast<int>(e) - 127);  // e = 255 -> 2^128 = +Inf
}

}  // namespace sluice::convert
