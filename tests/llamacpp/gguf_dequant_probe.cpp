// Every tensor of a GGUF file as sluice's reader dequantizes it
// (gguf::Reader::read_rows_f32), one little-endian f32 file per tensor:
//
//   gguf_dequant_probe FILE.gguf OUTDIR
//
// kquant_dequant.py compares them with ggml's own to_float on the same
// blocks. A tensor sluice does not read is reported and skipped (exit 3).
#include <cstdio>
#include <string>
#include <vector>

#include "format/gguf_reader.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: gguf_dequant_probe FILE.gguf OUTDIR\n");
        return 2;
    }
    sluice::gguf::Reader r;
    if (sluice::Status st = r.open(argv[1]); !st.is_ok()) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 1;
    }
    int rc = 0;
    for (const auto &t : r.tensors()) {
        std::vector<float> y((size_t)(t.dims[0] * t.rows()));
        if (sluice::Status st = r.read_rows_f32(t, 0, t.rows(), y.data()); !st.is_ok()) {
            std::fprintf(stderr, "%s\n", st.message().c_str());
            rc = 3;
            continue;
        }
        const std::string out = std::string(argv[2]) + "/" + t.name + ".f32";
        FILE *f = std::fopen(out.c_str(), "wb");
        if (!f || std::fwrite(y.data(), 4, y.size(), f) != y.size() || std::fclose(f) != 0) {
            std::fprintf(stderr, "cannot write %s\n", out.c_str());
            return 1;
        }
        std::printf("%s: %zu values\n", t.name.c_str(), y.size());
    }
    return rc;
}
