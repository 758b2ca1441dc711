#include "format/gguf.h"

namespace sluice::gguf {

uint64_t row_bytes(TensorType t, int64_t ne0) {
    if (ne0 <= 0) return 0;
    switch (t) {
    case TensorType::F32: return 4ull * (uint64_t)ne0;
    case TensorType::F16:
    case TensorType::BF16: return 2ull * (uint64_t)ne0;
    case TensorType::Q8_0: return ne0 % 32 ? 0 : (uint64_t)ne0 / 32 * 34;
    case TensorType::Q4_0: return ne0 % 32 ? 0 : (uint64_t)ne0 / 32 * 18;
    }
    return 0;
}

const char *type_name(TensorType t) {
    switch (t) {
    case TensorType::F32: return "f32";
    case TensorType::F16: return "f16";
    case TensorType::BF16: return "bf16";
    case TensorType::Q8_0: return "q8_0";
    case TensorType::Q4_0: return "q4_0";
    }
    return "?";
}

bool parse_type(const std::string &name, TensorType *out) {
    for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::Q8_0, TensorType::Q4_0, TensorType::BF16})
        if (name == type_name(t)) {
            *out = t;
            return true;
        }
    return false;
}

}  // namespace sluice::gguf
