#include "convert/util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>

#include "common/checked_file.h"
#include "format/file_sha256.h"
#include "format/file.h"

namespace sluice::convert {

int resolve_jobs(int jobs) {
    if (jobs > 0) return jobs;
    const unsigned hc = std::thread::hardware_concurrency();
    return hc == 0 ? 1 : static_cast<int>(hc);
}

bool parallel_for(int64_t n, int jobs, const std::function<bool(int64_t, std::string*)>& fn, std::string* err) {
    jobs = resolve_jobs(jobs);
    std::atomic<int64_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex mu;
    int64_t fail_idx = -1;
    std::string fail_msg;
    auto worker = [&]() {
        for (;;) {
            if (failed.load()) return;
            const int64_t i = next.fetch_add(1);
            if (i >= n) return;
            std::string e;
            if (!fn(i, &e)) {
                std::lock_guard<std::mutex> lk(mu);
                if (fail_idx < 0 || i < fail_idx) {
                    fail_idx = i;
                    fail_msg = e;
                }
                failed.store(true);
            }
        }
    };
    const int nt = static_cast<int>(std::min<int64_t>(jobs, std::max<int64_t>(n, 1)));
    if (nt <= 1) {
        worker();
    } else {
        std::vector<std::thread> th;
        for (int t = 0; t < nt; ++t) th.emplace_back(worker);
        for (auto& t : th) t.join();
    }
    if (failed.load()) {
        if (err) *err = fail_msg;
        return false;
    }
    return true;
}

bool read_file(const std::string& path, std::string* out, std::string* err) {
    return status_ok(read_whole_file(path, size_t{1} << 30, out), err);
}

bool pwrite_all(int fd, const void* p, uint64_t n, uint64_t off, const std::string& path, std::string* err) {
    const auto* b = static_cast<const uint8_t*>(p);
    while (n > 0) {
        const ssize_t w = ::pwrite(fd, b, n, static_cast<off_t>(off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            *err = path + ": write failed: " + std::strerror(errno);
            return false;
        }
        b += w; n -= static_cast<uint64_t>(w); off += static_cast<uint64_t>(w);
    }
    return true;
}

bool fsync_and_close(int fd, const std::string& path, std::string* err) {
    // fsync before the rename: after a crash the renamed name must not point
    // at a file whose data never reached the disk.
    const bool ok = ::fsync(fd) == 0;
    ::close(fd);
    if (!ok) *err = path + ": fsync failed: " + std::strerror(errno);
    return ok;
}

bool rename_file(const std::string& from, const std::string& to, std::string* err) {
    return status_ok(sluice::publish_output_temp(from, to), err);
}

bool create_temp(const std::string& path, int* fd, std::string* tmp, std::string* err) {
    return status_ok(sluice::create_output_temp(path, fd, tmp), err);
}

bool write_file_atomic(const std::string& path, const std::string& data, std::string* err) {
    return status_ok(sluice::write_output_file(path, data), err);
}

int64_t file_size(const std::string& path) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) return -1;
    return static_cast<int64_t>(st.st_size);
}

bool file_exists(const std::string& path) { return file_size(path) >= 0; }

std::string sha256_file(const std::string& path, std::string* err) {
    std::string hex;
    return status_ok(sluice::sha256_file(path, &hex), err) ? hex : "";
}

int64_t peak_rss_kib() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6);
    return -1;
}

DefaultSink::DefaultSink(bool quiet) : tty_(::isatty(2) != 0), quiet_(quiet) {}

void DefaultSink::progress(const std::string& phase, int64_t done, int64_t total, const std::string& detail) {
    if (quiet_) return;
    if (tty_) {
        std::fprintf(stderr, "\r\033[K[%s] %s %lld/%lld", phase.c_str(), detail.c_str(), static_cast<long long>(done),
                     static_cast<long long>(total));
        open_line_ = done < total;
        if (!open_line_) std::fputc('\n', stderr);
    } else if (done == total) {
        // Plain lines when not a terminal: one per finished unit of work.
        std::fprintf(stderr, "[%s] %s %lld/%lld\n", phase.c_str(), detail.c_str(), static_cast<long long>(done),
                     static_cast<long long>(total));
    }
    std::fflush(stderr);
}

void DefaultSink::message(const std::string& line) {
    if (open_line_) {
        std::fputc('\n', stderr);
        open_line_ = false;
    }
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
}

}  // namespace sluice::convert
