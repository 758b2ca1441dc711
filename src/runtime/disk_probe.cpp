#include "runtime/disk_probe.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "format/platform_io.h"

#include "common/steady_clock.h"

namespace sluice {
namespace {

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

Status probe_disk(const std::string &dir, uint64_t record_bytes, uint64_t file_bytes, double max_seconds, int depth,
                  DiskProbeResult *out) {
    if (record_bytes == 0 || depth < 1 || depth > 256 || !(max_seconds > 0))
        return arg_error("disk probe: record size, depth in [1, 256] and a time limit are required");
    const size_t align = platform::io_align();
    const uint64_t rec = platform::round_up_io((size_t)record_bytes);
    file_bytes = std::max<uint64_t>(file_bytes, 4 * rec);
    file_bytes = (file_bytes + align - 1) / align * align;
    std::string path = dir + "/.sluice-disk-probe-XXXXXX";
    std::vector<char> tmpl(path.begin(), path.end());
    tmpl.push_back('\0');
    Fd w;
    w.fd = ::mkstemp(tmpl.data());
    if (w.fd < 0) return io_error("disk probe: cannot create a file in " + dir + ": " + std::strerror(errno));
    path = tmpl.data();
    // Removed on every path from here: the name goes now, the data when the
    // last descriptor closes.
    struct Unlink {
        std::string p;
        ~Unlink() { ::unlink(p.c_str()); }
    } unlink_at_exit{path};
    // Pseudo-random contents (a device or filesystem may compress zeros).
    const double tw = now_s();
    {
        const size_t chunk = 8u << 20;
        std::vector<uint64_t> buf(chunk / 8);
        std::mt19937_64 rng(12345);
        for (uint64_t done = 0; done < file_bytes;) {
            for (auto &x : buf) x = rng();
            const size_t n = (size_t)std::min<uint64_t>(chunk, file_bytes - done);
            size_t got = 0;
            while (got < n) {
                const ssize_t r = ::pwrite(w.fd, (const char *)buf.data() + got, n - got, (off_t)(done + got));
                if (r <= 0) return io_error("disk probe: cannot write " + path + ": " + std::strerror(errno));
                got += (size_t)r;
            }
            done += n;
        }
        if (::fdatasync(w.fd) != 0) return io_error("disk probe: cannot sync " + path + ": " + std::strerror(errno));
        // What was just written must come from the disk, not the page cache.
        ::posix_fadvise(w.fd, 0, (off_t)file_bytes, POSIX_FADV_DONTNEED);
    }
    const double write_seconds = now_s() - tw;
    Fd r;
    r.fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    const bool direct = r.fd >= 0;
    if (!direct) r.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // tmpfs and some FUSE refuse O_DIRECT
    if (r.fd < 0) return io_error("disk probe: cannot reopen " + path + ": " + std::strerror(errno));
    const uint64_t span = (file_bytes - rec) / align;  // 4 KiB-aligned start offsets
    std::atomic<uint64_t> bytes{0}, reads{0};
    std::atomic<bool> failed{false};
    const uint64_t min_reads = 4 * (uint64_t)depth;
    const double t0 = now_s(), stop_at = t0 + max_seconds;
    std::vector<std::thread> ts;
    for (int t = 0; t < depth; t++)
        ts.emplace_back([&, t] {
            void *m = ::mmap(nullptr, rec, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) {
                failed = true;
                return;
            }
            std::mt19937_64 rng(1000 + (uint64_t)t);
            while (!failed && (reads.load() < min_reads || now_s() < stop_at)) {
                const uint64_t off = (span ? rng() % (span + 1) : 0) * align;
                size_t got = 0;
                while (got < rec) {
                    const ssize_t n = ::pread(r.fd, (char *)m + got, rec - got, (off_t)(off + got));
                    if (n <= 0) {
                        failed = true;
                        break;
                    }
                    got += (size_t)n;
                }
                if (got == rec) {
                    bytes += rec;
                    reads++;
                }
            }
            ::munmap(m, rec);
        });
    for (auto &t : ts) t.join();
    const double dt = now_s() - t0;
    if (failed) return io_error("disk probe: a read of " + path + " failed");
    DiskProbeResult res;
    res.bytes = bytes;
    res.reads = reads;
    res.seconds = dt;
    res.gbps = dt > 0 ? (double)res.bytes / dt / 1e9 : 0;
    res.file_bytes = file_bytes;
    res.direct = direct;
    res.depth = depth;
    res.write_seconds = write_seconds;
    *out = res;
    return Status::ok();
}

}  // namespace sluice
