// libFuzzer harness: one routed expert record (FORMAT.md §6) checked by
// check_expert_record, with and without its CRC. The input's first 16 bytes
// pick the geometry the bank index would give (I, n_in, stages, index bits,
// stride in 4 KiB blocks, layer, expert, codebook base and count); the rest
// is the record, in a buffer of exactly the stride so ASan sees any read past
// it. A record that passes has every region it hands out read in full.
#include <cstring>
#include <string>
#include <vector>

#include "format/expert_record.h"

namespace {
uint16_t u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 16 || size > (1 << 20)) return 0;
    const int64_t I = 8 * (int64_t)(1 + u16(data) % 512), n_in = 8 * (int64_t)(1 + u16(data + 2) % 512);
    const int stages = 1 + data[4] % 4, index_bits = data[5] & 1 ? 6 : 8;
    const int entries = index_bits == 6 ? 64 : 256;
    const int64_t stride = 4096 * (int64_t)(1 + data[6] % 64);
    const int layer = data[7], expert = u16(data + 8);
    const int64_t cb_base = u16(data + 10), n_books = u16(data + 12);
    sluice::ExpertGeom g;
    if (!g.init(I, n_in, stages, entries, index_bits, stride).is_ok()) return 0;
    std::vector<uint8_t> rec((size_t)stride, 0);
    std::memcpy(rec.data(), data + 16, std::min<size_t>(size - 16, rec.size()));
    for (bool crc : {false, true}) {
        sluice::ExpertView v;
        if (!sluice::check_expert_record(rec.data(), g, layer, expert, cb_base, n_books, crc, "fuzz/experts-L1.bin", &v)
                 .is_ok())
            continue;
        unsigned sum = 0;
        for (int64_t i = 0; i < g.gate_bytes; i++) sum += v.gate[i] + v.up[i];
        for (int64_t i = 0; i < g.down_bytes; i++) sum += v.down[i];
        for (int64_t i = 0; i < 2 * (2 * I + n_in); i++) sum += v.scales[i];
        if (v.codebook_id + 3 * stages > n_books) __builtin_trap();  // the check promised it is in range
        volatile unsigned sink = sum;
        (void)sink;
    }
    return 0;
}
