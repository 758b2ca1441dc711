#include "common/checked_file.h"
#include "kld/io/readahead.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/platform_io.h"

namespace sluice::kld {

namespace {

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Idle read-ahead buffers, reused by the next window's streams. Fresh
// buffers cost a page fault and a zeroed page per 4 KiB (and pinning for
// O_DIRECT): measured at ~4% of a compare's CPU before this pool. Buffers
// only come here when a stream ends, and the next stream takes them, so the
// pool never holds more than the streams held at their peak.
class BufferPool {
public:
    uint8_t* get(uint64_t bytes) {
        {
            std::lock_guard<std::mutex> lk(mu_);
            auto it = idle_.find(bytes);
            // (An idle buffer of a smaller alignment, left from before a
            // test forced a larger page size, is not reused.)
            if (it != idle_.end() && reinterpret_cast<uintptr_t>(it->second) % platform::io_align() == 0) {
                uint8_t* b = it->second;
                idle_.erase(it);
                return b;
            }
        }
        return static_cast<uint8_t*>(platform::alloc_io(bytes));
    }
    void put(uint8_t* b, uint64_t bytes) {
        std::lock_guard<std::mutex> lk(mu_);
        if (idle_.size() >= kMaxIdle) {
            std::free(b);
            return;
        }
        idle_.emplace(bytes, b);
    }

private:
    static constexpr size_t kMaxIdle = 8;
    std::mutex mu_;
    std::multimap<uint64_t, uint8_t*> idle_;
};

BufferPool& pool() {
    static BufferPool* p = new BufferPool;  // never destroyed: streams may outlive static teardown order
    return *p;
}

}  // namespace

ReadAhead::~ReadAhead() {
    stop();
    for (uint8_t* b : bufs_) pool().put(b, buf_bytes_);
    if (fd_ >= 0) ::close(fd_);
}

void ReadAhead::stop() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        cancel_ = true;
    }
    cv_.notify_all();
    for (auto& t : readers_)
        if (t.joinable()) t.join();
}

Status ReadAhead::open(const std::string& path, uint64_t begin, uint64_t end, const ReadAheadOptions& o, uint64_t record) {
    path_ = path;
    o_ = o;
    // O_DIRECT offsets, lengths and buffers: the larger of 4 KiB and the
    // page size (16 KiB on Apple silicon and some ARM kernels).
    align_ = platform::io_align();
    o_.chunk = std::max<uint64_t>(o_.chunk, align_);
    o_.depth = std::max(3, o_.depth);
    // O_DIRECT has no kernel read-ahead: one pread at a time per file left
    // this virtio disk at ~1.1 GB/s for 4 files, 8 at once gave ~2 GB/s.
    if (o_.readers <= 0) o_.readers = o.mode == IoMode::direct ? 2 : 1;
    mode_ = o.mode;
    if (mode_ == IoMode::direct) {
        // O_NONBLOCK until the fd is known to be a regular file: a FIFO
        // in a candidate's place must not hang the open.
        fd_ = platform::open_read(path.c_str(), true, O_NONBLOCK);
        if (fd_ < 0 && errno == EINVAL) mode_ = IoMode::buffered;  // e.g. tmpfs: no O_DIRECT
        if (fd_ >= 0) {
            if (::sluice::Status st = ::sluice::check_input_fd(fd_, path, &size_); !st) return from_status(st);
        }
    }
    if (fd_ < 0) {
        if (::sluice::Status st = ::sluice::open_input_file(path, &fd_, &size_); !st) return from_status(st);
    }
    if (begin > end || end > size_) return err(Code::io, path + ": range past the end of the file");
    pos_ = begin;
    end_ = end;
    begin_ = begin;
    span_ = record ? std::max<uint64_t>(record, o_.chunk / record * record) : o_.chunk;
    buf_bytes_ = round_up(std::min(std::max(span_, o_.chunk), std::max<uint64_t>(end - begin, 1)), align_) + 2 * align_;
    if (mode_ == IoMode::buffered) platform::advise(fd_, 0, 0, platform::Advice::sequential);
    for (uint64_t off = begin; off < end; off = std::min(end, off + span_)) chunks_.emplace_back(off, std::min(end, off + span_));
    slots_.resize(chunks_.size());
    filled_.assign(chunks_.size(), false);
    const int nbuf = o_.depth + o_.readers - 1;
    for (int i = 0; i < nbuf; ++i) {
        uint8_t* b = pool().get(buf_bytes_);
        if (!b) return err(Code::resource, path + ": cannot allocate read-ahead buffers");
        bufs_.push_back(b);
        free_.push_back(b);
    }
    readers_live_ = o_.readers;
    if (chunks_.empty()) {  // an empty range: nothing to read
        read_done_ = done_ = true;
        return {};
    }
    for (int i = 0; i < o_.readers; ++i) readers_.emplace_back([this] { run(); });
    return {};
}

