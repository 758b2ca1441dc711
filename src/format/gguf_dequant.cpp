// GGUF tensor rows to float32, for `sluice convert` from a GGUF file. The
// block layouts are ggml's (ggml-common.h); the K-quants are what GGUF
// downloads of large models mostly hold (Q4_K_M mixes Q4_K and Q6_K, Q2_K /
// Q3_K the smallest; IQ4_XS), llama.cpp's quantizer puts Q4_1, Q5_0, Q5_1,
// IQ4_NL or Q8_0 where a row is not whole super-blocks, and MXFP4 is K3's own
// expert format.
// tests/llamacpp/kquant_dequant.py checks every type against ggml's own
// to_float on random blocks (bit-identical).
#include <cstring>
#include <utility>

#include "format/f16.h"
#include "format/gguf.h"

namespace sluice::gguf {

namespace {

constexpr int kQK = 256;  // values per K-quant super-block

// Q4_K / Q5_K: eight 6-bit scales and eight 6-bit mins packed in 12 bytes.
inline void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// Blocks of 32 with one f16 scale: Q4_0's values are nibbles minus 8 (value
// j in the low half of byte j, j + 16 in the high), Q8_0's int8.
void q4_0(const uint8_t *b, float *y) {
    const float d = f16_scale(rd16(b));
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((b[2 + j] & 15) - 8);
        y[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
    }
}

void q8_0(const uint8_t *b, float *y) {
    const float d = f16_scale(rd16(b));
    for (int j = 0; j < 32; j++) y[j] = d * (float)(int8_t)b[2 + j];
}

// Blocks of 32 with one f16 scale d (and an f16 offset m for the _1 types);
// Q5's fifth bits in a u32, bit j for value j and bit j + 16 for j + 16.
void q4_1(const uint8_t *b, float *y) {
    const float d = f16_scale(rd16(b)), m = f16_scale(rd16(b + 2));
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(b[4 + j] & 0xF) * d + m;
        y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    }
}

void q5_0(const uint8_t *b, float *y) {
    const float d = f16_scale(rd16(b));
    const uint32_t qh = rd32(b + 2);
    for (int j = 0; j < 16; j++) {
        const uint8_t h0 = (uint8_t)(((qh >> j) << 4) & 0x10), h1 = (uint8_t)((qh >> (j + 12)) & 0x10);
        y[j] = (float)(((b[6 + j] & 0x0F) | h0) - 16) * d;
        y[j + 16] = (float)(((b[6 + j] >> 4) | h1) - 16) * d;
    }
}

void q5_1(const uint8_t *b, float *y) {
    const float d = f16_scale(rd16(b)), m = f16_scale(rd16(b + 2));
    const uint32_t qh = rd32(b + 4);
    for (int j = 0; j < 16; j++) {
        const uint8_t h0 = (uint8_t)(((qh >> j) << 4) & 0x10), h1 = (uint8_t)((qh >> (j + 12)) & 0x10);
        y[j] = (float)((b[8 + j] & 0x0F) | h0) * d + m;
        y[j + 16] = (float)((b[8 + j] >> 4) | h1) * d + m;
    }
}

// IQ4_NL: Q4_0's layout with the nibbles indexing a fixed non-linear table.
constexpr int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

void iq4_nl(const uint8_t *b, float *y) {
    const float d = f16_scale(rd16(b));
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)kIq4nl[b[2 + j] & 0xF];
        y[j + 16] = d * (float)kIq4nl[b[2 + j] >> 4];
    }
}

// IQ4_XS, 136 bytes: d, scales_h (u16: two high bits per 32-value block),
// scales_l[4] (a nibble per block), qs[128] (IQ4_NL's nibbles, 16 bytes a block).
void iq4_xs(const uint8_t *b, float *y) {
    const float d = f16_scale(rd16(b));
    const uint16_t sh = rd16(b + 2);
    const uint8_t *sl = b + 4, *qs = b + 8;
    for (int ib = 0; ib < 8; ib++, y += 32, qs += 16) {
        const int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
        const float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            y[j] = dl * (float)kIq4nl[qs[j] & 0xF];
            y[j + 16] = dl * (float)kIq4nl[qs[j] >> 4];
        }
    }
}

// MXFP4, 17 bytes: an E8M0 exponent e, then 32 FP4 (E2M1) codes as nibbles
// (Q4_0's order). ggml stores the codes doubled ({0, 1, 2, 3, 4, 6, 8, 12}
// and negatives) and halves the scale: 2^(e - 128), built from its bits
// (e < 2 gives the subnormals 2^-128 and 2^-127). Not convert/numeric.cpp's
// e8m0_to_f32 (the safetensors path, warp's decoding): that one reads e = 0
// as 0, where a GGUF must decode as ggml does.
void mxfp4(const uint8_t *b, float *y) {
    static constexpr int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const uint8_t e = b[0];
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float d;
    std::memcpy(&d, &bits, 4);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)kv[b[1 + j] & 0xF] * d;
        y[j + 16] = (float)kv[b[1 + j] >> 4] * d;
    }
}

