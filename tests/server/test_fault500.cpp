// An I/O fault during a request (issue 16): the server answers 500 naming the
// file, and the next request is served normally by the same session.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "format/io_fault.h"
#include "server/server.h"
#include "server/sluice_model.h"

using namespace sluice::server;

namespace {

struct EioOn : sluice::IoFaultHook {
    std::atomic<bool> on{false};
    ssize_t pread(int fd, const std::string &path, void *buf, size_t n, uint64_t off) override {
        if (on && path.find("experts-L") != std::string::npos) {
            errno = EIO;
            return -1;
        }
        return IoFaultHook::pread(fd, path, buf, n, off);
    }
};

}  // namespace

TEST(ServerFault, ReadErrorIs500AndTheServerKeepsServing) {
    const std::string model = std::string(SLUICE_FIXTURES_DIR) + "/warp/kimi-linear-tok.waste";
    if (!std::filesystem::exists(model)) GTEST_SKIP() << "no fixture " << model;
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.no_cache = 1;
    cfg.io_threads = -1;
    sluice_ctx *ctx = nullptr;
    ASSERT_EQ(sluice_open(model.c_str(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
    auto m = make_sluice_model(ctx);
    std::string err;
    if (!sluice_model_check(*m, &err)) GTEST_SKIP() << err;
    ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.model_name = "m";
    Server srv(*m, o);
    ASSERT_TRUE(srv.bind(&err)) << err;
    std::thread t([&] { srv.run(); });
    EioOn hook;
    sluice::set_io_fault_hook(&hook);
    httplib::Client c("127.0.0.1", srv.port());
    c.set_read_timeout(60, 0);
    const std::string body = R"({"model":"m","messages":[{"role":"user","content":"hello"}],"max_tokens":3,"temperature":0})";
    hook.on = true;
    auto r = c.Post("/v1/chat/completions", body, "application/json");
    hook.on = false;
    ASSERT_TRUE(r);
    std::printf("  with EIO: %d %s\n", r->status, r->body.c_str());
    EXPECT_EQ(r->status, 500);
    const auto j = nlohmann::json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error"));
    EXPECT_NE(j["error"]["message"].get<std::string>().find("experts-L"), std::string::npos);
    for (int i = 0; i < 3; i++) {
        r = c.Post("/v1/chat/completions", body, "application/json");
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200) << r->body;
    }
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    sluice::set_io_fault_hook(nullptr);
    srv.stop();
    t.join();
}
