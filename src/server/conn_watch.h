// Noticing that an HTTP client has gone away.
//
// cpp-httplib 0.11 (Debian's) hands a handler neither the socket nor a way to
// ask whether the peer is still there (its DataSink::is_writable only polls
// for buffer space, which a closed peer still has), so a waiting request
// could not be cancelled when its client disconnects. ConnWatch finds the
// handler's socket by its two endpoints, which the Request does carry, and
// peeks at it: a peer that closed makes it readable at end of stream.
#pragma once
#include <chrono>
#include <string>

namespace sluice::server {

class ConnWatch {
public:
    // local/remote: the connection's endpoints as httplib reports them.
    ConnWatch(const std::string &local_addr, int local_port, const std::string &remote_addr, int remote_port);
    // True once the peer has closed or reset the connection. A socket that
    // could not be found is never reported closed (no false cancellations).
    bool closed() const;
    // As closed(), but looks at most once per interval: a generation that
    // emits an event every few milliseconds would otherwise never leave the
    // reader a quiet moment to look in (and looking is a system call).
    bool closed_every(std::chrono::milliseconds interval);
    bool found() const { return fd_ >= 0; }

private:
    int fd_ = -1;
    std::chrono::steady_clock::time_point last_{};
};

}  // namespace sluice::server
