// Test hook for fault injection at the I/O layer (issue 16): every read of
// a container file (File::pread_all, File::pread_some: trunk, codebooks,
// expert records, hotlist, state files) and the state/hotlist writes ask the
// installed hook first. Off by default: one relaxed atomic load per call,
// next to a system call. Tests install a hook to return EIO, short reads,
// bytes that change between two reads of one record, or ENOSPC on writes,
// and check that each gives an error naming the file and record.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace sluice {

class IoFaultHook {
public:
    virtual ~IoFaultHook() = default;
    // Replaces pread(fd, buf, n, off) for `path`: the result and errno as
    // pread would give them. The default reads the file.
    virtual ssize_t pread(int fd, const std::string &path, void *buf, size_t n, uint64_t off);
    // Before a write to `path` (a temporary name): 0 to go ahead, else the
    // errno the write fails with (ENOSPC).
    virtual int write_error(const std::string &path) { return 0; }
};

// Tests only; nullptr turns it off. Not thread-safe against calls in flight.
void set_io_fault_hook(IoFaultHook *h);
IoFaultHook *io_fault_hook();

// pread through the hook when one is installed.
ssize_t hooked_pread(int fd, const std::string &path, void *buf, size_t n, uint64_t off);
// 0, or the errno a write to path must fail with.
int hooked_write_error(const std::string &path);

}  // namespace sluice
