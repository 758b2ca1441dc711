// The server on the fake model, bound to a loopback port the kernel picks,
// shared by the HTTP test files. Port 0 always: ctest runs the tests in
// parallel, and a fixed 8000 collided between them.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "fake_model.h"
#include "server/server.h"

namespace sluice::server::tests {

class ServerFixture : public ::testing::Test {
protected:
    static ServerOptions portless() {
        ServerOptions o;
        o.port = 0;
        return o;
    }
    void start(ServerOptions o = portless()) {
        o.host = "127.0.0.1";
        o.port = 0;
        if (o.model_name.empty()) o.model_name = "fake";
        server_ = std::make_unique<Server>(model_, o);
        std::string err;
        ASSERT_TRUE(server_->bind(&err)) << err;
        port_ = server_->port();
        thread_ = std::thread([this] { server_->run(); });
        // /health answers once run() accepts; without the wait the first
        // request of a test raced the accept loop.
        httplib::Client c("127.0.0.1", port_);
        for (int i = 0; i < 200 && !c.Get("/health"); i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    void TearDown() override {
        if (server_) server_->stop();
        if (thread_.joinable()) thread_.join();
    }
    httplib::Client client(const std::string &key = {}) {
        httplib::Client c("127.0.0.1", port_);
        c.set_read_timeout(30, 0);
        if (!key.empty()) c.set_bearer_token_auth(key);
        return c;
    }

    fake::FakeModel model_{"Hello, world! "};
    std::unique_ptr<Server> server_;
    std::thread thread_;
    int port_ = 0;
};

}  // namespace sluice::server::tests
