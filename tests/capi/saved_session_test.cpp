// Sessions kept aside (sluice_session_*): a conversation copied out while
// another runs and copied back gives the logits it would have given had it
// never left, its checkpoints come with it, the bytes are bounded by
// session_bytes (counted in the plan), and a copy from another model is
// refused with the live session unchanged. Every family's generated model.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "capi/prompt_reuse_models.h"
#include "sluice/sluice.h"

using namespace sluice_test;

namespace {

sluice_ctx *open_with(const ReuseModel &m, uint64_t session_bytes) {
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.n_threads = 2;
    cfg.no_hotlist = 1;
    cfg.no_direct_io = 1;
    cfg.checkpoint_interval = 16;
    cfg.session_bytes = session_bytes;
    sluice_ctx *ctx = nullptr;
    EXPECT_EQ(sluice_open(m.path.c_str(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
    return ctx;
}

std::vector<int32_t> ids(const ReuseModel &m, size_t n, size_t salt) {
    std::vector<int32_t> v(n);
    for (size_t i = 0; i < n; i++) v[i] = (int32_t)((i * 131 + salt * 17 + 7) % (size_t)m.vocab);
    return v;
}

std::vector<float> fresh(const ReuseModel &m, const std::vector<int32_t> &prompt) {
    sluice_ctx *ctx = open_with(m, 0);
    std::vector<float> out((size_t)m.vocab);
    if (!ctx) return out;
    EXPECT_EQ(sluice_eval(ctx, prompt.data(), prompt.size(), out.data()), SLUICE_OK) << sluice_last_error(ctx);
    sluice_close(ctx);
    return out;
}

TEST(SavedSession, RestoredConversationGivesTheSameBits) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    for (const ReuseModel &m : models) {
        SCOPED_TRACE(m.name);
        sluice_ctx *ctx = open_with(m, 64u << 20);
        ASSERT_TRUE(ctx);
        const std::vector<int32_t> a = ids(m, 70, 1), b = ids(m, 45, 2), more = ids(m, 9, 3);
        std::vector<float> logits((size_t)m.vocab);
        // Conversation A, kept aside; conversation B runs in its place.
        ASSERT_EQ(sluice_eval(ctx, a.data(), a.size(), logits.data()), SLUICE_OK) << sluice_last_error(ctx);
        sluice_session *sa = nullptr, *sb = nullptr;
        ASSERT_EQ(sluice_session_save(ctx, &sa), SLUICE_OK) << sluice_last_error(ctx);
        ASSERT_EQ(sluice_reset(ctx), SLUICE_OK);
        ASSERT_EQ(sluice_eval(ctx, b.data(), b.size(), logits.data()), SLUICE_OK);
        ASSERT_EQ(sluice_session_save(ctx, &sb), SLUICE_OK) << sluice_last_error(ctx);
        sluice_memory_plan plan{};
        ASSERT_EQ(sluice_memory_plan_get(ctx, &plan), SLUICE_OK);
        EXPECT_EQ(plan.sessions, 64u << 20);
        std::printf("%-12s saved A (%zu tokens) %llu bytes, B (%zu tokens) %llu bytes\n", m.name.c_str(), a.size(),
                    (unsigned long long)sluice_session_bytes(sa), b.size(), (unsigned long long)sluice_session_bytes(sb));
        EXPECT_GT(sluice_session_bytes(sa), sluice_session_bytes(sb));
        std::vector<int32_t> toks(a.size());
        size_t n = 0;
        ASSERT_EQ(sluice_session_saved_tokens(sa, toks.data(), toks.size(), &n), SLUICE_OK);
        EXPECT_EQ(n, a.size());
        EXPECT_EQ(toks, a);

        // A comes back and goes on: the bits of A + more evaluated fresh.
        std::vector<int32_t> a_more = a;
        a_more.insert(a_more.end(), more.begin(), more.end());
        const std::vector<float> want = fresh(m, a_more);
        ASSERT_EQ(sluice_session_restore(ctx, sa), SLUICE_OK) << sluice_last_error(ctx);
        EXPECT_EQ(sluice_n_past(ctx), (int32_t)a.size());
        ASSERT_EQ(sluice_eval(ctx, more.data(), more.size(), logits.data()), SLUICE_OK);
        EXPECT_EQ(std::memcmp(logits.data(), want.data(), logits.size() * 4), 0) << "restored, then continued";

        // Again from the saved copy (it stays valid), rewinding inside A's
        // prefix: its newest checkpoint (64, every 16) came with it.
        sluice_stats before{}, after{};
        ASSERT_EQ(sluice_session_restore(ctx, sa), SLUICE_OK);
        ASSERT_EQ(sluice_stats_get(ctx, &before), SLUICE_OK);
        ASSERT_EQ(sluice_rewind(ctx, 67), SLUICE_OK) << sluice_last_error(ctx);
        ASSERT_EQ(sluice_stats_get(ctx, &after), SLUICE_OK);
        if (m.recurrent) {
            EXPECT_EQ(after.rewind_tokens_reevaluated - before.rewind_tokens_reevaluated, 3u)
                << "A's newest checkpoint (64) was saved with it";
        }
        std::vector<int32_t> tail(a_more.begin() + 67, a_more.end());
        ASSERT_EQ(sluice_eval(ctx, tail.data(), tail.size(), logits.data()), SLUICE_OK);
        EXPECT_EQ(std::memcmp(logits.data(), want.data(), logits.size() * 4), 0) << "restored, rewound, continued";

        // B's turn again.
        std::vector<int32_t> b_more = b;
        b_more.insert(b_more.end(), more.begin(), more.end());
        const std::vector<float> want_b = fresh(m, b_more);
        ASSERT_EQ(sluice_session_restore(ctx, sb), SLUICE_OK);
        ASSERT_EQ(sluice_eval(ctx, more.data(), more.size(), logits.data()), SLUICE_OK);
        EXPECT_EQ(std::memcmp(logits.data(), want_b.data(), logits.size() * 4), 0);
        // B again, rewound to before its newest checkpoint (32): from 0.
        ASSERT_EQ(sluice_session_restore(ctx, sb), SLUICE_OK);
        ASSERT_EQ(sluice_rewind(ctx, 20), SLUICE_OK) << sluice_last_error(ctx);
        std::vector<int32_t> b_tail(b_more.begin() + 20, b_more.end());
        ASSERT_EQ(sluice_eval(ctx, b_tail.data(), b_tail.size(), logits.data()), SLUICE_OK);
        EXPECT_EQ(std::memcmp(logits.data(), want_b.data(), logits.size() * 4), 0) << "rewound to before the checkpoint";
        sluice_session_free(sa);
        sluice_session_free(sb);
        sluice_close(ctx);
    }
}

TEST(SavedSession, BytesAreBoundedAndFreedSessionsGiveThemBack) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    const ReuseModel &m = models[0];
    const std::vector<int32_t> a = ids(m, 50, 4);
    std::vector<float> logits((size_t)m.vocab);
    uint64_t one = 0;
    {
        sluice_ctx *ctx = open_with(m, 64u << 20);
        ASSERT_TRUE(ctx);
        ASSERT_EQ(sluice_eval(ctx, a.data(), a.size(), logits.data()), SLUICE_OK);
        sluice_session *s = nullptr;
        ASSERT_EQ(sluice_session_save(ctx, &s), SLUICE_OK);
        one = sluice_session_bytes(s);
        sluice_session_free(s);
        sluice_close(ctx);
    }
    ASSERT_GT(one, 0u);
    // Room for one session of this size, not two.
    sluice_ctx *ctx = open_with(m, one + one / 2);
    ASSERT_TRUE(ctx);
    ASSERT_EQ(sluice_eval(ctx, a.data(), a.size(), logits.data()), SLUICE_OK);
    sluice_session *s1 = nullptr, *s2 = nullptr;
    ASSERT_EQ(sluice_session_save(ctx, &s1), SLUICE_OK) << sluice_last_error(ctx);
    EXPECT_EQ(sluice_session_save(ctx, &s2), SLUICE_E_NOMEM);
    EXPECT_EQ(s2, nullptr);
    EXPECT_NE(std::strstr(sluice_last_error(ctx), "session_bytes"), nullptr) << sluice_last_error(ctx);
    EXPECT_EQ(sluice_n_past(ctx), (int32_t)a.size()) << "a refused save changes nothing";
    sluice_session_free(s1);
    ASSERT_EQ(sluice_session_save(ctx, &s2), SLUICE_OK) << "freed bytes are given back";
    // Freed after its context closed: still fine (ASan checks the count).
    sluice_close(ctx);
    sluice_session_free(s2);
    // Auto: room for two sessions at the context, in the plan.
    {
        sluice_ctx *a2 = open_with(m, SLUICE_SESSION_BYTES_AUTO);
        ASSERT_TRUE(a2);
        sluice_memory_plan p{};
        ASSERT_EQ(sluice_memory_plan_get(a2, &p), SLUICE_OK);
        std::printf("auto session_bytes: %llu bytes at context %d (one saved session of 50 tokens: %llu)\n",
                    (unsigned long long)p.sessions, p.context, (unsigned long long)one);
        EXPECT_GT(p.sessions, 2 * one);
        sluice_close(a2);
    }
    // No room at all by default.
    sluice_ctx *none = open_with(m, 0);
    ASSERT_TRUE(none);
    sluice_session *s3 = nullptr;
    EXPECT_EQ(sluice_session_save(none, &s3), SLUICE_E_NOMEM);
    sluice_close(none);
}

TEST(SavedSession, AnotherModelsSessionIsRefused) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.size() < 2) GTEST_SKIP() << (why.empty() ? "needs two generated models" : why);
    sluice_ctx *x = open_with(models[0], 64u << 20), *y = open_with(models[1], 64u << 20);
    ASSERT_TRUE(x && y);
    const std::vector<int32_t> a = ids(models[0], 30, 5), b = ids(models[1], 20, 6);
    std::vector<float> lx((size_t)models[0].vocab), ly((size_t)models[1].vocab);
    ASSERT_EQ(sluice_eval(x, a.data(), a.size(), lx.data()), SLUICE_OK);
    ASSERT_EQ(sluice_eval(y, b.data(), b.size(), ly.data()), SLUICE_OK);
    sluice_session *sx = nullptr;
    ASSERT_EQ(sluice_session_save(x, &sx), SLUICE_OK);
    EXPECT_EQ(sluice_session_restore(y, sx), SLUICE_E_ARG);
    std::printf("refused: %s\n", sluice_last_error(y));
    EXPECT_NE(std::strstr(sluice_last_error(y), "restore_session"), nullptr);
    EXPECT_EQ(sluice_n_past(y), (int32_t)b.size()) << "the live session is unchanged";
    // y goes on as if nothing happened.
    std::vector<int32_t> one = {3};
    ASSERT_EQ(sluice_eval(y, one.data(), 1, ly.data()), SLUICE_OK);
    EXPECT_EQ(sluice_session_restore(y, nullptr), SLUICE_E_ARG);
    sluice_session_free(sx);
    sluice_close(x);
    sluice_close(y);
}

}  // namespace
