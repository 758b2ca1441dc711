// The transport under the routes (src/server/transport.cpp, issue 16):
// the port is never shared, pipelined requests are answered in order,
// deadlines are per request, idle connections cannot starve /health, bad
// Content-Length gets 400 and an oversized body 413 at once. Ends with a
// bounded hostile load of >= 1000 requests. Loopback only.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "server_fixture.h"

using namespace sluice::server;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

long rss_kib() {
    std::ifstream f("/proc/self/status");
    std::string k;
    long v = 0;
    while (f >> k)
        if (k == "VmRSS:") {
            f >> v;
            break;
        }
    return v;
}

class Transport : public tests::ServerFixture {
protected:
    int connect_raw() {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)port_);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
        return fd;
    }
    // Sends req, reads until the server closes (or timeout_s); returns what came.
    std::string exchange(const std::string &req, double timeout_s = 5, bool half_close = false) {
        int fd = connect_raw();
        size_t off = 0;
        while (off < req.size()) {
            ssize_t w = send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
            if (w <= 0) break;
            off += (size_t)w;
        }
        if (half_close) shutdown(fd, SHUT_WR);
        std::string out;
        const auto t0 = Clock::now();
        char buf[65536];
        while (since(t0) < timeout_s) {
            pollfd pf{fd, POLLIN, 0};
            if (poll(&pf, 1, 100) <= 0) continue;
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            out.append(buf, (size_t)n);
        }
        close(fd);
        return out;
    }
    static std::vector<int> statuses(const std::string &resp) {
        std::vector<int> s;
        size_t at = 0;
        while ((at = resp.find("HTTP/1.", at)) != std::string::npos) {
            if (at + 12 <= resp.size()) s.push_back(std::atoi(resp.c_str() + at + 9));
            at += 8;
        }
        return s;
    }
};

std::string post(const std::string &path, const std::string &body, bool close = true) {
    return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
           (close ? "Connection: close\r\n" : "") + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}
const char *kChat = R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"temperature":0})";

}  // namespace

TEST_F(Transport, ASecondServerOnTheSamePortIsRefused) {
    start();
    ServerOptions o = portless();
    o.host = "127.0.0.1";
    o.port = port_;
    o.model_name = "fake";
    Server second(model_, o);
    std::string err;
    EXPECT_FALSE(second.bind(&err));
    std::printf("  second bind on %d: %s\n", port_, err.c_str());
    EXPECT_NE(err.find(std::to_string(port_)), std::string::npos);
}

TEST_F(Transport, PipelinedRequestsAreAnsweredInOrder) {
    start();
    const std::string req = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
                            "GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n" +
                            post("/v1/chat/completions", kChat, false) +
                            "GET /v1/models/fake HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    const std::string out = exchange(req);
    const auto s = statuses(out);
    std::printf("  4 pipelined requests -> %zu responses\n", s.size());
    ASSERT_EQ(s.size(), 4u) << out;
    EXPECT_EQ(s, (std::vector<int>{200, 404, 200, 200}));
    EXPECT_NE(out.find("chat.completion"), std::string::npos);
}

