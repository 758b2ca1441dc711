// Prompt reuse through the server (cache_prompt): on the real engine over
// generated containers of each family, turn 2 of a /v1/completions
// conversation with token-id prompts reuses turn 1's prefix, reports it in
// usage.prompt_tokens_details.cached_tokens and /metrics, and returns the
// same log-probabilities, bit for bit, as the same request with
// "cache_prompt": false (a fresh evaluation).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "capi/prompt_reuse_models.h"
#include "server/server.h"
#include "server/sluice_model.h"
#include "sluice/sluice.h"

using nlohmann::json;
using namespace sluice::server;

namespace {

std::vector<int32_t> ids(size_t n, int vocab, int salt) {
    std::vector<int32_t> v(n);
    for (size_t i = 0; i < n; i++) v[i] = (int32_t)((i * 89 + (size_t)salt * 37 + 3) % (size_t)vocab);
    return v;
}

class Served {
public:
    explicit Served(const std::string &path, uint64_t session_bytes = 0) {
        sluice_config cfg;
        sluice_config_default(&cfg);
        cfg.n_threads = 2;
        cfg.no_hotlist = 1;
        cfg.no_direct_io = 1;
        cfg.prefill_chunk = 4;
        cfg.checkpoint_interval = 8;
        cfg.session_bytes = session_bytes;
        cfg.replay_log = 1;  // as sluice serve opens it
        sluice_ctx *ctx = nullptr;
        EXPECT_EQ(sluice_open(path.c_str(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
        model_ = make_sluice_model(ctx);
        ServerOptions o;
        o.host = "127.0.0.1";
        o.port = 0;
        o.model_name = "m";
        server_ = std::make_unique<Server>(*model_, o);
        std::string err;
        EXPECT_TRUE(server_->bind(&err)) << err;
        thread_ = std::thread([this] { server_->run(); });
        httplib::Client c("127.0.0.1", server_->port());
        for (int i = 0; i < 200 && !c.Get("/health"); i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ~Served() {
        server_->stop();
        if (thread_.joinable()) thread_.join();
    }
    json complete(const std::vector<int32_t> &prompt, bool cache) {
        json body = {{"model", "m"}, {"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}, {"logprobs", 5}};
        if (!cache) body["cache_prompt"] = false;
        httplib::Client c("127.0.0.1", server_->port());
        c.set_read_timeout(120, 0);
        auto r = c.Post("/v1/completions", body.dump(), "application/json");
        EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
        return r ? json::parse(r->body, nullptr, false) : json();
    }
    std::string metrics() {
        httplib::Client c("127.0.0.1", server_->port());
        auto r = c.Get("/metrics");
        return r ? r->body : "";
    }

private:
    std::unique_ptr<Model> model_;
    std::unique_ptr<Server> server_;
    std::thread thread_;
};

int cached(const json &j) { return j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(); }

TEST(ServerPromptReuse, SecondTurnReusesThePrefixWithIdenticalLogprobs) {
    std::string why;
    const auto &models = sluice_test::reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    for (const auto &m : models) {
        SCOPED_TRACE(m.name);
        Served s(m.path);
        const std::vector<int32_t> turn1 = ids(30, m.vocab, 1);
        std::vector<int32_t> turn2(turn1.begin(), turn1.begin() + 21);  // inside an interval (8)
        const std::vector<int32_t> more = ids(12, m.vocab, 2);
        turn2.insert(turn2.end(), more.begin(), more.end());

        const json a = s.complete(turn1, true);
        EXPECT_EQ(cached(a), 0);
        // Reuses 21 tokens of turn 1. With KDA layers the checkpoint at 16
        // is restored and the 5 positions to 21 are replayed from the log
        // (no token evaluated again), so all 21 count as cached; the MLA
        // cache alone is cut at 21.
        const int want_cached = 21;
        const json b = s.complete(turn2, true);
        const json fresh = s.complete(turn2, false);  // resets: the whole prompt evaluated
        const json again = s.complete(turn2, true);   // the same prompt: all but its last token
        EXPECT_EQ(cached(b), want_cached);
        EXPECT_EQ(cached(fresh), 0);
        EXPECT_EQ(cached(again), (int)turn2.size() - 1);
        EXPECT_EQ(b["usage"]["prompt_tokens"], (int)turn2.size());
        const json &lb = b["choices"][0]["logprobs"], &lf = fresh["choices"][0]["logprobs"];
        ASSERT_TRUE(lb.is_object() && lb.contains("token_logprobs")) << b.dump();
        EXPECT_EQ(lb.dump(), lf.dump()) << "reused prefix changed the log-probabilities";
        EXPECT_EQ(again["choices"][0]["logprobs"].dump(), lf.dump());
        EXPECT_EQ(b["choices"][0]["token_ids"], fresh["choices"][0]["token_ids"]);

        const std::string met = s.metrics();
        const std::string want = "sluice_prompt_tokens_cached_total " + std::to_string(want_cached + (int)turn2.size() - 1) + "\n";
        EXPECT_NE(met.find(want), std::string::npos) << met;
        EXPECT_NE(met.find("sluice_prompt_tokens_reevaluated_total 0\n"), std::string::npos) << met;
        if (m.recurrent) {
            EXPECT_NE(met.find("sluice_prompt_tokens_replayed_total 5\n"), std::string::npos) << met;
        }
    }
}

// Two conversations taking turns (an agent and its sub-agent): with
// sessions kept aside each goes on from its own prefix, bit-identical to a
// fresh evaluation; with none kept, each turn evaluates its whole history
// (they share no prefix).
TEST(ServerPromptReuse, ConversationsTakingTurnsEachGoOnFromTheirOwnPrefix) {
    std::string why;
    const auto &models = sluice_test::reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    for (const auto &m : models) {
        SCOPED_TRACE(m.name);
        for (const uint64_t keep : {uint64_t(64) << 20, uint64_t(0)}) {
            SCOPED_TRACE(keep ? "sessions kept" : "none kept");
            Served s(m.path, keep);
            std::vector<int32_t> a = ids(60, m.vocab, 3), b = ids(50, m.vocab, 4);
            b[0] = (a[0] + 1) % m.vocab;  // nothing shared
            const json a1 = s.complete(a, true), b1 = s.complete(b, true);
            EXPECT_EQ(cached(a1), 0);
            EXPECT_EQ(cached(b1), 0);
            // Each conversation's next turn: its prompt, its reply, new tokens.
            auto next = [&](std::vector<int32_t> p, const json &reply, int salt) {
                for (const auto &t : reply["choices"][0]["token_ids"]) p.push_back(t.get<int32_t>());
                const std::vector<int32_t> more = ids(10, m.vocab, salt);
                p.insert(p.end(), more.begin(), more.end());
                return p;
            };
            const std::vector<int32_t> a2 = next(a, a1, 5), b2 = next(b, b1, 6);
            const json ra = s.complete(a2, true), rb = s.complete(b2, true);
            if (keep) {
                // All of the previous prompt comes back (a KDA model
                // re-evaluates from its end-of-prompt checkpoint).
                EXPECT_GE(cached(ra), (int)a.size() - 1);
                EXPECT_GE(cached(rb), (int)b.size() - 1);
            } else {
                EXPECT_EQ(cached(ra), 0);
                EXPECT_EQ(cached(rb), 0);
            }
            const json fa = s.complete(a2, false), fb = s.complete(b2, false);
            EXPECT_EQ(ra["choices"][0]["logprobs"].dump(), fa["choices"][0]["logprobs"].dump());
            EXPECT_EQ(rb["choices"][0]["logprobs"].dump(), fb["choices"][0]["logprobs"].dump());
            const std::string met = s.metrics();
            if (keep) {
                EXPECT_NE(met.find("sluice_sessions_resumed_total 2\n"), std::string::npos) << met;
            } else {
                EXPECT_NE(met.find("sluice_sessions_resumed_total 0\n"), std::string::npos) << met;
            }
            std::printf("%-12s %s: turn 2 cached %d of %d (A) and %d of %d (B)\n", m.name.c_str(),
                        keep ? "kept" : "none", cached(ra), (int)a2.size(), cached(rb), (int)b2.size());
        }
    }
}

}  // namespace
