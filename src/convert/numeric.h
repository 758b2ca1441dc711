// Number formats the converter needs that the engine does not: the f16
// writer and the source checkpoints' encodings. Decoding f16 (format/f16.h),
// CRC-32 (format/crc32.h) and SHA-256 (common/sha256.h) are shared with the
// engine.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sluice::convert {

// IEEE half from f32, round to nearest, ties to even, overflow to +-Inf,
// gradual underflow (what PyTorch's .half() does; FORMAT.md 12.2).
uint16_t f32_to_f16(float f);

inline float bf16_to_f32(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}
// OCP FP8 "FN" E4M3: bias 7, subnormals, no Inf, S.1111.111 = NaN.
float fp8_e4m3_to_f32(uint8_t v);
// E5M2: bias 15, IEEE-like with Inf/NaN.
float fp8_e5m2_to_f32(uint8_t v);
// One FP4 E2M1 code (low 4 bits) as magnitude*sign.
float fp4_e2m1_to_f32(uint8_t code);
// E8M0 block scale; e = 0 is a zero scale as warp treats it (FORMAT.md 13.2).
float e8m0_to_f32(uint8_t e);

}  // namespace sluice::convert
