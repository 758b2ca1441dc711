#include "server/transport.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <cstring>
#include <string>

namespace sluice::server {
namespace {

using Clock = std::chrono::steady_clock;

// One request's bytes, served to httplib's parser; writes go to the socket.
class BufferedStream final : public httplib::Stream {
public:
    BufferedStream(socket_t sock, const char *data, size_t n, time_t wsec) : sock_(sock), p_(data), n_(n), wsec_(wsec) {}
    bool is_readable() const override { return off_ < n_; }
    bool is_writable() const override {
        pollfd pf{sock_, POLLOUT, 0};
        return ::poll(&pf, 1, (int)(wsec_ * 1000)) > 0 && !(pf.revents & (POLLERR | POLLHUP | POLLNVAL));
    }
    ssize_t read(char *ptr, size_t size) override {
        const size_t k = std::min(size, n_ - off_);
        std::memcpy(ptr, p_ + off_, k);
        off_ += k;
        return (ssize_t)k;
    }
    ssize_t write(const char *ptr, size_t size) override {
        size_t done = 0;
        while (done < size) {
            if (!is_writable()) return done ? (ssize_t)done : -1;
            const ssize_t w = ::send(sock_, ptr + done, size - done, MSG_NOSIGNAL);
            if (w < 0) {
                if (errno == EINTR || errno == EAGAIN) continue;
                return done ? (ssize_t)done : -1;
            }
            done += (size_t)w;
        }
        return (ssize_t)size;
    }
    void get_remote_ip_and_port(std::string &ip, int &port) const override { name(true, ip, port); }
    void get_local_ip_and_port(std::string &ip, int &port) const override { name(false, ip, port); }
    socket_t socket() const override { return sock_; }

private:
    // Numeric host and port, as httplib formats them (conn_watch.cpp finds
    // the socket by these).
    void name(bool peer, std::string &ip, int &port) const {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        auto *sa = reinterpret_cast<sockaddr *>(&ss);
        if ((peer ? getpeername(sock_, sa, &len) : getsockname(sock_, sa, &len)) != 0) return;
        char host[NI_MAXHOST], serv[NI_MAXSERV];
        if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0) return;
        ip = host;
        port = std::atoi(serv);
    }
    socket_t sock_;
    const char *p_;
    size_t n_, off_ = 0;
    time_t wsec_;
};

// Reads more bytes into buf before the deadline: 1 = got some, 0 = the peer
// closed, -1 = deadline passed or error.
int fill(const httplib::Server &svr, socket_t sock, std::string *buf, Clock::time_point deadline) {
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0 || !svr.is_running()) return -1;
        pollfd pf{sock, POLLIN, 0};
        const int r = ::poll(&pf, 1, (int)std::min<long long>(left, 200));
        if (r < 0 && errno != EINTR) return -1;
        if (r <= 0) continue;
        char tmp[16384];
        const ssize_t n = ::recv(sock, tmp, sizeof tmp, 0);
        if (n == 0) return 0;
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return -1;
        }
        buf->append(tmp, (size_t)n);
        return 1;
    }
}

void drain_after_error(socket_t sock);

