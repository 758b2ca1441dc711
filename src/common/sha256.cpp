#include "common/sha256.h"

#include <openssl/evp.h>

#include <algorithm>
#include <vector>

#include "format/file.h"

namespace sluice {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(static_cast<EVP_MD_CTX *>(ctx_), EVP_sha256(), nullptr); }
Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX *>(ctx_)); }
void Sha256::update(const void *data, size_t n) { EVP_DigestUpdate(static_cast<EVP_MD_CTX *>(ctx_), data, n); }

std::string Sha256::hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(static_cast<EVP_MD_CTX *>(ctx_), md, &len);
    static const char *digits = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; i++) {
        out += digits[md[i] >> 4];
        out += digits[md[i] & 15];
    }
    return out;
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
    // No bigger than the file: a fixed 1 MiB buffer, zeroed on every call,
    // was most of the time of loading a session state (which hashes the
    // few-KiB manifest.json each time).
    std::vector<uint8_t> buf((size_t)std::min<uint64_t>((uint64_t)1 << 20, std::max<uint64_t>(f.size(), 1)));
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
