// libFuzzer harness: the GGUF reader (src/format/gguf_reader.h) on a file
// holding the input; every metadata getter on every key, and the first rows
// of every tensor of a type sluice reads, widened to f32.
#include <algorithm>
#include <string>
#include <vector>

#include "format/gguf_reader.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    const std::string path = fuzz::put("model.gguf", std::string_view(reinterpret_cast<const char *>(data), size));
    sluice::gguf::Reader r;
    if (!r.open(path).is_ok()) return 0;
    int64_t i = 0;
    double f = 0;
    bool b = false;
    std::string s;
    std::vector<int64_t> a;
    for (const auto &kv : r.metadata()) {
        (void)r.get_int(kv.first, &i);
        (void)r.get_float(kv.first, &f);
        (void)r.get_bool(kv.first, &b);
        (void)r.get_str(kv.first, &s);
        (void)r.get_int_array(kv.first, &a);
    }
    std::vector<float> buf;
    for (const auto &t : r.tensors()) {
        (void)r.tensor(t.name);
        if (t.dims[0] > (1 << 16)) continue;
        const int64_t n = std::min<int64_t>(t.rows(), 3);
        buf.assign((size_t)(n * t.dims[0]), 0.0f);
        (void)r.read_rows_f32(t, 0, n, buf.data());
    }
    return 0;
}
