#include "common/checked_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace sluice {

namespace {

const char *kind_of(mode_t m) {
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

}  // namespace

Status check_input_fd(int fd, const std::string &path, uint64_t *size) {
    struct stat st;
    if (::fstat(fd, &st) != 0) return io_error(path + ": cannot stat: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return io_error(path + ": " + kind_of(st.st_mode) + ", not a regular file; refusing to read it");
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        return io_error(path + ": cannot clear O_NONBLOCK: " + std::strerror(errno));
    if (size) *size = (uint64_t)st.st_size;
    return Status::ok();
}

Status open_input_file(const std::string &path, int *fd, uint64_t *size, int extra_flags) {
    *fd = -1;
    if (path.empty()) return io_error("empty file name");
    const int f = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | extra_flags);
    if (f < 0) return io_error(path + ": cannot open: " + std::strerror(errno));
    Status st = check_input_fd(f, path, size);
    if (!st) {
        ::close(f);
        return st;
    }
    *fd = f;
    return Status::ok();
}

Status read_input_file(const std::string &path, size_t max_bytes, std::string *out) {
    int fd;
    uint64_t size = 0;
    SLUICE_TRY(open_input_file(path, &fd, &size));
    if (size > max_bytes) {
        ::close(fd);
        return io_error(path + ": " + std::to_string(size) + " bytes, larger than the " + std::to_string(max_bytes) +
                        " allowed");
    }
    out->clear();
    // Read to EOF, not to the fstat size: a file that grows is bounded by
    // max_bytes, one that shrinks ends early.
    char buf[65536];
    for (;;) {
        const ssize_t r = ::read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            const int e = errno;
            ::close(fd);
            return io_error(path + ": read failed: " + std::strerror(e));
        }
        if (r == 0) break;
        if (out->size() + (size_t)r > max_bytes) {
            ::close(fd);
            return io_error(path + ": larger than the " + std::to_string(max_bytes) + " bytes allowed");
        }
        out->append(buf, (size_t)r);
    }
    ::close(fd);
    return Status::ok();
}

