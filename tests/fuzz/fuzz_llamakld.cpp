// libFuzzer harness: a llama.cpp `.kld` base file (KLD.md §6) opened with
// kld_open; when it opens, its rows are read (bounded) and decoded, and the
// in-memory suite built from its chunks.
#include <algorithm>
#include <string>
#include <vector>

#include "kld/io/llamakld.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    const std::string path = fuzz::put("base.kld", std::string_view(reinterpret_cast<const char *>(data), size));
    sluice::kld::KldFile f;
    if (!sluice::kld::kld_open(path, &f).is_ok()) return 0;
    std::vector<uint16_t> row;
    std::vector<float> logp;
    int reads = 0;
    for (int c = 0; c < f.n_chunk && reads < 64; c++)
        for (int j = f.n_ctx / 2; j <= f.n_ctx - 2 && reads < 64; j++, reads++) {
            if (!sluice::kld::kld_read_row(f, c, j, &row).is_ok()) continue;
            logp.resize((size_t)f.n_vocab);
            sluice::kld::kld_decode_row(row.data(), f.n_vocab, logp.data());
        }
    (void)sluice::kld::kld_read_row(f, f.n_chunk, 0, &row);  // out of range: refused
    if (f.n_chunk <= 1024) (void)sluice::kld::suite_from_kld(f);
    return 0;
}
