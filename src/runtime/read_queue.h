// Where record reads run: io_uring (one ring, `depth` reads in flight,
// submitted the moment they are queued) or a pool of `depth` threads doing
// pread. Both call the same completion with the same bytes, so the choice
// changes timing only. Certain reads always go out before guesses.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sluice {

struct ReadJob {
    int fd = -1;
    uint8_t *buf = nullptr;
    size_t len = 0;
    uint64_t off = 0;
    bool guess = false;  // a lookahead guess: waits behind every certain read
    uint64_t tag = 0;    // the owner's name for it (the store: its cache key)
    // Called once from an I/O thread with the bytes read (len on success)
    // or -errno; never under the queue's lock.
    std::function<void(ssize_t result)> done;
    size_t got = 0;  // bytes landed so far (short reads are resumed)
};

enum class IoEngine { automatic, uring, threads };
const char *io_engine_name(IoEngine e);

class ReadQueue {
public:
    virtual ~ReadQueue() = default;
    virtual const char *name() const = 0;
    virtual void push(std::unique_ptr<ReadJob> job) = 0;
    // Removes queued (not yet started) guesses for which `drop` is true and
    // returns them, without blocking on anything in flight.
    virtual std::vector<std::unique_ptr<ReadJob>> cancel_guesses(const std::function<bool(const ReadJob &)> &drop) = 0;
    virtual int depth() const = 0;
    // Stops (true) or resumes dispatching queued reads; reads in flight go
    // on. For tests that need a known queue before anything starts.
    virtual void hold(bool on) = 0;
};

// io_uring when asked for (or automatic and the kernel allows it), else
// threads. *why says why io_uring was not used, when it was not.
std::unique_ptr<ReadQueue> make_read_queue(IoEngine e, int depth, std::string *why);

// How many threads make_read_queue(e, depth) would start: io_uring's one
// reaper where the kernel gives this process a ring, else `depth` readers.
// The memory plan counts their stacks: counting 8 readers where io_uring
// runs one had a 2-core machine's floor count 13 threads for 5 (issue 27).
int read_queue_threads(IoEngine e, int depth);

}  // namespace sluice
