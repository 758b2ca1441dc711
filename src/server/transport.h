// The HTTP transport under httplib's routing: sluice reads each request
// itself, with a deadline for its headers and one for its body, and hands
// httplib a complete request to route. That gives what httplib 0.11 (a
// compiled Debian library) does not:
//  - pipelined requests answered in order (bytes after one request are kept
//    for the next, never dropped);
//  - a deadline per request, not per read, so a client trickling a byte
//    every few seconds (slowloris) cannot hold a thread forever;
//  - a bound on connections idle or mid-headers: past it the oldest is
//    closed, so they can never take every thread and starve /health;
//  - 400 for a malformed or negative Content-Length, 413 as soon as the
//    headers announce a body over the limit, 431 for oversized headers.
#pragma once
#include <httplib.h>

#include <chrono>
#include <list>
#include <mutex>

namespace sluice::server {

struct TransportLimits {
    double header_timeout_s = 30;  // the whole header block of one request
    double body_timeout_s = 30;    // the whole body of one request
    double keep_alive_s = 5;       // waiting for the next request's first byte
    size_t max_header_bytes = 64 << 10;
    size_t max_idle = 32;          // connections waiting for (the rest of) a request's headers
};

class HttpServer final : public httplib::Server {
public:
    void set_transport_limits(const TransportLimits &l) { lim_ = l; }
    // httplib 0.11 listens with a backlog of 5; see server.cpp.
    void widen_backlog(int n);

private:
    // Overrides httplib's per-connection loop (a private virtual: C++ lets
    // a subclass override it all the same).
    bool process_and_close_socket(socket_t sock) override;

    struct Idle {
        socket_t sock;
        bool evicted = false;
    };
    // Registers sock as waiting for headers; evicts the oldest past the bound.
    std::list<Idle>::iterator enter_idle(socket_t sock);
    // false when this connection was evicted while it waited.
    bool leave_idle(std::list<Idle>::iterator it);

    TransportLimits lim_;
    std::mutex idle_mu_;
    std::list<Idle> idle_;
};

}  // namespace sluice::server
