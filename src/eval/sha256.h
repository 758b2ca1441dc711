// SHA-256 of a stream for the operand hashes (KLD.md §7.8 "SHA-256 of every
// file ... inline"). On CPUs with the SHA extensions it runs its own block
// code, which can hash two streams interleaved (update2: the reference and
// candidate files of one window, 1.46x one stream's rate on the test VM);
// elsewhere it is OpenSSL's. Digests are SHA-256 whatever the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sluice::kld {

class Sha256Stream {
public:
    Sha256Stream();
    ~Sha256Stream();
    Sha256Stream(const Sha256Stream&) = delete;
    Sha256Stream& operator=(const Sha256Stream&) = delete;

    void update(const void* data, size_t n);
    // a.update(pa, n) and b.update(pb, n), the full blocks of both hashed
    // interleaved where the CPU allows.
    static void update2(Sha256Stream& a, const void* pa, Sha256Stream& b, const void* pb, size_t n);
    std::string hex();  // finalises; call once

    static bool has_sha_ni();

private:
    void* ossl_ = nullptr;  // OpenSSL context when the SHA extensions are absent
    uint32_t state_[8];
    uint8_t buf_[64];
    size_t buflen_ = 0;
    uint64_t total_ = 0;
};

}  // namespace sluice::kld
