#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "format/crc32.h"
#include "format/f16.h"

using namespace sluice;

TEST(Crc32, CheckValues) {
    // The zlib / IEEE check values from FORMAT.md §6.8.
    EXPECT_EQ(crc32_ieee("", 0), 0x00000000u);
    EXPECT_EQ(crc32_ieee("a", 1), 0xE8B7BE43u);
    EXPECT_EQ(crc32_ieee("123456789", 9), 0xCBF43926u);
    const char *fox = "The quick brown fox jumps over the lazy dog";
    EXPECT_EQ(crc32_ieee(fox, std::strlen(fox)), 0x414FA339u);
    // Incremental use gives the same value as one call.
    EXPECT_EQ(crc32_ieee("6789", 4, crc32_ieee("12345", 5)), 0xCBF43926u);
}

TEST(F16, NormalsSubnormalsAndFlush) {
    EXPECT_EQ(f16_scale(0x3C00), 1.0f);
    EXPECT_EQ(f16_scale(0xC000), -2.0f);
    EXPECT_EQ(f16_scale(0x7BFF), 65504.0f);
    // Smallest subnormal 2^-24: kept for scales, flushed for codebooks.
    EXPECT_EQ(f16_scale(0x0001), 5.9604644775390625e-8f);
    EXPECT_EQ(f16_codebook(0x0001), 0.0f);
    EXPECT_TRUE(std::signbit(f16_codebook(0x8001)));
    EXPECT_EQ(f16_codebook(0x0400), 6.103515625e-05f);  // smallest normal survives
    // Exponent 31 decodes as a finite value, as warp does (§12.1).
    EXPECT_EQ(f16_scale(0x7C00), 65536.0f);
}
