#include "common/sha256.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "format/file.h"

namespace sluice {

namespace sha256_detail {
#if defined(__x86_64__) || defined(_M_X64)
void blocks_ni(uint32_t *state, const uint8_t *p, size_t n);  // sha256_ni.cpp
void blocks_ni_x2(uint32_t *sa, const uint8_t *pa, uint32_t *sb, const uint8_t *pb, size_t n);
#else
// Never called: has_sha_ni() is false off x86-64.
inline void blocks_ni(uint32_t *, const uint8_t *, size_t) {}
inline void blocks_ni_x2(uint32_t *, const uint8_t *, uint32_t *, const uint8_t *, size_t) {}
#endif
}  // namespace sha256_detail

namespace {
const uint32_t kInit[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                           0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

std::string to_hex(const uint8_t *md, size_t n) {
    static const char *digits = "0123456789abcdef";
    std::string s(2 * n, '0');
    for (size_t i = 0; i < n; ++i) {
        s[2 * i] = digits[md[i] >> 4];
        s[2 * i + 1] = digits[md[i] & 15];
    }
    return s;
}
}  // namespace

bool Sha256::has_sha_ni() {
#if defined(__x86_64__) || defined(_M_X64)
    static const bool yes = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("sha") && __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3");
    }();
    return yes;
#else
    return false;
#endif
}

Sha256::Sha256(Engine e) {
    std::memcpy(state_, kInit, sizeof state_);
    if (e == Engine::portable || !has_sha_ni()) {
        ossl_ = EVP_MD_CTX_new();
        EVP_DigestInit_ex(static_cast<EVP_MD_CTX *>(ossl_), EVP_sha256(), nullptr);
    }
}

Sha256::~Sha256() {
    if (ossl_) EVP_MD_CTX_free(static_cast<EVP_MD_CTX *>(ossl_));
}

void Sha256::blocks(const uint8_t *p, size_t n) { sha256_detail::blocks_ni(state_, p, n); }

void Sha256::update(const void *data, size_t n) {
    if (n == 0) return;  // data may be null (an empty tensor): memcpy(_, nullptr, 0) is UB
    if (ossl_) {
        EVP_DigestUpdate(static_cast<EVP_MD_CTX *>(ossl_), data, n);
        return;
    }
    const uint8_t *p = static_cast<const uint8_t *>(data);
    total_ += n;
    if (buflen_) {
        const size_t k = std::min(n, 64 - buflen_);
        std::memcpy(buf_ + buflen_, p, k);
        buflen_ += k;
        p += k;
        n -= k;
        if (buflen_ < 64) return;
        blocks(buf_, 1);
        buflen_ = 0;
    }
    if (n >= 64) {
        blocks(p, n / 64);
        p += n / 64 * 64;
        n %= 64;
    }
    if (n) std::memcpy(buf_, p, n);
    buflen_ = n;
}

void Sha256::update2(Sha256 &a, const void *pa, Sha256 &b, const void *pb, size_t n) {
    if (a.ossl_ || b.ossl_) {
        a.update(pa, n);
        b.update(pb, n);
        return;
    }
    // Bring both to a block boundary one at a time (the KLD operands' headers
    // differ in length), interleave the full blocks they share, finish one at
    // a time.
    const uint8_t *x = static_cast<const uint8_t *>(pa);
    const uint8_t *y = static_cast<const uint8_t *>(pb);
    const size_t ka = std::min(n, a.buflen_ ? 64 - a.buflen_ : size_t(0));
    const size_t kb = std::min(n, b.buflen_ ? 64 - b.buflen_ : size_t(0));
    a.update(x, ka);
    b.update(y, kb);
    const size_t nb = std::min(n - ka, n - kb) / 64;
    if (nb) {
        sha256_detail::blocks_ni_x2(a.state_, x + ka, b.state_, y + kb, nb);
        a.total_ += nb * 64;
        b.total_ += nb * 64;
    }
    a.update(x + ka + nb * 64, n - ka - nb * 64);
    b.update(y + kb + nb * 64, n - kb - nb * 64);
}

std::string Sha256::hex() {
    uint8_t md[32];
    if (ossl_) {
        unsigned len = 0;
        EVP_DigestFinal_ex(static_cast<EVP_MD_CTX *>(ossl_), md, &len);
        return to_hex(md, len);
    }
    // FIPS 180-4 §5.1.1 padding: 0x80, zeros to 56 mod 64, the bit length.
    const uint64_t bits = total_ * 8;
    uint8_t pad[72] = {0x80};
    const size_t padlen = (buflen_ < 56 ? 56 : 120) - buflen_;
    for (int i = 0; i < 8; ++i) pad[padlen + i] = uint8_t(bits >> (56 - 8 * i));
    update(pad, padlen + 8);
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 4; ++j) md[4 * i + j] = uint8_t(state_[i] >> (24 - 8 * j));
    return to_hex(md, 32);
}

std::string sha256_hex(std::string_view bytes) {
    Sha256 h;
    h.update(bytes.data(), bytes.size());
    return h.hex();
}

Status sha256_file(const std::string &path, std::string *hex, uint64_t *size) {
    File f;
    SLUICE_TRY(f.open_read(path));
    Sha256 h;
    std::vector<uint8_t> buf((size_t)1 << 20);
    for (uint64_t off = 0; off < f.size();) {
        size_t n = (size_t)std::min<uint64_t>(buf.size(), f.size() - off);
        SLUICE_TRY(f.pread_all(buf.data(), n, off));
        h.update(buf.data(), n);
        off += n;
    }
    *hex = h.hex();
    if (size) *size = f.size();
    return Status::ok();
}

}  // namespace sluice