void ReadAhead::run() {
    auto finish_reading = [&](Status st) {
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (!st.is_ok() && err_.is_ok()) err_ = st;
            if (!st.is_ok() || --readers_live_ == 0) read_done_ = done_ = true;
        }
        cv_.notify_all();
    };
    const bool direct = mode_ == IoMode::direct;
    for (;;) {
        size_t k;
        uint8_t* b = nullptr;
        {
            // Claim the next chunk and its buffer together, so buffers go to
            // chunks in file order (a later chunk never holds the buffer an
            // earlier one waits for).
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return cancel_ || read_done_ || next_claim_ == chunks_.size() || !free_.empty(); });
            if (cancel_ || read_done_) return;
            if (next_claim_ == chunks_.size()) break;
            k = next_claim_++;
            b = free_.front();
            free_.pop_front();
        }
        const uint64_t off = chunks_[k].first, next = chunks_[k].second;
        // O_DIRECT reads whole aligned blocks around [off, next); the file's
        // last block comes back short.
        const uint64_t lo = direct ? off - off % align_ : off;
        const uint64_t want = next - lo;
        const uint64_t req = direct ? round_up(next, align_) - lo : want;
        uint64_t got = 0;
        while (got < want) {
            const ssize_t r = ::pread(fd_, b + got, req - got, off_t(lo + got));
            if (r < 0 && errno == EINTR) continue;
            if (r < 0)
                return finish_reading(err(Code::io, path_ + ": read error at byte " + std::to_string(lo + got) + ": " + std::strerror(errno)));
            if (r == 0) break;
            got += uint64_t(r);
            if (direct && got < want && got % align_) break;  // only at end of file
        }
        if (got < want)
            return finish_reading(err(Code::io, path_ + ": short read at byte " + std::to_string(lo + got) + " (file changed?)"));
        if (!direct) {
            // Ask for the next chunk now (the kernel reads it while this one
            // is consumed); the bytes read are ours, so drop their pages
            // rather than let them evict the rest of the cache.
            if (next < end_) platform::advise(fd_, next, std::min(span_, end_ - next), platform::Advice::willneed);
            platform::advise(fd_, off, next - off, platform::Advice::dontneed);
        }
        {
            std::lock_guard<std::mutex> lk(mu_);
            slots_[k] = {b, off, next - off, off - lo};
            filled_[k] = true;
            for (; next_pub_ < chunks_.size() && filled_[next_pub_]; ++next_pub_)  // in file order
                ready_.push_back(slots_[next_pub_]);
        }
        cv_.notify_all();
    }
    finish_reading({});
}

void ReadAhead::release_front() {
    free_.push_back(ready_.front().buf);
    ready_.pop_front();
    used_ = 0;
    cv_.notify_all();
}

Status ReadAhead::front(std::unique_lock<std::mutex>& lk) {
    for (;;) {
        cv_.wait(lk, [&] { return !ready_.empty() || done_; });
        if (ready_.empty()) return err_.is_ok() ? err(Code::io, path_ + ": reader stopped early") : err_;
        const Chunk& c = ready_.front();
        if (c.off + c.len <= pos_) {  // wholly before the range (header) or consumed
            release_front();
            continue;
        }
        used_ = pos_ - c.off;
        return {};
    }
}

Status ReadAhead::read(void* dst, uint64_t n) {
    if (n > end_ - pos_) return err(Code::io, path_ + ": read past the end of the tensor");
    uint8_t* d = static_cast<uint8_t*>(dst);
    std::unique_lock<std::mutex> lk(mu_);
    while (n) {
        SLUICE_TRY(front(lk));
        const Chunk& c = ready_.front();  // stays put: the reader only appends
        const uint64_t take = std::min(n, c.len - used_);
        lk.unlock();
        std::memcpy(d, c.buf + c.skew + used_, take);
        lk.lock();
        pos_ += take;
        d += take;
        n -= take;
        if (pos_ == c.off + c.len) release_front();
    }
    return {};
}

Status ReadAhead::peek(const uint8_t** p, uint64_t* avail) {
    if (pos_ >= end_) {
        *avail = 0;
        return {};
    }
    std::unique_lock<std::mutex> lk(mu_);
    SLUICE_TRY(front(lk));
    const Chunk& c = ready_.front();
    *p = c.buf + c.skew + used_;
    *avail = std::min(c.off + c.len, end_) - pos_;
    return {};
}

void ReadAhead::consume(uint64_t n) {
    std::lock_guard<std::mutex> lk(mu_);
    pos_ += n;
    if (!ready_.empty() && pos_ >= ready_.front().off + ready_.front().len) release_front();
}

Status ReadAhead::finish() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {  // drain, so readers waiting for buffers can finish
        while (!ready_.empty()) release_front();
        if (done_) break;
        cv_.wait(lk, [&] { return !ready_.empty() || done_; });
    }
    return err_;
}

}  // namespace sluice::kld
