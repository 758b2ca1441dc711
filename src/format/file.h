// Minimal RAII file handle with full-length positional reads. Short reads
// are reported, never treated as success.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/status.h"

namespace sluice {

class File {
public:
    File() = default;
    ~File();
    File(File &&o) noexcept;
    File &operator=(File &&o) noexcept;
    File(const File &) = delete;
    File &operator=(const File &) = delete;

    Status open_read(const std::string &path, bool direct = false);
    bool is_open() const { return fd_ >= 0; }
    int fd() const { return fd_; }
    uint64_t size() const { return size_; }
    const std::string &path() const { return path_; }
    bool direct() const { return direct_; }
    // Reads exactly n bytes at off, or fails naming the file.
    Status pread_all(void *buf, size_t n, uint64_t off) const;
    // One pread (short reads possible), through the fault-injection hook.
    ssize_t pread_some(void *buf, size_t n, uint64_t off) const;

private:
    int fd_ = -1;
    uint64_t size_ = 0;
    std::string path_;
    bool direct_ = false;
};

Status read_whole_file(const std::string &path, size_t max_bytes, std::string *out);

}  // namespace sluice