Status create_output_temp(const std::string &path, int *fd, std::string *tmp, int extra_flags) {
    *fd = -1;
    if (path.empty()) return io_error("empty output file name");
    if (std::string why = nonregular_output_reason(path); !why.empty()) return io_error(why);
    *tmp = path + ".tmp";
    // A stale temporary from a killed run is removed (nonregular_output_reason
    // refused anything but a regular file there); O_EXCL | O_NOFOLLOW then
    // refuse whatever appears at the name in between.
    struct stat st;
    if (::lstat(tmp->c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(tmp->c_str());
    *fd = ::open(tmp->c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | extra_flags, 0644);
    if (*fd < 0) return io_error(*tmp + ": cannot create: " + std::strerror(errno));
    return Status::ok();
}

Status create_output_in_place(const std::string &path, int *fd) {
    *fd = -1;
    if (path.empty()) return io_error("empty output file name");
    if (std::string why = nonregular_output_reason(path); !why.empty()) return io_error(why);
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) ::unlink(path.c_str());
    const int f = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (f < 0) return io_error(path + ": cannot create: " + std::strerror(errno));
    if (::fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(f);
        return io_error(path + ": not a regular file; refusing to write it");
    }
    const int fl = ::fcntl(f, F_GETFL);
    if (fl >= 0) (void)::fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    *fd = f;
    return Status::ok();
}

Status publish_output_temp(const std::string &tmp, const std::string &path) {
    std::string why = nonregular_output_reason(path);
    if (why.empty() && ::rename(tmp.c_str(), path.c_str()) != 0) why = path + ": rename failed: " + std::strerror(errno);
    if (why.empty()) return Status::ok();
    ::unlink(tmp.c_str());
    return io_error(why);
}

Status OutputFile::create(const std::string &path, int extra_flags) {
    discard();
    failed_ = false;
    path_ = path;
    return create_output_temp(path, &fd_, &tmp_, extra_flags);
}

std::FILE *OutputFile::stream() {
    if (!f_ && fd_ >= 0) f_ = ::fdopen(fd_, "wb");
    return f_;
}

Status OutputFile::write(const void *p, size_t n) {
    if (fd_ < 0) return io_error(path_ + ": not open for writing");
    if (n == 0) return Status::ok();  // p may be an empty vector's null data(): fwrite's buffer is non-null
    if (f_) {
        if (std::fwrite(p, 1, n, f_) != n) {
            failed_ = true;
            return io_error(tmp_ + ": write failed: " + std::strerror(errno));
        }
        return Status::ok();
    }
    const char *b = static_cast<const char *>(p);
    while (n > 0) {
        const ssize_t w = ::write(fd_, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            failed_ = true;
            return io_error(tmp_ + ": write failed: " + std::strerror(errno));
        }
        b += w;
        n -= (size_t)w;
    }
    return Status::ok();
}

Status OutputFile::commit(bool sync) {
    if (fd_ < 0) return io_error(path_ + ": not open for writing");
    bool ok = !failed_;
    std::string why = failed_ ? "an earlier write failed" : "";
    if (f_ && std::fflush(f_) != 0) ok = false, why = std::strerror(errno);
    if (ok && sync && ::fsync(fd_) != 0) ok = false, why = std::string("fsync: ") + std::strerror(errno);
    const int rc = f_ ? std::fclose(f_) : ::close(fd_);
    f_ = nullptr;
    fd_ = -1;
    if (ok && rc != 0) ok = false, why = std::string("close: ") + std::strerror(errno);
    if (!ok) {
        ::unlink(tmp_.c_str());
        return io_error(path_ + ": cannot write: " + why);
    }
    // Checked again: something may have appeared at PATH since create().
    return publish_output_temp(tmp_, path_);
}

void OutputFile::discard() {
    if (fd_ < 0) return;
    if (f_) std::fclose(f_);
    else ::close(fd_);
    f_ = nullptr;
    fd_ = -1;
    ::unlink(tmp_.c_str());
}

Status write_output_file(const std::string &path, std::string_view bytes, bool sync) {
    OutputFile f;
    SLUICE_TRY(f.create(path));
    SLUICE_TRY(f.write(bytes.data(), bytes.size()));
    return f.commit(sync);
}

std::string output_inside_reason(const std::string &out, const std::string &dir, const std::string &what,
                                 const char *allowed) {
    if (out.empty() || dir.empty()) return {};
    struct stat d;
    if (::stat(dir.c_str(), &d) != 0 || !S_ISDIR(d.st_mode)) return {};
    if (allowed) {
        const size_t slash = out.find_last_of('/');
        const std::string base = slash == std::string::npos ? out : out.substr(slash + 1);
        const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : out.substr(0, slash);
        struct stat p;
        if (base == allowed && ::stat(parent.c_str(), &p) == 0 && p.st_dev == d.st_dev && p.st_ino == d.st_ino)
            return {};
    }
    // The deepest existing ancestor of OUT (OUT itself when it exists),
    // resolved; then every directory from it up to the root.
    std::string p = out;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    char buf[PATH_MAX];
    std::string real;
    for (;;) {
        if (::realpath(p.c_str(), buf)) {
            real = buf;
            break;
        }
        const size_t slash = p.find_last_of('/');
        if (slash == std::string::npos) {
            if (!::realpath(".", buf)) return {};
            real = buf;
            break;
        }
        p = slash == 0 ? "/" : p.substr(0, slash);
    }
    for (;;) {
        struct stat s;
        if (::stat(real.c_str(), &s) == 0 && s.st_dev == d.st_dev && s.st_ino == d.st_ino)
            return out + ": lies inside " + what + " " + dir + "; refusing to write there";
        if (real == "/" || real.empty()) break;
        const size_t slash = real.find_last_of('/');
        real = slash == 0 ? "/" : real.substr(0, slash);
    }
    return {};
}

}  // namespace sluice
