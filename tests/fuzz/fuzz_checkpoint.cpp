// libFuzzer harness: a safetensors checkpoint (src/format/safetensors.h's
// index + shard reader) seen through the converter's logical tensors
// (src/convert/checkpoint.h: fp8 and MXFP4 decoding), on a directory materialised from the input: model.safetensors, and
// when the second part is non-empty a model.safetensors.index.json whose
// shards may name "a.safetensors" (a second copy of the first part). Every
// logical tensor that opens has its shape taken and its first rows decoded.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "convert/checkpoint.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    const auto part = fuzz::split(data, size, 2);
    const std::string dir = fuzz::temp_dir() + "/ckpt";
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    fuzz::put("ckpt/model.safetensors", part[0]);
    fuzz::put("ckpt/a.safetensors", part[0]);
    if (!part[1].empty()) fuzz::put("ckpt/model.safetensors.index.json", part[1]);
    sluice::convert::Checkpoint ck;
    std::string err;
    if (!ck.open(dir, &err)) return 0;
    std::vector<float> buf;
    for (const std::string &name : ck.names()) {
        std::string base = name;
        for (const char *suf : {"_scale_inv", "_packed", "_scale"})
            if (base.size() > std::strlen(suf) && base.ends_with(suf)) base.resize(base.size() - std::strlen(suf));
        for (const std::string &n : {name, base}) {
            if (!ck.logical_exists(n)) continue;
            std::vector<int64_t> shape;
            if (!ck.logical_shape(n, &shape, &err)) continue;
            int64_t cols = shape.empty() ? 1 : shape.back(), rows = 1;
            for (size_t i = 0; i + 1 < shape.size(); i++) rows = shape[i] > 0 && rows < (1 << 20) ? rows * shape[i] : rows;
            if (cols <= 0 || cols > (1 << 16)) continue;
            const int64_t r1 = std::min<int64_t>(rows, 4);
            buf.assign((size_t)(r1 * cols), 0.0f);
            (void)ck.read_rows_f32(n, 0, r1, buf.data(), &err);
        }
    }
    return 0;
}
