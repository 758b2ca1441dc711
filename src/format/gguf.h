// GGUF v3 (llama.cpp's model file) as sluice writes and reads it: the value
// and tensor types, and the sizes both sides must agree on. Only the tensor
// types sluice exports or imports are named; a file holding any other type
// is refused with the tensor's name and the type's number.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::gguf {

constexpr uint32_t kMagic = 0x46554747u;  // "GGUF" read little-endian
constexpr uint32_t kVersion = 3;
constexpr uint64_t kAlignment = 32;  // general.alignment's default
// llama.cpp's GGML_MAX_NAME is 64 including the terminating NUL: a longer
// tensor name loads as a truncated one and is then reported missing.
constexpr size_t kMaxTensorName = 63;
constexpr int kMaxDims = 4;  // GGML_MAX_DIMS

enum class ValueType : uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
    STR = 8, ARR = 9, U64 = 10, I64 = 11, F64 = 12,
};

// The types sluice reads (all of them) and writes (F32, F16, BF16, Q8_0,
// Q4_0: `writable`). The rest are read only: the K-quants are what GGUF
// downloads of large models hold, and llama.cpp's quantizer falls back to
// Q4_1 / Q5_0 / Q5_1 / IQ4_NL / Q8_0 for rows that are not whole 256-value
// super-blocks; IQ4_XS is a common small download, MXFP4 K3's own expert format.
enum class TensorType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13,
    Q6_K = 14, IQ4_NL = 20, IQ4_XS = 23, BF16 = 30, MXFP4 = 39
};

// Bytes of one stored row of ne0 values; 0 when ne0 does not fit the type's
// block (Q8_0 stores blocks of 32: an f16 scale and 32 int8; Q4_0 an f16
// scale and 32 nibbles, value j in the low half of byte j, j + 16 in the high;
// the K-quants super-blocks of 256).
uint64_t row_bytes(TensorType t, int64_t ne0);
// Values and bytes of one block of t (1 and 4 for F32); false for a type
// sluice does not name.
bool block_geometry(TensorType t, int *values, int *bytes);
bool writable(TensorType t);
// One stored row (row_bytes(t, ne0) bytes at b) as ne0 floats, as ggml's
// to_float gives them (gguf_dequant.cpp).
void dequant_row(TensorType t, const uint8_t *b, int64_t ne0, float *o);
const char *type_name(TensorType t);
// Every type the reader decodes, by name ("f32, f16, ..."), for messages
// refusing the others: derived from the one type table, so it cannot drift.
std::string read_type_names();
// Any ggml type number's name ("Q4_K"), for messages naming what a file
// holds; "type N" for a number ggml does not define.
std::string ggml_type_name(uint32_t t);
// "f32", "f16", "q8_0", "q4_0" (the names the CLI takes) to a type; false if unknown.
bool parse_type(const std::string &name, TensorType *out);

// One metadata value. Arrays hold strings in strs or numbers in nums (every
// integer type fits a double exactly up to 2^53, far above any count a model
// header holds; u64/i64 scalars keep their exact value in u/i).
struct Value {
    ValueType type = ValueType::U32;
    ValueType elem = ValueType::U32;  // for ARR
    uint64_t u = 0;
    int64_t i = 0;
    double f = 0;
    bool b = false;
    std::string s;
    std::vector<std::string> strs;
    std::vector<double> nums;
};

}  // namespace sluice::gguf
