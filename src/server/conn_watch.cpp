// Finding and peeking at a handler's socket (see conn_watch.h). Linux only.
#include "server/conn_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace sluice::server {

namespace {

// The endpoint as httplib formats it (numeric host, port).
bool endpoint(const sockaddr_storage &ss, socklen_t len, std::string *addr, int *port) {
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo(reinterpret_cast<const sockaddr *>(&ss), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return false;
    *addr = host;
    *port = std::atoi(serv);
    return true;
}

}  // namespace

ConnWatch::ConnWatch(const std::string &local_addr, int local_port, const std::string &remote_addr,
                     int remote_port) {
    if (local_port <= 0 || remote_port <= 0) return;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return;
    while (dirent *e = readdir(d)) {
        char *end = nullptr;
        long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end || fd == dirfd(d)) continue;
        struct stat st;
        if (fstat((int)fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        std::string a;
        int p = 0;
        // The remote port alone is nearly unique; check both endpoints so a
        // client socket of this same process (tests) is never mistaken for it.
        if (getpeername((int)fd, reinterpret_cast<sockaddr *>(&ss), &len) != 0 || !endpoint(ss, len, &a, &p) ||
            p != remote_port || a != remote_addr)
            continue;
        len = sizeof ss;
        if (getsockname((int)fd, reinterpret_cast<sockaddr *>(&ss), &len) != 0 || !endpoint(ss, len, &a, &p) ||
            p != local_port || a != local_addr)
            continue;
        fd_ = (int)fd;
        break;
    }
    closedir(d);
}

bool ConnWatch::closed_every(std::chrono::milliseconds interval) {
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < interval) return false;
    last_ = now;
    return closed();
}

bool ConnWatch::closed() const {
    if (fd_ < 0) return false;
    pollfd p{fd_, (short)(POLLIN | POLLRDHUP), 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) return true;
    if (p.revents & POLLIN) {
        // Readable: either end of stream (closed) or the next pipelined request.
        char c;
        ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0) return true;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    }
    return false;
}

}  // namespace sluice::server
