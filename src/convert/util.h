// Small file and threading helpers shared by the converter's parts.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "convert/convert.h"

namespace sluice::convert {

// Runs fn(i) for i in [0, n) on `jobs` threads. Work items must not depend on
// which thread runs them (that is what keeps output independent of --jobs).
// Stops handing out items after the first failure; returns false and the
// first error (by item index) if any fn returned false.
bool parallel_for(int64_t n, int jobs, const std::function<bool(int64_t, std::string*)>& fn, std::string* err);

int resolve_jobs(int jobs);

// The shared readers (src/format, src/common) return a Status; the
// converter's functions return bool with the message in *err.
inline bool status_ok(const Status& st, std::string* err) {
    if (!st.is_ok() && err) *err = st.message();
    return st.is_ok();
}

// Whole-file helpers. All report errors naming the path.
bool read_file(const std::string& path, std::string* out, std::string* err);  // up to 1 GiB
// PATH.tmp for a writer that pwrites it (common/checked_file.h: never a FIFO,
// device or link at either name); rename_file publishes it.
bool create_temp(const std::string& path, int* fd, std::string* tmp, std::string* err);
bool write_file_atomic(const std::string& path, const std::string& data, std::string* err);
bool pwrite_all(int fd, const void* p, uint64_t n, uint64_t off, const std::string& path, std::string* err);
bool fsync_and_close(int fd, const std::string& path, std::string* err);
bool rename_file(const std::string& from, const std::string& to, std::string* err);
int64_t file_size(const std::string& path);  // -1 if missing
bool file_exists(const std::string& path);
std::string sha256_file(const std::string& path, std::string* err);  // lowercase hex, "" on error

// Peak resident set (VmHWM) in KiB, or -1.
int64_t peak_rss_kib();

// The sink used when the caller passes none.
class DefaultSink : public ProgressSink {
public:
    explicit DefaultSink(bool quiet);
    void progress(const std::string& phase, int64_t done, int64_t total, const std::string& detail) override;
    void message(const std::string& line) override;

private:
    bool tty_;
    bool quiet_;
    bool open_line_ = false;
};

}  // namespace sluice::convert
