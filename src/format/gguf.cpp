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
    case TensorType::Q4_1: return ne0 % 32 ? 0 : (uint64_t)ne0 / 32 * 20;
    case TensorType::Q5_0: return ne0 % 32 ? 0 : (uint64_t)ne0 / 32 * 22;
    case TensorType::Q5_1: return ne0 % 32 ? 0 : (uint64_t)ne0 / 32 * 24;
    case TensorType::IQ4_NL: return ne0 % 32 ? 0 : (uint64_t)ne0 / 32 * 18;
    case TensorType::Q2_K: return ne0 % 256 ? 0 : (uint64_t)ne0 / 256 * 84;
    case TensorType::Q3_K: return ne0 % 256 ? 0 : (uint64_t)ne0 / 256 * 110;
    case TensorType::Q4_K: return ne0 % 256 ? 0 : (uint64_t)ne0 / 256 * 144;
    case TensorType::Q5_K: return ne0 % 256 ? 0 : (uint64_t)ne0 / 256 * 176;
    case TensorType::Q6_K: return ne0 % 256 ? 0 : (uint64_t)ne0 / 256 * 210;
    }
    return 0;
}

bool writable(TensorType t) {
    return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16 || t == TensorType::Q8_0 ||
           t == TensorType::Q4_0;
}

const char *type_name(TensorType t) {
    switch (t) {
    case TensorType::F32: return "f32";
    case TensorType::F16: return "f16";
    case TensorType::BF16: return "bf16";
    case TensorType::Q8_0: return "q8_0";
    case TensorType::Q4_0: return "q4_0";
    case TensorType::Q4_1: return "q4_1";
    case TensorType::Q5_0: return "q5_0";
    case TensorType::Q5_1: return "q5_1";
    case TensorType::IQ4_NL: return "iq4_nl";
    case TensorType::Q2_K: return "q2_k";
    case TensorType::Q3_K: return "q3_k";
    case TensorType::Q4_K: return "q4_k";
    case TensorType::Q5_K: return "q5_k";
    case TensorType::Q6_K: return "q6_k";
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

std::string ggml_type_name(uint32_t t) {
    // ggml's type numbers (ggml.h).
    static const std::pair<uint32_t, const char *> names[] = {
        {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {6, "Q5_0"},     {7, "Q5_1"},
        {8, "Q8_0"},    {9, "Q8_1"},    {10, "Q2_K"},   {11, "Q3_K"},   {12, "Q4_K"},    {13, "Q5_K"},
        {14, "Q6_K"},   {15, "Q8_K"},   {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"},
        {20, "IQ4_NL"}, {21, "IQ3_S"},  {22, "IQ2_S"},  {23, "IQ4_XS"}, {24, "I8"},      {25, "I16"},
        {26, "I32"},    {27, "I64"},    {28, "F64"},    {29, "IQ1_M"},  {30, "BF16"},    {34, "TQ1_0"},
        {35, "TQ2_0"},  {39, "MXFP4"},
    };
    for (const auto &[n, s] : names)
        if (n == t) return s;
    return "type " + std::to_string(t);
}

}  // namespace sluice::gguf
