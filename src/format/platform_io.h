// The platform-dependent corners of file I/O, in one place: reading past the
// page cache (O_DIRECT on Linux, F_NOCACHE on macOS), the page size (4 KiB
// on x86-64, 16 KiB on Apple silicon and some ARM Linux kernels) and the
// alignment of direct-I/O buffers. Callers never assume 4 KiB pages.
#pragma once

#include <cstddef>

namespace sluice::platform {

// The system's page size (sysconf(_SC_PAGESIZE)), or the size a test forced.
size_t page_size();

// Alignment of buffers (and of offsets and lengths, where a reader aligns
// them) for direct I/O: the larger of 4 KiB and the page size. 4 KiB covers
// the logical block size of the disks O_DIRECT is used on; a whole page
// keeps a buffer from sharing a page with anything else.
size_t io_align();

// Tests only: pretend the page size is `bytes` (a power of two >= 4096), so
// the 16 KiB path runs on a 4 KiB machine; 0 restores the system's.
// Returns false (and changes nothing) for an invalid size. Not to be
// called while I/O is in flight.
bool force_page_size_for_testing(size_t bytes);

// Opens `path` read-only (close-on-exec). With `nocache`, reads bypass the
// page cache where the platform allows: O_DIRECT on Linux (a filesystem that
// refuses it, e.g. tmpfs, makes this fail with errno EINVAL, so the caller
// can fall back to buffered reads), F_NOCACHE on macOS. Returns the file
// descriptor, or -1 with errno set.
int open_read(const char *path, bool nocache, int extra_flags = 0);  // extra_flags: e.g. O_NONBLOCK

// Whether open_read(path, true) can bypass the cache on this platform at all.
bool nocache_supported();

// A buffer of `bytes` (rounded up to io_align()) aligned to io_align(), for
// direct reads; release with std::free. nullptr when out of memory.
void *alloc_io(size_t bytes);

// `n` rounded up to a multiple of io_align().
size_t round_up_io(size_t n);

// Page-cache hints for buffered reads (posix_fadvise where the platform has
// it; macOS has not, and there they do nothing). Advisory: never an error.
enum class Advice { sequential, willneed, dontneed };
void advise(int fd, unsigned long long off, unsigned long long len, Advice a);

}  // namespace sluice::platform