// 84 bytes: scales[16] (low nibble scale, high nibble min), qs[64] (2-bit), d, dmin.
void q2_k(const uint8_t *b, float *y) {
    const uint8_t *sc = b, *q = b + 16;
    const float d = f16_scale(rd16(b + 80)), dmin = f16_scale(rd16(b + 82));
    int is = 0;
    for (int n = 0; n < kQK; n += 128, q += 32)
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half = 0; half < 2; half++) {
                const uint8_t s = sc[is++];
                const float dl = d * (float)(s & 0xF), ml = dmin * (float)(s >> 4);
                for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
            }
        }
}

// 110 bytes: hmask[32] (high bit, set = no offset), qs[64] (low 2 bits),
// scales[12] (sixteen 6-bit scales, offset 32), d.
void q3_k(const uint8_t *b, float *y) {
    const uint8_t *hm = b, *q = b + 32, *s = b + 96;
    const float d_all = f16_scale(rd16(b + 108));
    int8_t scales[16];
    for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
        const int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
        scales[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
    int is = 0;
    uint8_t m = 1;
    for (int n = 0; n < kQK; n += 128, q += 32)
        for (int shift = 0; shift < 8; shift += 2, m <<= 1)
            for (int half = 0; half < 2; half++) {
                const float dl = d_all * (float)scales[is++];
                for (int l = 16 * half; l < 16 * half + 16; l++)
                    *y++ = dl * (float)((int8_t)((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
            }
}

// 144 bytes: d, dmin, scales[12], qs[128] (4-bit, 64 values per 32 bytes).
void q4_k(const uint8_t *b, float *y) {
    const float d = f16_scale(rd16(b)), dmin = f16_scale(rd16(b + 2));
    const uint8_t *sc = b + 4, *q = b + 16;
    for (int j = 0; j < kQK; j += 64, q += 32) {
        uint8_t s, m;
        scale_min_k4(j / 32, sc, &s, &m);
        const float d1 = d * (float)s, m1 = dmin * (float)m;
        scale_min_k4(j / 32 + 1, sc, &s, &m);
        const float d2 = d * (float)s, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
    }
}

// 176 bytes: d, dmin, scales[12], qh[32] (fifth bits), qs[128].
void q5_k(const uint8_t *b, float *y) {
    const float d = f16_scale(rd16(b)), dmin = f16_scale(rd16(b + 2));
    const uint8_t *sc = b + 4, *qh = b + 16, *ql = b + 48;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < kQK; j += 64, ql += 32, u1 = (uint8_t)(u1 << 2), u2 = (uint8_t)(u2 << 2)) {
        uint8_t s, m;
        scale_min_k4(j / 32, sc, &s, &m);
        const float d1 = d * (float)s, m1 = dmin * (float)m;
        scale_min_k4(j / 32 + 1, sc, &s, &m);
        const float d2 = d * (float)s, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) *y++ = d1 * (float)((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * (float)((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    }
}

// 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8), d.
void q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    const float d = f16_scale(rd16(b + 208));
    for (int n = 0; n < kQK; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            const int q1 = (int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * (float)sc[is] * (float)q1;
            y[l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
}

}  // namespace

void dequant_row(TensorType t, const uint8_t *b, int64_t ne0, float *o) {
    switch (t) {
    case TensorType::F32: std::memcpy(o, b, 4 * (size_t)ne0); return;
    case TensorType::F16:
        for (int64_t i = 0; i < ne0; i++) o[i] = f16_scale(rd16(b + 2 * i));
        return;
    case TensorType::BF16:
        for (int64_t i = 0; i < ne0; i++) {
            const uint32_t u = (uint32_t)rd16(b + 2 * i) << 16;
            std::memcpy(&o[i], &u, 4);
        }
        return;
    default: break;
    }
    static constexpr std::pair<TensorType, void (*)(const uint8_t *, float *)> kBlocks[] = {
        {TensorType::Q4_0, q4_0}, {TensorType::Q8_0, q8_0}, {TensorType::Q4_1, q4_1}, {TensorType::Q5_0, q5_0},
        {TensorType::Q5_1, q5_1}, {TensorType::IQ4_NL, iq4_nl}, {TensorType::Q2_K, q2_k}, {TensorType::Q3_K, q3_k},
        {TensorType::Q4_K, q4_k}, {TensorType::Q5_K, q5_k}, {TensorType::Q6_K, q6_k}, {TensorType::IQ4_XS, iq4_xs},
        {TensorType::MXFP4, mxfp4},
    };
    int values = 0, bytes = 0;
    if (!block_geometry(t, &values, &bytes)) return;
    for (const auto &[type, fn] : kBlocks)
        if (type == t)
            for (int64_t k = 0; k < ne0 / values; k++) fn(b + (int64_t)bytes * k, o + (int64_t)values * k);
}

}  // namespace sluice::gguf
