// SHA-256 for container fingerprints, converter provenance, `sluice verify`
// and the KLD suite's file hashes (KLD.md §7.8: every operand hashed inline
// at read speed). Two block engines, chosen at run time from CPUID: the x86
// SHA extensions (sha256_ni.cpp, which can also hash two streams
// interleaved: the reference and candidate rows of one KLD window), and
// OpenSSL's libcrypto everywhere else (its own assembly on ARMv8 and AVX2
// hosts; a hand-written scalar digest there would be several times slower).
// Digests are identical whichever engine runs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace sluice {

class Sha256 {
public:
    enum class Engine {
        automatic,  // SHA extensions when CPUID reports them, else portable
        portable,   // OpenSSL whatever the CPU (tests compare the two)
    };
    explicit Sha256(Engine e = Engine::automatic);
    ~Sha256();
    Sha256(const Sha256 &) = delete;
    Sha256 &operator=(const Sha256 &) = delete;

    void update(const void *data, size_t n);
    // a.update(pa, n) and b.update(pb, n), the full blocks both have hashed
    // interleaved when both run on the SHA extensions.
    static void update2(Sha256 &a, const void *pa, Sha256 &b, const void *pb, size_t n);
    std::string hex();  // finishes the digest (call once); lowercase hex

    // Whether this CPU has the SHA extensions (and SSSE3/SSE4.1 they need).
    static bool has_sha_ni();
    bool uses_sha_ni() const { return ossl_ == nullptr; }

private:
    void blocks(const uint8_t *p, size_t n);
    void *ossl_ = nullptr;  // OpenSSL context on the portable engine
    uint32_t state_[8];
    uint8_t buf_[64];
    size_t buflen_ = 0;
    uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view bytes);
// Hashes a whole file in 1 MiB reads; *size receives its length if not null.
Status sha256_file(const std::string &path, std::string *hex, uint64_t *size = nullptr);

}  // namespace sluice