// Answers STATUS and ends the exchange (the caller closes the connection).
void send_status(socket_t sock, int status, const char *reason, const std::string &msg) {
    // The message may quote client bytes: built as JSON, invalid UTF-8 replaced.
    const nlohmann::json j = {{"error", {{"message", msg}, {"type", "invalid_request_error"}, {"code", status}}}};
    const std::string body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    const std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                          "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
    size_t off = 0;
    while (off < r.size()) {
        const ssize_t w = ::send(sock, r.data() + off, r.size() - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += (size_t)w;
    }
    drain_after_error(sock);  // every caller closes the connection next
}

std::string lower(std::string s) {
    for (auto &c : s) c = (char)std::tolower((unsigned char)c);
    return s;
}

// What the transport needs from a header block: the body length, and
// whether the client waits for "100 Continue".
struct Head {
    int64_t content_length = 0;
    bool chunked = false, expect_continue = false;
    std::string error;  // "400 ..." style: status and message
    int status = 0;
};

Head scan_head(const std::string &h) {
    Head r;
    // The request line: METHOD SP TARGET SP HTTP/1.x, at most 8 KiB. Anything
    // else is answered here and the connection closed (httplib would answer
    // and keep a garbage-speaking connection alive).
    const size_t eol = h.find("\r\n");
    const std::string line = h.substr(0, eol);
    const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
    if (line.size() > 8192) {
        r.status = 414;
        r.error = "the request line exceeds 8 KiB";
        return r;
    }
    if (sp1 == std::string::npos || sp2 == sp1 || line.compare(sp2 + 1, 7, "HTTP/1.") != 0 || line.size() != sp2 + 9) {
        r.status = 400;
        r.error = "malformed request line";
        return r;
    }
    bool have_len = false;
    size_t pos = h.find("\r\n");  // skip the request line
    while (pos != std::string::npos && pos + 2 < h.size()) {
        const size_t s = pos + 2, e = h.find("\r\n", s);
        if (e == std::string::npos || e == s) break;
        const std::string line = h.substr(s, e - s);
        pos = e;
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        const std::string key = lower(line.substr(0, colon));
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        v.erase(v.find_last_not_of(" \t") + 1);
        if (key == "content-length") {
            if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
                r.status = 400;
                r.error = "Content-Length '" + (v.size() > 32 ? v.substr(0, 32) + "..." : v) +
                          "' is not a non-negative integer";
                return r;
            }
            const int64_t n = std::stoll(v);
            if (have_len && n != r.content_length) {
                r.status = 400;
                r.error = "conflicting Content-Length headers";
                return r;
            }
            have_len = true;
            r.content_length = n;
        } else if (key == "transfer-encoding") {
            if (lower(v) != "chunked") {
                r.status = 501;
                r.error = "Transfer-Encoding '" + (v.size() > 32 ? v.substr(0, 32) + "..." : v) +
                          "' is not supported (only chunked)";
                return r;
            }
            r.chunked = true;
        } else if (key == "expect" && lower(v) == "100-continue") {
            r.expect_continue = true;
        }
    }
    // Both framings at once is how requests are smuggled past proxies.
    if (r.chunked && have_len) {
        r.status = 400;
        r.error = "both Transfer-Encoding and Content-Length given";
    }
    return r;
}

// A bare LF anywhere in the header block (outside the CRLF pairs): the
// block would never end with CRLF CRLF, so the request would wait out the
// header deadline; it is answered 400 at once instead.
bool has_bare_lf(const std::string &buf, size_t end) {
    for (size_t i = buf.find('\n'); i != std::string::npos && i < end; i = buf.find('\n', i + 1))
        if (i == 0 || buf[i - 1] != '\r') return true;
    return false;
}

// httplib 0.11 percent-decodes header values (detail::parse_header calls
// decode_url), so "Bearer a%62c" would equal "Bearer abc": one secret with
// many spellings. Escaping each '%' in the header block hands httplib the
// raw bytes back after its decoding.
void keep_headers_raw(std::string *req, size_t head_end) {
    const size_t start = req->find("\r\n");  // the request line keeps its bytes
    if (start == std::string::npos) return;
    std::string out = req->substr(0, start);
    for (size_t i = start; i < head_end; i++) {
        out += (*req)[i];
        if ((*req)[i] == '%') out += "25";
    }
    out.append(*req, head_end, std::string::npos);
    *req = std::move(out);
}

// Closes after an error answer without losing it: a client still sending a
// body would get a reset (and lose the response) if the socket closed with
// its bytes unread. Half-close, then read and drop what comes for a bounded
// time and amount before the caller closes.
void drain_after_error(socket_t sock) {
    ::shutdown(sock, SHUT_WR);
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    size_t dropped = 0;
    char tmp[16384];
    while (dropped < (64u << 20)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) break;
        pollfd pf{sock, POLLIN, 0};
        const int r = ::poll(&pf, 1, (int)left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        const ssize_t n = ::recv(sock, tmp, sizeof tmp, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) break;
        dropped += (size_t)n;
    }
}

