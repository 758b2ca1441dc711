#pragma once
#include <cstddef>
#include <cstdint>

namespace sluice {
// zlib / IEEE 802.3 CRC-32 (reflected 0xEDB88320). Not CRC-32C: the x86
// crc32 instruction computes a different polynomial (FORMAT.md §6.8).
uint32_t crc32_ieee(const void *data, size_t n, uint32_t crc = 0);
}