TEST_F(Transport, ContentLengthErrorsArePromptAndNamed) {
    ServerOptions o = portless();
    o.max_body = 1000;
    start(o);
    auto t0 = Clock::now();
    std::string out = exchange("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n");
    EXPECT_EQ(statuses(out), std::vector<int>{400}) << out;
    out = exchange("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n");
    EXPECT_EQ(statuses(out), std::vector<int>{400}) << out;
    // 413 from the headers alone: the body is never sent.
    t0 = Clock::now();
    out = exchange("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n\r\n");
    const double t413 = since(t0);
    std::printf("  413 after %.3f s\n", t413);
    EXPECT_EQ(statuses(out), std::vector<int>{413}) << out;
    EXPECT_LT(t413, 1.0);
    // Chunked bodies are read (issue 32): "hello" reaches the route, which
    // answers 400 for JSON it cannot parse.
    out = exchange("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "5\r\nhello\r\n0\r\n\r\n");
    EXPECT_EQ(statuses(out), std::vector<int>{400}) << out;
}

// Issue 32: most clients that stream a body send it chunked; accepted
// within --max-body, with extensions and trailers, and pipelined after.
TEST_F(Transport, ChunkedBodiesAreAcceptedWithinMaxBody) {
    ServerOptions o = portless();
    o.max_body = 4096;
    start(o);
    const std::string body = kChat;
    const std::string a = body.substr(0, 10), b = body.substr(10);
    auto hex = [](size_t n) {
        char h[32];
        std::snprintf(h, sizeof h, "%zx", n);
        return std::string(h);
    };
    const std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             "Transfer-Encoding: chunked\r\n";
    std::string out = exchange(head + "\r\n" + hex(a.size()) + ";ext=1\r\n" + a + "\r\n" + hex(b.size()) + "\r\n" + b +
                               "\r\n0\r\nX-Trailer: t\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(statuses(out), (std::vector<int>{200, 200})) << out;
    EXPECT_NE(out.find("chat.completion"), std::string::npos) << out;
    // Over --max-body once decoded: 413; malformed sizes: 400; other codings: 501;
    // both framings at once (request smuggling): 400.
    out = exchange(head + "\r\n" + hex(5000) + "\r\n" + std::string(5000, 'x') + "\r\n0\r\n\r\n");
    EXPECT_EQ(statuses(out), std::vector<int>{413}) << out;
    out = exchange(head + "\r\nzz\r\nhello\r\n0\r\n\r\n");
    EXPECT_EQ(statuses(out), std::vector<int>{400}) << out;
    out = exchange(head + "\r\n5\r\nhelloXX0\r\n\r\n");
    EXPECT_EQ(statuses(out), std::vector<int>{400}) << out;
    out = exchange("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n");
    EXPECT_EQ(statuses(out), std::vector<int>{501}) << out;
    out = exchange("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "5\r\nhello\r\n0\r\n\r\n");
    EXPECT_EQ(statuses(out), std::vector<int>{400}) << out;
}

// Issue 32: bare LF line endings waited out the header deadline, then 408.
TEST_F(Transport, BareLfIsAnsweredAtOnce) {
    start();
    for (const char *req : {"GET /health HTTP/1.1\nHost: x\n\n", "GET /health HTTP/1.1\r\nHost: x\n\r\n"}) {
        const auto t0 = Clock::now();
        const std::string out = exchange(req, 10);
        const double t = since(t0);
        std::printf("  bare LF -> %s after %.3f s\n", out.substr(0, 24).c_str(), t);
        EXPECT_EQ(statuses(out), std::vector<int>{400}) << out;
        EXPECT_LT(t, 2.0);
    }
}

// Issue 32: a 413 from the headers closed the connection with the client's
// body unread, so a client still sending got a reset instead of the answer.
TEST_F(Transport, A413ReachesAClientStillSendingItsBody) {
    ServerOptions o = portless();
    o.max_body = 1000;
    start(o);
    int fd = connect_raw();
    const std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000\r\n\r\n";
    ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL), (ssize_t)head.size());
    std::thread sender([fd] {
        const std::string chunk(65536, 'x');
        for (int i = 0; i < 16; i++)
            if (send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) break;
        shutdown(fd, SHUT_WR);
    });
    std::string out;
    char buf[4096];
    const auto t0 = Clock::now();
    while (since(t0) < 10) {
        pollfd pf{fd, POLLIN, 0};
        if (poll(&pf, 1, 100) <= 0) continue;
        const ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        out.append(buf, (size_t)n);
    }
    sender.join();
    close(fd);
    EXPECT_EQ(statuses(out), std::vector<int>{413}) << "got: " << out;
}

// Issue 32: httplib 0.11 percent-decodes header values; the key is compared
// as sent, so one secret has one spelling.
TEST_F(Transport, TheApiKeyIsComparedAsSent) {
    ServerOptions o = portless();
    o.api_key = "abc%41";
    start(o);
    auto models = [&](const std::string &auth) {
        return statuses(exchange("GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: " + auth +
                                 "\r\nConnection: close\r\n\r\n"));
    };
    EXPECT_EQ(models("Bearer abc%41"), std::vector<int>{200});
    EXPECT_EQ(models("Bearer abcA"), std::vector<int>{401});
    EXPECT_EQ(models("Bearer %61bc%41"), std::vector<int>{401});
    EXPECT_EQ(models("Bearer abc%2541"), std::vector<int>{401});
}

TEST_F(Transport, SlowHeadersHitTheDeadline) {
    ServerOptions o = portless();
    o.read_timeout_s = 1;
    start(o);
    int fd = connect_raw();
    const auto t0 = Clock::now();
    // One byte every 300 ms: a per-read timeout would never fire.
    bool closed = false;
    for (int i = 0; i < 20 && !closed; i++) {
        if (send(fd, "G", 1, MSG_NOSIGNAL) != 1) closed = true;
        pollfd pf{fd, POLLIN, 0};
        if (poll(&pf, 1, 300) > 0) {
            char b[512];
            if (recv(fd, b, sizeof b, 0) <= 0) closed = true;
            else closed = true;  // the 408
        }
    }
    const double t = since(t0);
    std::printf("  trickled headers closed after %.2f s (deadline 1 s)\n", t);
    EXPECT_TRUE(closed);
    EXPECT_LT(t, 3.0);
    close(fd);
}

TEST_F(Transport, IdleConnectionsDoNotStarveHealth) {
    ServerOptions o = portless();
    o.read_timeout_s = 30;
    start(o);
    std::vector<int> fds;
    for (int i = 0; i < 100; i++) {
        int fd = connect_raw();
        send(fd, "GET /health HTTP/1.1\r\nHost:", 27, MSG_NOSIGNAL);
        fds.push_back(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    double worst = 0;
    for (int i = 0; i < 10; i++) {
        const auto t0 = Clock::now();
        httplib::Client c("127.0.0.1", port_);
        c.set_read_timeout(5, 0);
        auto r = c.Get("/health");
        worst = std::max(worst, since(t0));
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200);
    }
    std::printf("  /health with 100 slowloris connections open: worst %.3f s\n", worst);
    EXPECT_LT(worst, 1.0);
    for (int fd : fds) close(fd);
}

TEST_F(Transport, HostileLoad) {
    ServerOptions o = portless();
    o.read_timeout_s = 2;
    o.max_body = 1 << 20;
    start(o);
    std::mt19937 rng(16);
    auto nested = [](int n) { return std::string((size_t)n, '[') + std::string((size_t)n, ']'); };
    const std::vector<std::string> bodies = {
        "{",
        "not json",
        nested(100000),
        R"({"model":"fake","messages":[{"role":"user","content":")" + std::string(500000, 'a') + R"("}],"max_tokens":2})",
        std::string("{\"model\":\"fake\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\xc0\x80\"}]}"),
        R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"max_tokens":1e308})",
        R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"max_tokens":-99999999999999999999})",
        R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"temperature":"NaN","top_p":1e999})",
        R"({"model":"fake","messages":"x"})",
        R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":50})",
    };
    const long rss0 = rss_kib();
    int sent = 0, bad = 0, valid_ok = 0, valid_n = 0;
    double worst_valid = 0;
    for (int round = 0; sent < 1000; round++) {
        const int kind = (int)(rng() % 8);
        std::string req;
        bool half = false;
        switch (kind) {
            case 0: req = post("/v1/chat/completions", bodies[rng() % bodies.size()]); break;
            case 1: req = "GET /health HTTP/1.0\r\n\r\n"; break;
            case 2: req = "GARBAGE\r\n\r\n"; break;
            case 3: req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n"; break;
            case 4:  // pipelined pair
                req = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n" + post("/v1/chat/completions", bodies[0]);
                break;
            case 5:  // aborted: half a body, then the client goes away
                req = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mod";
                half = true;
                break;
            case 6: req = "GET /" + std::string(70000, 'x') + " HTTP/1.1\r\n\r\n"; break;
            default: req = post("/v1/chat/completions", bodies[rng() % bodies.size()]).substr(0, 40); half = true;
        }
        const auto tq = Clock::now();
        const std::string out = exchange(req, 5, half);
        if (since(tq) > 1.0) std::printf("  slow: kind %d took %.2f s\n", kind, since(tq));
        sent++;
        // Every answer, if any, starts with a status line and a valid code.
        if (!out.empty()) {
            const auto s = statuses(out);
            if (out.compare(0, 7, "HTTP/1.") != 0 || s.empty() || s[0] < 200 || s[0] > 599) {
                bad++;
                std::printf("  invalid response to kind %d: %.80s\n", kind, out.c_str());
            }
        } else if (!half && kind != 2) {
            bad++;
            std::printf("  no response to kind %d\n", kind);
        }
        if (round % 10 == 0) {  // interleaved valid requests keep their latency bound
            const auto t0 = Clock::now();
            const std::string v = exchange(post("/v1/chat/completions", kChat));
            worst_valid = std::max(worst_valid, since(t0));
            valid_n++;
            valid_ok += !statuses(v).empty() && statuses(v)[0] == 200;
            sent++;
        }
    }
    const long rss1 = rss_kib();
    std::printf("  hostile load: %d requests, %d invalid/missing responses; %d/%d valid requests ok, worst %.3f s; "
                "RSS %ld -> %ld KiB\n",
                sent, bad, valid_ok, valid_n, worst_valid, rss0, rss1);
    EXPECT_GE(sent, 1000);
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(valid_ok, valid_n);
    EXPECT_LT(worst_valid, 2.0);
    EXPECT_LT(rss1 - rss0, 64 * 1024);  // flat: under 64 MiB of growth over the run
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/health");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
}