// Reads a chunked body (RFC 9112 section 7.1) that starts at buf[pos],
// filling buf from the socket as needed; the decoded bytes go to *body and
// *used is where the request ends in buf. 0 = done, 413 = over max, 408 =
// deadline passed or peer gone, 400 = malformed (*why says how).
int dechunk(const httplib::Server &svr, socket_t sock, std::string *buf, size_t pos, uint64_t max, Clock::time_point deadline, std::string *body,
            size_t *used, std::string *why) {
    // One line ending in CRLF at p; its end in *eol. Lines (sizes,
    // extensions, trailers) are bounded at 4 KiB.
    auto line = [&](size_t p, size_t *eol) -> int {
        for (;;) {
            *eol = buf->find("\r\n", p);
            if (*eol != std::string::npos) return 0;
            if (buf->size() - p > 4096) return *why = "a chunk-size or trailer line over 4 KiB", 400;
            const int r = fill(svr, sock, buf, deadline);
            if (r <= 0) return 408;
        }
    };
    for (int trailers = 0;;) {
        size_t eol;
        if (int r = line(pos, &eol)) return r;
        const std::string sz = buf->substr(pos, std::min(buf->find(';', pos), eol) - pos);
        std::string hex = sz;
        hex.erase(hex.find_last_not_of(" \t") + 1);
        if (hex.empty() || hex.size() > 15 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            return *why = "chunk size '" + hex.substr(0, 32) + "' is not hexadecimal", 400;
        const uint64_t n = std::stoull(hex, nullptr, 16);
        pos = eol + 2;
        if (n == 0) {  // last chunk: trailer lines (ignored), then CRLF
            for (;;) {
                if (int r = line(pos, &eol)) return r;
                const bool end = eol == pos;
                pos = eol + 2;
                if (end) break;
                if (++trailers > 64) return *why = "more than 64 trailer lines", 400;
            }
            *used = pos;
            return 0;
        }
        if (n > max || body->size() > max - n) return 413;
        while (buf->size() < pos + n + 2)
            if (fill(svr, sock, buf, deadline) <= 0) return 408;
        if (buf->compare(pos + n, 2, "\r\n") != 0) return *why = "a chunk's data is not followed by CRLF", 400;
        body->append(*buf, pos, n);
        pos += n + 2;
    }
}

// HEAD (the header block, ending CRLF CRLF) without Transfer-Encoding and
// Expect, with Content-Length: N.
std::string framed_with_length(const std::string &head, size_t n, bool drop_expect) {
    std::string out;
    size_t p = 0;
    for (;;) {
        const size_t e = head.find("\r\n", p);
        if (e == std::string::npos || e == p) break;
        const std::string l = head.substr(p, e - p);
        const std::string k = lower(l.substr(0, l.find(':')));
        if (p == 0 || (k != "transfer-encoding" && !(drop_expect && k == "expect"))) out += l + "\r\n";
        p = e + 2;
    }
    return out + "Content-Length: " + std::to_string(n) + "\r\n\r\n";
}

}  // namespace

void HttpServer::widen_backlog(int n) {
    const socket_t s = svr_sock_;
    if (s != INVALID_SOCKET) ::listen(s, n);
}

std::list<HttpServer::Idle>::iterator HttpServer::enter_idle(socket_t sock) {
    std::lock_guard<std::mutex> lk(idle_mu_);
    auto it = idle_.insert(idle_.end(), Idle{sock});
    size_t live = 0;
    for (auto &i : idle_) live += !i.evicted;
    for (auto o = idle_.begin(); live > lim_.max_idle && o != it; ++o)
        if (!o->evicted) {
            o->evicted = true;
            ::shutdown(o->sock, SHUT_RDWR);  // its poll wakes, its recv reads 0
            --live;
        }
    return it;
}

bool HttpServer::leave_idle(std::list<Idle>::iterator it) {
    std::lock_guard<std::mutex> lk(idle_mu_);
    const bool ok = !it->evicted;
    idle_.erase(it);
    return ok;
}

