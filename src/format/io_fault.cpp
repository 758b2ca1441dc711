#include "format/io_fault.h"

#include <unistd.h>

#include <atomic>

namespace sluice {
namespace {
std::atomic<IoFaultHook *> g_hook{nullptr};
}

ssize_t IoFaultHook::pread(int fd, const std::string &, void *buf, size_t n, uint64_t off) {
    return ::pread(fd, buf, n, (off_t)off);
}

void set_io_fault_hook(IoFaultHook *h) { g_hook.store(h, std::memory_order_release); }
IoFaultHook *io_fault_hook() { return g_hook.load(std::memory_order_acquire); }

ssize_t hooked_pread(int fd, const std::string &path, void *buf, size_t n, uint64_t off) {
    if (IoFaultHook *h = g_hook.load(std::memory_order_relaxed)) return h->pread(fd, path, buf, n, off);
    return ::pread(fd, buf, n, (off_t)off);
}

int hooked_write_error(const std::string &path) {
    if (IoFaultHook *h = g_hook.load(std::memory_order_relaxed)) return h->write_error(path);
    return 0;
}

}  // namespace sluice
