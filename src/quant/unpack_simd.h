// Unpacking of Q4G / Q3G codes to int8 in element order, shared by the AVX2
// and AVX-512 kernel files (both are compiled with -mavx2). Header-only so
// each ISA file inlines it under its own flags.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace sluice {

// One group of `group` Q4G codes starting at nibble-packed p4.
inline void unpack_q4_group(const uint8_t *p4, int64_t group, int8_t *unp) {
    const __m256i m15 = _mm256_set1_epi8(0x0F), bias = _mm256_set1_epi8(8);
    int64_t i = 0;
    for (; i + 64 <= group; i += 64) {
        // unpack works per 128-bit lane, so the halves are put back in order.
        const __m256i by = _mm256_loadu_si256((const __m256i *)(p4 + i / 2));
        const __m256i lo = _mm256_and_si256(by, m15), hi = _mm256_and_si256(_mm256_srli_epi16(by, 4), m15);
        const __m256i e0 = _mm256_unpacklo_epi8(lo, hi), e1 = _mm256_unpackhi_epi8(lo, hi);
        _mm256_storeu_si256((__m256i *)(unp + i), _mm256_sub_epi8(_mm256_permute2x128_si256(e0, e1, 0x20), bias));
        _mm256_storeu_si256((__m256i *)(unp + i + 32), _mm256_sub_epi8(_mm256_permute2x128_si256(e0, e1, 0x31), bias));
    }
    for (; i < group; i++) unp[i] = (int8_t)((int)((i & 1) ? (p4[i >> 1] >> 4) : (p4[i >> 1] & 15)) - 8);
}

// lim Q3G codes of a row starting at element i0 (eight 3-bit fields per
// 24-bit word; the row's guard byte keeps the 4-byte load in bounds).
inline void unpack_q3_group(const uint8_t *row, int64_t i0, int64_t lim, int8_t *unp) {
    for (int64_t i = 0; i < lim; i += 8) {
        const int64_t bit = 3 * (i0 + i);
        const uint8_t *p = row + (bit >> 3);
        uint32_t w = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
        w >>= (bit & 7);
        for (int k = 0; k < 8; k++) unp[i + k] = (int8_t)((int)((w >> (3 * k)) & 7) - 4);
    }
}

}  // namespace sluice