bool HttpServer::process_and_close_socket(socket_t sock) {
    std::string buf;
    const auto secs = [](double s) { return std::chrono::milliseconds((long long)(s * 1000)); };
    for (size_t served = 0; served < keep_alive_max_count_ && is_running(); ++served) {
        // Headers: the first byte within keep-alive (or the header deadline
        // on a fresh connection), the whole block within the header deadline.
        size_t hend = std::string::npos;
        auto it = enter_idle(sock);
        {
            const auto t0 = Clock::now();
            auto deadline = t0 + secs(served == 0 ? lim_.header_timeout_s : lim_.keep_alive_s);
            bool started = !buf.empty();
            if (started) deadline = t0 + secs(lim_.header_timeout_s);
            while ((hend = buf.find("\r\n\r\n")) == std::string::npos) {
                if (buf.size() > lim_.max_header_bytes || has_bare_lf(buf, buf.size())) break;
                const int r = fill(*this, sock, &buf, deadline);
                if (r <= 0) break;
                if (!started) {
                    started = true;
                    deadline = Clock::now() + secs(lim_.header_timeout_s);
                }
            }
        }
        if (!leave_idle(it)) break;
        if (has_bare_lf(buf, hend == std::string::npos ? buf.size() : hend)) {
            send_status(sock, 400, "Bad Request", "header lines must end with CRLF (a bare LF was sent)");
            break;
        }
        if (hend == std::string::npos) {
            if (buf.size() > lim_.max_header_bytes)
                send_status(sock, 431, "Request Header Fields Too Large", "the request headers exceed 64 KiB");
            else if (!buf.empty() && buf.find_first_not_of("\r\n") != std::string::npos)
                send_status(sock, 408, "Request Timeout", "the request headers did not arrive in time");
            break;
        }
        std::string head = buf.substr(0, hend + 4);
        Head h = scan_head(head);
        if (h.status) {
            send_status(sock, h.status, h.status == 414 ? "URI Too Long" : "Bad Request", h.error);
            break;
        }
        if (h.chunked) {
            if (h.expect_continue && buf.size() == hend + 4) {
                static const char kCont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                (void)::send(sock, kCont, sizeof kCont - 1, MSG_NOSIGNAL);
            }
            std::string body, why;
            size_t used = 0;
            const int d = dechunk(*this, sock, &buf, hend + 4, payload_max_length_,
                                  Clock::now() + secs(lim_.body_timeout_s), &body, &used, &why);
            if (d != 0) {
                if (d == 413)
                    send_status(sock, 413, "Payload Too Large",
                                "the chunked request body exceeds the limit of " + std::to_string(payload_max_length_));
                else if (d == 408)
                    send_status(sock, 408, "Request Timeout", "the request body did not arrive in time");
                else
                    send_status(sock, 400, "Bad Request", "malformed chunked body: " + why);
                break;
            }
            // httplib is handed the request as if it had come with a
            // Content-Length: the same parser, the same limits.
            std::string req = framed_with_length(head, body.size(), h.expect_continue) + body;
            buf.erase(0, used);
            keep_headers_raw(&req, req.size() - body.size());
            BufferedStream strm(sock, req.data(), req.size(), write_timeout_sec_ > 0 ? write_timeout_sec_ : 1);
            bool closed = false;
            const bool last = served + 1 >= keep_alive_max_count_ || !is_running();
            const bool ok = process_request(strm, last, closed, nullptr);
            if (!ok || closed || last) break;
            continue;
        }
        if ((uint64_t)h.content_length > payload_max_length_) {
            send_status(sock, 413, "Payload Too Large",
                        "the request body of " + std::to_string(h.content_length) + " bytes exceeds the limit of " +
                            std::to_string(payload_max_length_));
            break;
        }
        const size_t need = hend + 4 + (size_t)h.content_length;
        if (h.expect_continue && buf.size() < need) {
            // Answered here, and the header removed so httplib does not send
            // a second interim response.
            static const char kCont[] = "HTTP/1.1 100 Continue\r\n\r\n";
            (void)::send(sock, kCont, sizeof kCont - 1, MSG_NOSIGNAL);
        }
        const auto body_deadline = Clock::now() + secs(lim_.body_timeout_s);
        bool complete = true;
        while (buf.size() < need) {
            if (fill(*this, sock, &buf, body_deadline) <= 0) {
                complete = false;
                break;
            }
        }
        if (!complete) {
            send_status(sock, 408, "Request Timeout", "the request body did not arrive in time");
            break;
        }
        // This request's bytes; what follows in buf (pipelined requests)
        // stays for the next turn of the loop.
        std::string req = buf.substr(0, need);
        buf.erase(0, need);
        if (h.expect_continue) {  // drop the Expect line: answered above
            const size_t e = lower(head).find("\r\nexpect:");
            if (e != std::string::npos) req.erase(e, req.find("\r\n", e + 2) - e);
        }
        keep_headers_raw(&req, req.size() - (size_t)h.content_length);
        BufferedStream strm(sock, req.data(), req.size(), write_timeout_sec_ > 0 ? write_timeout_sec_ : 1);
        bool closed = false;
        const bool last = served + 1 >= keep_alive_max_count_ || !is_running();
        const bool ok = process_request(strm, last, closed, nullptr);
        if (!ok || closed || last) break;
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return true;
}

}  // namespace sluice::server
