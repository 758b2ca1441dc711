// libFuzzer harness: the safetensors reader (src/format/safetensors.h,
// KLD.md §2.4) on a file holding the input; every rank-2 tensor of a known
// dtype has its first rows widened to f32, every tensor its first bytes
// read, and the head of the file and data buffer read.
#include <algorithm>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    const std::string path =
        fuzz::put("window.safetensors", std::string_view(reinterpret_cast<const char *>(data), size));
    sluice::st::StFile f;
    if (!f.open(path).is_ok()) return 0;
    std::vector<float> buf;
    uint8_t head[64];
    for (const auto &t : f.tensors()) {
        (void)f.find(t.name);
        (void)f.pread_data(t.begin, head, std::min<uint64_t>(t.nbytes, sizeof head));
        if (t.shape.size() != 2 || t.shape[1] == 0 || t.shape[1] > (1 << 16)) continue;
        const uint64_t n = std::min<uint64_t>(t.shape[0], 3);
        buf.assign((size_t)(n * t.shape[1]), 0.0f);
        (void)f.read_rows_f32(t, 0, n, buf.data());
    }
    (void)f.pread_data(0, head, sizeof head);
    (void)f.pread_file(0, head, sizeof head);
    return 0;
}
