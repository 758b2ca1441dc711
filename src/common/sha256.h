// SHA-256 through OpenSSL's libcrypto (hashing is not on the inference hot
// path; a well-kept library beats a hand-written digest). Used for
// container fingerprints, converter provenance and KLD suite hashes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace sluice {

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256 &) = delete;
    Sha256 &operator=(const Sha256 &) = delete;
    void update(const void *data, size_t n);
    std::string hex();  // finishes the digest; lowercase hex

private:
    void *ctx_;
};

std::string sha256_hex(std::string_view bytes);
// Hashes a whole file in 1 MiB reads; *size receives its length if not null.
Status sha256_file(const std::string &path, std::string *hex, uint64_t *size = nullptr);

}  // namespace sluice
