// Streaming reads of one operand file (KLD.md §7.8): reader threads issue
// large sequential preads into a small ring of buffers (O_DIRECT by
// default; buffered reads drop the pages they have read, so a suite far
// larger than RAM never evicts the page cache). The consumer takes the bytes
// of one range in order, copied or in place. Hashing is the consumer's
// (FileRows hashes each row pair as it is scored, while it is in cache).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kld/kld_common.h"
#include "format/platform_io.h"

namespace sluice::kld {

enum class IoMode { buffered, direct };

struct ReadAheadOptions {
    uint64_t chunk = uint64_t(16) << 20;  // bytes per pread (§7.8: 8-64 MiB)
    int depth = 3;                        // buffers beyond those being read: one consumed, two ready
    int readers = 0;                      // concurrent preads; 0: 1 buffered (the kernel reads ahead), 2 O_DIRECT
    // O_DIRECT by default: on the 2-core test VM it used 0.5 s of system
    // CPU per 5.4 GB against 2.2 s buffered, and the run is CPU-bound
    // (SHA-256). Files on filesystems without O_DIRECT are read buffered.
    IoMode mode = IoMode::direct;
};

// Bytes of read-ahead memory one stream holds.
// for records (rows) of `record` bytes in a file of at most `file` bytes (a
// buffer is never larger than the file); two extra blocks (of
// platform::io_align(): 4 KiB, or the page size if larger) per buffer
// because O_DIRECT reads start and end block-aligned.
inline uint64_t readahead_bytes(const ReadAheadOptions& o, uint64_t record = 0, uint64_t file = ~uint64_t(0) >> 1) {
    uint64_t b = o.chunk > record ? o.chunk : record;
    if (b > file) b = file;
    const int readers = o.readers > 0 ? o.readers : o.mode == IoMode::direct ? 2 : 1;
    return (b + 2 * uint64_t(platform::io_align())) * uint64_t((o.depth < 3 ? 3 : o.depth) + readers - 1);
}

class ReadAhead {
public:
    ReadAhead() = default;
    ~ReadAhead();
    ReadAhead(const ReadAhead&) = delete;
    ReadAhead& operator=(const ReadAhead&) = delete;

    // Streams bytes [begin, end) of path to read(). IoMode::direct uses
    // O_DIRECT (aligned offsets; the reader aligns down and skips) and falls
    // back to buffered reads where the filesystem refuses it.
    // `record` > 0 aligns chunk boundaries inside the range to whole
    // records (rows) from `begin`, so peek() always yields whole rows.
    Status open(const std::string& path, uint64_t begin, uint64_t end, const ReadAheadOptions& o, uint64_t record = 0);
    // The next n bytes of the range (copied).
    Status read(void* dst, uint64_t n);
    // Zero-copy: the longest run of next bytes held in one buffer (at least
    // one byte unless the range is done), valid until consume() releases it.
    Status peek(const uint8_t** p, uint64_t* avail);
    // Advances past n bytes of the last peek (n <= avail).
    void consume(uint64_t n);
    // After the last read: waits for the readers; an error if the range
    // could not be read whole.
    Status finish();
    IoMode mode() const { return mode_; }

private:
    struct Chunk {
        uint8_t* buf = nullptr;
        uint64_t off = 0, len = 0;  // file offset and length of the chunk's bytes
        uint64_t skew = 0;          // where they start in buf (O_DIRECT reads from an aligned offset)
    };
    // Waits for the chunk holding pos_ (dropping chunks before it).
    Status front(std::unique_lock<std::mutex>& lk);
    void release_front();
    void run();  // a reader thread: claims chunks in order, preads them back to back
    void stop();

    std::string path_;
    int fd_ = -1;
    IoMode mode_ = IoMode::buffered;
    ReadAheadOptions o_;
    uint64_t size_ = 0;
    uint64_t begin_ = 0, span_ = 0;  // chunks start at begin_ + k * span_
    uint64_t buf_bytes_ = 0;
    uint64_t align_ = 4096;  // platform::io_align() at open()
    std::vector<std::pair<uint64_t, uint64_t>> chunks_;  // [off, next) of every chunk, in file order
    size_t next_claim_ = 0, next_pub_ = 0;               // chunk indices: next to read, next to publish
    std::vector<Chunk> slots_;                           // chunks read, waiting for their turn to publish
    std::vector<bool> filled_;
    int readers_live_ = 0;
    uint64_t pos_ = 0, end_ = 0;               // consumer position in [begin, end)
    std::vector<uint8_t*> bufs_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<uint8_t*> free_;
    std::deque<Chunk> ready_;
    size_t used_ = 0;  // bytes of ready_.front() already consumed
    bool read_done_ = false;  // the readers have queued the last chunk (or failed)
    bool done_ = false, cancel_ = false;
    Status err_;
    std::vector<std::thread> readers_;
};

}  // namespace sluice::kld
