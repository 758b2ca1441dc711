// SHA-256 block functions on the x86 SHA extensions, one message or two
// interleaved. sha256rnds2 has a long latency, so one message leaves the
// unit mostly idle; two independent messages in one instruction stream keep
// it busier (the same idea as Linux's sha256_ni_finup2x). Compiled with
// -msha -msse4.1 -mssse3; called only when CPUID reports SHA (sha256.cpp).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace sluice::sha256_detail {

namespace {

alignas(16) const uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// state[8] (a..h) <-> the (ABEF, CDGH) register pair sha256rnds2 works on.
inline void load_state(const uint32_t* state, __m128i* s0, __m128i* s1) {
    __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state));
    __m128i st1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4));
    tmp = _mm_shuffle_epi32(tmp, 0xB1);             // CDAB
    st1 = _mm_shuffle_epi32(st1, 0x1B);             // EFGH
    *s0 = _mm_alignr_epi8(tmp, st1, 8);             // ABEF
    *s1 = _mm_blend_epi16(st1, tmp, 0xF0);          // CDGH
}

inline void store_state(uint32_t* state, __m128i s0, __m128i s1) {
    const __m128i tmp = _mm_shuffle_epi32(s0, 0x1B);  // FEBA
    s1 = _mm_shuffle_epi32(s1, 0xB1);                 // DCHG
    _mm_storeu_si128(reinterpret_cast<__m128i*>(state), _mm_blend_epi16(tmp, s1, 0xF0));    // DCBA
    _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), _mm_alignr_epi8(s1, tmp, 8));  // HGFE
}

const __m128i kSwap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);  // big-endian words

// One 64-byte block: 16 groups of 4 rounds. w[i & 3] holds schedule words
// 4i..4i+3; for i >= 4 they are msg2(msg1(w[i-4], w[i-3]) + (w[i-2]:w[i-1] >> 4 bytes), w[i-1]).
struct Lane {
    __m128i s0, s1, w[4];
    const uint8_t* p;
};

inline void group(Lane& l, int i) {
    if (i < 4) {
        l.w[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(l.p + 16 * i)), kSwap);
    } else {
        const __m128i m1 = _mm_sha256msg1_epu32(l.w[i & 3], l.w[(i - 3) & 3]);
        const __m128i t = _mm_add_epi32(m1, _mm_alignr_epi8(l.w[(i - 1) & 3], l.w[(i - 2) & 3], 4));
        l.w[i & 3] = _mm_sha256msg2_epu32(t, l.w[(i - 1) & 3]);
    }
    __m128i msg = _mm_add_epi32(l.w[i & 3], _mm_load_si128(reinterpret_cast<const __m128i*>(kK + 4 * i)));
    l.s1 = _mm_sha256rnds2_epu32(l.s1, l.s0, msg);
    msg = _mm_shuffle_epi32(msg, 0x0E);
    l.s0 = _mm_sha256rnds2_epu32(l.s0, l.s1, msg);
}

}  // namespace

void blocks_ni(uint32_t* state, const uint8_t* p, size_t n) {
    Lane a;
    load_state(state, &a.s0, &a.s1);
    for (; n; --n, p += 64) {
        const __m128i s0 = a.s0, s1 = a.s1;
        a.p = p;
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) group(a, i);
        a.s0 = _mm_add_epi32(a.s0, s0);
        a.s1 = _mm_add_epi32(a.s1, s1);
    }
    store_state(state, a.s0, a.s1);
}

void blocks_ni_x2(uint32_t* sa, const uint8_t* pa, uint32_t* sb, const uint8_t* pb, size_t n) {
    Lane a, b;
    load_state(sa, &a.s0, &a.s1);
    load_state(sb, &b.s0, &b.s1);
    for (; n; --n, pa += 64, pb += 64) {
        const __m128i a0 = a.s0, a1 = a.s1, b0 = b.s0, b1 = b.s1;
        a.p = pa;
        b.p = pb;
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) {
            group(a, i);
            group(b, i);
        }
        a.s0 = _mm_add_epi32(a.s0, a0);
        a.s1 = _mm_add_epi32(a.s1, a1);
        b.s0 = _mm_add_epi32(b.s0, b0);
        b.s1 = _mm_add_epi32(b.s1, b1);
    }
    store_state(sa, a.s0, a.s1);
    store_state(sb, b.s0, b.s1);
}

}  // namespace sluice::sha256_detail
