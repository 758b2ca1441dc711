#include "format/platform_io.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>

#include <fcntl.h>
#include <unistd.h>

namespace sluice::platform {

namespace {

std::atomic<size_t> g_forced{0};

size_t system_page_size() {
    static const size_t p = [] {
        const long v = ::sysconf(_SC_PAGESIZE);
        return v > 0 ? (size_t)v : (size_t)4096;
    }();
    return p;
}

}  // namespace

size_t page_size() {
    const size_t f = g_forced.load(std::memory_order_relaxed);
    return f ? f : system_page_size();
}

size_t io_align() {
    const size_t p = page_size();
    return p > 4096 ? p : 4096;
}

bool force_page_size_for_testing(size_t bytes) {
    if (bytes != 0 && (bytes < 4096 || (bytes & (bytes - 1)) != 0)) return false;
    g_forced.store(bytes, std::memory_order_relaxed);
    return true;
}

bool nocache_supported() {
#if defined(O_DIRECT) || defined(F_NOCACHE)
    return true;
#else
    return false;
#endif
}

int open_read(const char *path, bool nocache, int extra_flags) {
    int flags = O_RDONLY | O_CLOEXEC | extra_flags;
#if defined(O_DIRECT)
    if (nocache) flags |= O_DIRECT;
#endif
    const int fd = ::open(path, flags);
#if !defined(O_DIRECT) && defined(F_NOCACHE)
    // macOS: no O_DIRECT; F_NOCACHE on the descriptor turns caching off.
    if (fd >= 0 && nocache && ::fcntl(fd, F_NOCACHE, 1) != 0) {
        const int e = errno;
        ::close(fd);
        errno = e;
        return -1;
    }
#endif
    return fd;
}

void *alloc_io(size_t bytes) {
    void *p = nullptr;
    const size_t n = round_up_io(bytes ? bytes : 1);
    return ::posix_memalign(&p, io_align(), n) == 0 ? p : nullptr;
}

void advise(int fd, unsigned long long off, unsigned long long len, Advice a) {
#if defined(POSIX_FADV_SEQUENTIAL)
    const int adv = a == Advice::sequential ? POSIX_FADV_SEQUENTIAL
                    : a == Advice::willneed ? POSIX_FADV_WILLNEED
                                            : POSIX_FADV_DONTNEED;
    (void)::posix_fadvise(fd, (off_t)off, (off_t)len, adv);
#else
    (void)fd, (void)off, (void)len, (void)a;
#endif
}

size_t round_up_io(size_t n) {
    const size_t a = io_align();
    return (n + a - 1) / a * a;
}

}  // namespace sluice::platform
