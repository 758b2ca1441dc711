#include "common/checked_file.h"
#include "format/file.h"

#include "format/io_fault.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/platform_io.h"

namespace sluice {

File::~File() {
    if (fd_ >= 0) ::close(fd_);
}
File::File(File &&o) noexcept : fd_(o.fd_), size_(o.size_), path_(std::move(o.path_)), direct_(o.direct_) {
    o.fd_ = -1;
}
File &File::operator=(File &&o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.fd_;
        size_ = o.size_;
        path_ = std::move(o.path_);
        direct_ = o.direct_;
        o.fd_ = -1;
    }
    return *this;
}

Status File::open_read(const std::string &path, bool direct) {
    path_ = path;
    // O_NONBLOCK: opening a FIFO for reading blocks until a writer appears,
    // so the regular-file check below would never be reached. The flag is
    // cleared once the fd is known to be a regular file.
    fd_ = platform::open_read(path.c_str(), direct, O_NONBLOCK);
    if (fd_ < 0) return io_error(path + ": cannot open: " + std::strerror(errno));
    direct_ = direct;
    return check_input_fd(fd_, path, &size_);
}

Status File::pread_all(void *buf, size_t n, uint64_t off) const {
    uint8_t *p = static_cast<uint8_t *>(buf);
    size_t done = 0;
    while (done < n) {
        ssize_t r = hooked_pread(fd_, path_, p + done, n - done, off + done);
        if (r < 0) {
            if (errno == EINTR) continue;
            return io_error(path_ + ": read of " + std::to_string(n) + " bytes at offset " + std::to_string(off) +
                            " failed: " + std::strerror(errno));
        }
        if (r == 0)
            return io_error(path_ + ": short read: wanted " + std::to_string(n) + " bytes at offset " +
                            std::to_string(off) + ", file has " + std::to_string(size_));
        done += (size_t)r;
    }
    return Status::ok();
}

ssize_t File::pread_some(void *buf, size_t n, uint64_t off) const { return hooked_pread(fd_, path_, buf, n, off); }

Status read_whole_file(const std::string &path, size_t max_bytes, std::string *out) {
    File f;
    SLUICE_TRY(f.open_read(path));
    if (f.size() > max_bytes)
        return io_error(path + ": " + std::to_string(f.size()) + " bytes, larger than the " +
                        std::to_string(max_bytes) + " allowed");
    out->resize(f.size());
    return f.pread_all(out->data(), out->size(), 0);
}

}  // namespace sluice
