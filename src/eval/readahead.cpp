#include "eval/readahead.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sluice::kld {

namespace {
constexpr uint64_t kAlign = 4096;  // O_DIRECT offsets, lengths and buffers
uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

ReadAhead::~ReadAhead() {
    stop();
    for (uint8_t* b : bufs_) std::free(b);
    if (fd_ >= 0) ::close(fd_);
}

void ReadAhead::stop() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        cancel_ = true;
    }
    cv_.notify_all();
    if (th_.joinable()) th_.join();
}

Status ReadAhead::open(const std::string& path, uint64_t begin, uint64_t end, const ReadAheadOptions& o) {
    path_ = path;
    o_ = o;
    o_.chunk = round_up(std::max<uint64_t>(o_.chunk, kAlign), kAlign);
    o_.depth = std::max(2, o_.depth);  // one buffer filling while one is consumed
    mode_ = o.mode;
    if (mode_ == IoMode::direct) {
        fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (fd_ < 0 && errno == EINVAL) mode_ = IoMode::buffered;  // e.g. tmpfs: no O_DIRECT
    }
    if (fd_ < 0) fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return err(Code::io, path + ": cannot open: " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd_, &st) != 0) return err(Code::io, path + ": cannot stat: " + std::strerror(errno));
    size_ = uint64_t(st.st_size);
    if (begin > end || end > size_) return err(Code::io, path + ": range past the end of the file");
    pos_ = begin;
    end_ = end;
    start_ = o_.hash ? 0 : begin;
    stop_ = o_.hash ? size_ : end;
    if (mode_ == IoMode::direct) start_ -= start_ % kAlign;  // align down and skip
    else (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
    for (int i = 0; i < o_.depth; ++i) {
        void* p = nullptr;
        if (::posix_memalign(&p, kAlign, o_.chunk) != 0) return err(Code::resource, path + ": cannot allocate read-ahead buffers");
        bufs_.push_back(static_cast<uint8_t*>(p));
        free_.push_back(bufs_.back());
    }
    th_ = std::thread([this] { run(); });
    return {};
}

void ReadAhead::run() {
    Sha256 sha;
    auto fail = [&](std::string m) {
        {
            std::lock_guard<std::mutex> lk(mu_);
            err_ = err(Code::io, path_ + ": " + m);
            done_ = true;
        }
        cv_.notify_all();
    };
    for (uint64_t off = start_; off < stop_;) {
        uint8_t* b = nullptr;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return cancel_ || !free_.empty(); });
            if (cancel_) return;
            b = free_.front();
            free_.pop_front();
        }
        const uint64_t want = std::min(o_.chunk, stop_ - off);
        // O_DIRECT needs whole blocks; the file's last block comes back short.
        const uint64_t req = mode_ == IoMode::direct ? round_up(want, kAlign) : want;
        uint64_t got = 0;
        while (got < want) {
            const ssize_t r = ::pread(fd_, b + got, req - got, off_t(off + got));
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) return fail("read error at byte " + std::to_string(off + got) + ": " + std::strerror(errno));
            if (r == 0) break;
            got += uint64_t(r);
            if (mode_ == IoMode::direct && got < want && got % kAlign) break;  // only at end of file
        }
        if (got < want) return fail("short read at byte " + std::to_string(off + got) + " (file changed?)");
        if (o_.hash) sha.update(b, want);
        // The bytes are ours now; keep them from evicting the rest of the cache.
        if (mode_ == IoMode::buffered) (void)::posix_fadvise(fd_, off_t(off), off_t(want), POSIX_FADV_DONTNEED);
        {
            std::lock_guard<std::mutex> lk(mu_);
            ready_.push_back({b, off, want});
        }
        cv_.notify_all();
        off += want;
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (o_.hash) hex_ = sha.hex();
        done_ = true;
    }
    cv_.notify_all();
}

Status ReadAhead::read(void* dst, uint64_t n) {
    if (n > end_ - pos_) return err(Code::io, path_ + ": read past the end of the tensor");
    uint8_t* d = static_cast<uint8_t*>(dst);
    std::unique_lock<std::mutex> lk(mu_);
    while (n) {
        cv_.wait(lk, [&] { return !ready_.empty() || done_; });
        if (ready_.empty()) return err_.ok() ? err(Code::io, path_ + ": reader stopped early") : err_;
        Chunk& c = ready_.front();  // stays put: the reader only appends
        if (c.off + used_ < pos_) used_ = std::min(c.len, pos_ - c.off);  // bytes before the range
        const uint64_t take = std::min(n, c.len - used_);
        if (take) {
            lk.unlock();
            std::memcpy(d, c.buf + used_, take);
            lk.lock();
            used_ += take;
            pos_ += take;
            d += take;
            n -= take;
        }
        if (used_ == c.len) {
            free_.push_back(c.buf);
            ready_.pop_front();
            used_ = 0;
            cv_.notify_all();
        }
    }
    return {};
}

Status ReadAhead::finish(std::string* hex) {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {  // drain what lies after the range so the reader reaches the end of the file
        while (!ready_.empty()) {
            free_.push_back(ready_.front().buf);
            ready_.pop_front();
            used_ = 0;
        }
        cv_.notify_all();
        if (done_) break;
        cv_.wait(lk, [&] { return !ready_.empty() || done_; });
    }
    if (!err_.ok()) return err_;
    if (hex) *hex = hex_;
    return {};
}

}  // namespace sluice::kld
