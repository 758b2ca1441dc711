#include "format/gguf.h"

namespace sluice::gguf {

namespace {

// Every type sluice names: its CLI name, values per block and bytes per
// block (ggml-common.h's layouts; F32 / F16 / BF16 are blocks of one value).
struct TypeInfo {
    TensorType t;
    const char *name;
    int block, bytes;
};
constexpr TypeInfo kTypes[] = {
    {TensorType::F32, "f32", 1, 4},        {TensorType::F16, "f16", 1, 2},        {TensorType::BF16, "bf16", 1, 2},
    {TensorType::Q8_0, "q8_0", 32, 34},    {TensorType::Q4_0, "q4_0", 32, 18},    {TensorType::Q4_1, "q4_1", 32, 20},
    {TensorType::Q5_0, "q5_0", 32, 22},    {TensorType::Q5_1, "q5_1", 32, 24},    {TensorType::IQ4_NL, "iq4_nl", 32, 18},
    {TensorType::Q2_K, "q2_k", 256, 84},   {TensorType::Q3_K, "q3_k", 256, 110}, {TensorType::Q4_K, "q4_k", 256, 144},
    {TensorType::Q5_K, "q5_k", 256, 176},  {TensorType::Q6_K, "q6_k", 256, 210},  {TensorType::IQ4_XS, "iq4_xs", 256, 136},
    {TensorType::MXFP4, "mxfp4", 32, 17},
};

const TypeInfo *info(TensorType t) {
    for (const TypeInfo &i : kTypes)
        if (i.t == t) return &i;
    return nullptr;
}

}  // namespace

bool block_geometry(TensorType t, int *values, int *bytes) {
    const TypeInfo *i = info(t);
    if (!i) return false;
    *values = i->block;
    *bytes = i->bytes;
    return true;
}

uint64_t row_bytes(TensorType t, int64_t ne0) {
    const TypeInfo *i = info(t);
    if (ne0 <= 0 || !i || ne0 % i->block) return 0;
    return (uint64_t)(ne0 / i->block) * (uint64_t)i->bytes;
}

bool writable(TensorType t) {
    return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16 || t == TensorType::Q8_0 ||
           t == TensorType::Q4_0;
}

const char *type_name(TensorType t) {
    const TypeInfo *i = info(t);
    return i ? i->name : "?";
}

std::string read_type_names() {
    std::string s;
    for (const TypeInfo &i : kTypes) s += (s.empty() ? "" : ", ") + std::string(i.name);
    return s;
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
