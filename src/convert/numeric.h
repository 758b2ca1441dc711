// Number formats and checksums the converter needs, kept free of any other
// sluice code so that src/convert builds on its own.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace sluice::convert {

// IEEE half from f32, round to nearest, ties to even, overflow to +-Inf,
// gradual underflow (what PyTorch's .half() does; FORMAT.md 12.2).
uint16_t f32_to_f16(float f);
// Full IEEE half decoding with subnormals kept; exponent 31 decodes as the
// finite (1 + m/1024) * 2^16 the way warp does (FORMAT.md 12.1).
float f16_to_f32(uint16_t h);
// Codebook flavour: subnormal halves flush to signed zero (FORMAT.md 5.3).
float f16_to_f32_flush(uint16_t h);

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

// zlib / IEEE 802.3 CRC-32 (reflected 0xEDB88320). Pass the previous value
// to continue a running checksum.
uint32_t crc32(const void* data, size_t n, uint32_t prev = 0);

// Incremental SHA-256 (FIPS 180-4), for provenance hashes.
class Sha256 {
public:
    Sha256();
    void update(const void* data, size_t n);
    std::array<uint8_t, 32> finish();
    static std::string hex(const std::array<uint8_t, 32>& d);

private:
    void block(const uint8_t* p);
    uint32_t h_[8];
    uint8_t buf_[64];
    size_t fill_ = 0;
    uint64_t total_ = 0;
};

}  // namespace sluice::convert
