#include "format/file_sha256.h"

#include <algorithm>
#include <vector>

#include "format/file.h"

namespace sluice {

Status sha256_file(const std::string &path, std::string *hex, uint64_t *size) {
    File f;
    SLUICE_TRY(f.open_read(path));
    if (size) *size = f.size();
    return sha256_open_file(f, hex);
}

Status sha256_open_file(const File &f, std::string *hex) {
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
    return Status::ok();
}

}  // namespace sluice
