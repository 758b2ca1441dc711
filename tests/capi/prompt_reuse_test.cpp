// Prompt reuse through the C API: a session rewound to a shared prefix and
// fed the rest gives logits bit-identical to a fresh context evaluating the
// whole prompt, on each family (KDA + MLA, MLA only, K3), at every kind of
// rewind target (inside a checkpoint interval, exactly on a checkpoint, 0,
// past several intervals), across prefill chunk sizes, with the checkpoint
// pool within its bytes. Generated containers always; ../shared/fixtures/warp
// too when present.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "capi/prompt_reuse_models.h"
#include "fixtures_util.h"
#include "sluice/sluice.h"

using namespace sluice_test;

namespace {

struct Opts {
    int chunk = 1;
    int interval = 8;
    int64_t pool = 0;  // sluice_config.checkpoint_bytes
    int wave = 0;      // sluice_config.prefill_wave (0: the plan's, the whole prompt here)
    int log = 1;       // sluice_config.replay_log (as sluice serve opens a model)
};

sluice_ctx *open_ctx(const std::string &path, const Opts &o) {
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.n_threads = 2;
    cfg.no_hotlist = 1;
    cfg.no_direct_io = 1;
    cfg.prefill_chunk = o.chunk;
    cfg.checkpoint_interval = o.interval;
    cfg.checkpoint_bytes = o.pool;
    cfg.replay_log = o.log;
    cfg.prefill_wave = o.wave;
    sluice_ctx *ctx = nullptr;
    EXPECT_EQ(sluice_open(path.c_str(), &cfg, &ctx), SLUICE_OK) << path << ": " << sluice_last_error(ctx);
    return ctx;
}

std::vector<int32_t> ids(size_t n, int vocab, int salt) {
    std::vector<int32_t> v(n);
    for (size_t i = 0; i < n; i++) v[i] = (int32_t)((i * 97 + (size_t)salt * 31 + 5) % (size_t)vocab);
    return v;
}

// Every position's logits of `prompt` in a fresh context.
std::vector<float> fresh(const std::string &path, const std::vector<int32_t> &prompt, const Opts &o) {
    sluice_ctx *ctx = open_ctx(path, o);
    std::vector<float> out;
    if (ctx) {
        out.resize((size_t)sluice_n_vocab(ctx) * prompt.size());
        EXPECT_EQ(sluice_eval_all(ctx, prompt.data(), prompt.size(), out.data()), SLUICE_OK) << sluice_last_error(ctx);
    }
    sluice_close(ctx);
    return out;
}

sluice_stats stats(sluice_ctx *ctx) {
    sluice_stats s;
    EXPECT_EQ(sluice_stats_get(ctx, &s), SLUICE_OK);
    return s;
}

// The session's tokens through the C API.
// Positions rewinds took from a checkpoint to their targets between two
// readings, evaluated again or replayed from the log.
uint64_t moved(const sluice_stats &a, const sluice_stats &b) {
    return (b.rewind_tokens_reevaluated - a.rewind_tokens_reevaluated) +
           (b.rewind_tokens_replayed - a.rewind_tokens_replayed);
}

// got (the last position's logits after keeping `keep` tokens of `first`
// and evaluating `tail`) against a fresh, token-at-a-time evaluation of the
// same prompt: bit for bit.
void expect_fresh_last(const ReuseModel &m, const Opts &o, const std::vector<int32_t> &first, size_t keep,
                       const std::vector<int32_t> &tail, const std::vector<float> &got) {
    std::vector<int32_t> whole(first.begin(), first.begin() + (ptrdiff_t)keep);
    whole.insert(whole.end(), tail.begin(), tail.end());
    Opts step = o;
    step.chunk = 1;
    step.wave = 1;
    const std::vector<float> ref = fresh(m.path, whole, step);
    const size_t V = got.size();
    ASSERT_EQ(ref.size(), V * whole.size());
    EXPECT_EQ(std::memcmp(got.data(), ref.data() + (whole.size() - 1) * V, V * 4), 0) << "logits changed";
}

std::vector<int32_t> session(sluice_ctx *ctx) {
    size_t n = 0;
    const sluice_status st = sluice_session_tokens(ctx, nullptr, 0, &n);
    EXPECT_EQ(st, n == 0 ? SLUICE_OK : SLUICE_E_RANGE);
    EXPECT_EQ(n, (size_t)sluice_n_past(ctx));
    std::vector<int32_t> t(n);
    EXPECT_EQ(sluice_session_tokens(ctx, t.data(), t.size(), &n), SLUICE_OK);
    return t;
}

// One turn: the session holds `first`; the next prompt keeps `keep` of it
// and goes on with other tokens. The rewound session's logits for the new
// tokens must equal a fresh evaluation of the whole new prompt, bit for bit.
// expect_again: tokens the rewind evaluates again; -1 = from the newest
// interval checkpoint at or before keep (every one still in the pool).
void check_turn(const ReuseModel &m, const Opts &o, size_t n_first, size_t keep, size_t n_new,
                int64_t expect_again = -1) {
    SCOPED_TRACE(m.name + ": chunk " + std::to_string(o.chunk) + ", wave " + std::to_string(o.wave) +
                 ", interval " + std::to_string(o.interval) +
                 ", session " + std::to_string(n_first) + ", keep " + std::to_string(keep) + ", new " +
                 std::to_string(n_new));
    const std::vector<int32_t> first = ids(n_first, m.vocab, 1);
    std::vector<int32_t> next(first.begin(), first.begin() + (ptrdiff_t)keep);
    const std::vector<int32_t> tail = ids(n_new, m.vocab, 2);
    next.insert(next.end(), tail.begin(), tail.end());
    // The reference is one token at a time: chunks, waves and reuse all
    // have to give its bits.
    Opts step = o;
    step.chunk = 1;
    step.wave = 1;
    const std::vector<float> ref = fresh(m.path, next, step);

    // all: the new tokens through sluice_eval_all, every row compared (the
    // rewind's tokens evaluated first, alone); else through sluice_eval, the
    // rewind's tokens in the same pass (the server's way), the last row.
    for (const bool all : {true, false}) {
        SCOPED_TRACE(all ? "sluice_eval_all" : "sluice_eval");
        sluice_ctx *ctx = open_ctx(m.path, o);
        ASSERT_NE(ctx, nullptr);
        const size_t V = (size_t)sluice_n_vocab(ctx);
        ASSERT_EQ(sluice_eval(ctx, first.data(), first.size(), nullptr), SLUICE_OK) << sluice_last_error(ctx);
        EXPECT_EQ(session(ctx), first);
        const sluice_stats before = stats(ctx);
        ASSERT_EQ(sluice_rewind(ctx, (int32_t)keep), SLUICE_OK) << sluice_last_error(ctx);
        const sluice_stats after = stats(ctx);
        EXPECT_EQ(sluice_n_past(ctx), (int)keep);
        EXPECT_EQ(session(ctx), std::vector<int32_t>(first.begin(), first.begin() + (ptrdiff_t)keep));
        // The newest checkpoint at or before keep is a multiple of the interval
        // (all of them are still in the pool here): only the tokens from it to
        // keep are taken again, replayed from the log where it reaches back
        // to the checkpoint, else evaluated again. Without KDA layers nothing is.
        const uint64_t again = after.rewind_tokens_reevaluated - before.rewind_tokens_reevaluated;
        const uint64_t replayed = after.rewind_tokens_replayed - before.rewind_tokens_replayed;
        const int every = o.interval == 0 ? 64 : o.interval;
        int64_t want = expect_again;
        if (want < 0)
            want = !m.recurrent || keep == n_first ? 0 : every > 0 ? (int64_t)(keep % (size_t)every) : (int64_t)keep;
        const int64_t from = (int64_t)keep - want, log = (int64_t)after.replay_log_positions;
        const bool in_log = log > 0 && from >= std::max<int64_t>(0, (int64_t)n_first - log);
        EXPECT_EQ(again, in_log ? 0u : (uint64_t)want);
        EXPECT_EQ(replayed, in_log ? (uint64_t)want : 0u);
        EXPECT_EQ(after.tokens_evaluated - before.tokens_evaluated, 0u) << "the rewind's tokens wait for the next eval";

        std::vector<float> got(V * (all ? tail.size() : 1));
        if (all)
            ASSERT_EQ(sluice_eval_all(ctx, tail.data(), tail.size(), got.data()), SLUICE_OK) << sluice_last_error(ctx);
        else
            ASSERT_EQ(sluice_eval(ctx, tail.data(), tail.size(), got.data()), SLUICE_OK) << sluice_last_error(ctx);
        const sluice_stats done = stats(ctx);
        EXPECT_EQ(done.tokens_evaluated - after.tokens_evaluated, again + tail.size());
        EXPECT_EQ(sluice_n_past(ctx), (int)next.size());
        EXPECT_EQ(session(ctx), next);
        ASSERT_EQ(ref.size(), V * next.size());
        const size_t row0 = all ? keep : next.size() - 1;
        const bool same = std::memcmp(got.data(), ref.data() + row0 * V, got.size() * 4) == 0;
        EXPECT_TRUE(same) << "reused prefix changed the logits";
        // The pool never holds more than its bytes.
        sluice_memory_plan plan;
        ASSERT_EQ(sluice_memory_plan_get(ctx, &plan), SLUICE_OK);
        const sluice_stats end = stats(ctx);
        EXPECT_LE(end.checkpoint_bytes, plan.checkpoints);
        EXPECT_LE(end.checkpoints_held, end.checkpoint_capacity);
        // The rewind's target holds a checkpoint now: rewinding there again
        // evaluates nothing.
        if (m.recurrent && keep > 0 && keep < n_first && o.pool >= 0) {
            ASSERT_EQ(sluice_rewind(ctx, (int32_t)keep), SLUICE_OK);
            EXPECT_EQ(stats(ctx).rewind_tokens_reevaluated - end.rewind_tokens_reevaluated, 0u);
            EXPECT_EQ(stats(ctx).rewind_tokens_replayed - end.rewind_tokens_replayed, 0u);
        }
        sluice_close(ctx);
    }
}

TEST(PromptReuse, RewoundPrefixIsBitIdenticalOnEachFamily) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    for (const ReuseModel &m : models) {
        // Pool of 8 checkpoints (interval 8, 40 tokens: 5 taken, none evicted).
        // Waves: the whole prompt (0), 11 tokens (checkpoints at 8, 16, 24,
        // 32 fall inside waves), one token at a time.
        for (const auto &[chunk, wave] : {std::pair{1, 0}, {5, 0}, {64, 0}, {3, 11}, {1, 1}}) {
            const Opts o{chunk, 8, 0, wave};
            sluice_ctx *probe = open_ctx(m.path, o);
            ASSERT_NE(probe, nullptr);
            sluice_memory_plan plan;
            ASSERT_EQ(sluice_memory_plan_get(probe, &plan), SLUICE_OK);
            sluice_close(probe);
            if (m.recurrent) EXPECT_GT(plan.checkpoints, 0u) << m.name;
            else EXPECT_EQ(plan.checkpoints, 0u) << m.name << ": no KDA layer, no checkpoint";
            const Opts big{chunk, 8, m.recurrent ? (int64_t)plan.checkpoints * 2 : 0, wave};
            check_turn(m, big, 40, 13, 9);  // inside an interval
            check_turn(m, big, 40, 16, 9);  // exactly a checkpoint
            check_turn(m, big, 40, 0, 9);   // to 0
            check_turn(m, big, 40, 37, 6);  // past several intervals
            check_turn(m, big, 40, 40, 3);  // the whole session kept
        }
    }
}

// The default interval (64): a prefix longer than the pool's reach
// restores the newest checkpoint (256) and re-evaluates only the tokens
// after it.
TEST(PromptReuse, DefaultIntervalPrefixLongerThanAnInterval) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    const ReuseModel &m = models[0];  // Kimi-Linear
    check_turn(m, Opts{64, 0, 0}, 300, 290, 5);
    check_turn(m, Opts{64, 0, 0}, 300, 256, 5);
}

// A checkpoint taken where a prompt ended (sluice_checkpoint) and at a
// rewind target: the next rewind there evaluates nothing again.
TEST(PromptReuse, CheckpointAtPromptEndAndRewindTarget) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    const ReuseModel &m = models[0];
    sluice_ctx *ctx = open_ctx(m.path, Opts{4, -1, 0});  // no interval checkpoints
    ASSERT_NE(ctx, nullptr);
    const auto a = ids(30, m.vocab, 3);
    ASSERT_EQ(sluice_eval(ctx, a.data(), 20, nullptr), SLUICE_OK);
    ASSERT_EQ(sluice_checkpoint(ctx), SLUICE_OK);
    ASSERT_EQ(sluice_eval(ctx, a.data() + 20, 10, nullptr), SLUICE_OK);
    sluice_stats s0 = stats(ctx);
    ASSERT_EQ(sluice_rewind(ctx, 20), SLUICE_OK);
    sluice_stats s1 = stats(ctx);
    EXPECT_EQ(moved(s0, s1), 0u) << "the prompt-end checkpoint";
    ASSERT_EQ(sluice_eval(ctx, a.data() + 20, 10, nullptr), SLUICE_OK);
    ASSERT_EQ(sluice_rewind(ctx, 25), SLUICE_OK);  // from 20: 5 again, then a checkpoint at 25
    sluice_stats s2 = stats(ctx);
    EXPECT_EQ(moved(s1, s2), 5u);
    ASSERT_EQ(sluice_eval(ctx, a.data() + 25, 5, nullptr), SLUICE_OK);
    ASSERT_EQ(sluice_rewind(ctx, 25), SLUICE_OK);
    sluice_stats s3 = stats(ctx);
    EXPECT_EQ(moved(s2, s3), 0u) << "the rewind-target checkpoint";
    sluice_close(ctx);
}

// A pool of two checkpoints: the oldest goes first, the pool never exceeds
// its bytes, and an evicted checkpoint only costs re-evaluation (the logits
// stay exact).
TEST(PromptReuse, PoolEvictsOldestWithinItsBytes) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    const ReuseModel &m = models[0];
    sluice_ctx *probe = open_ctx(m.path, Opts{1, 8, 0});
    ASSERT_NE(probe, nullptr);
    sluice_memory_plan plan;
    ASSERT_EQ(sluice_memory_plan_get(probe, &plan), SLUICE_OK);
    sluice_close(probe);
    const uint64_t one = plan.checkpoints / 4;  // the default pool: 4 checkpoints
    ASSERT_GT(one, 0u);
    // Two and a half checkpoints' bytes: rounded down to two.
    const Opts o{3, 8, (int64_t)(one * 5 / 2)};
    sluice_ctx *ctx = open_ctx(m.path, o);
    ASSERT_NE(ctx, nullptr);
    ASSERT_EQ(sluice_memory_plan_get(ctx, &plan), SLUICE_OK);
    EXPECT_EQ(plan.checkpoints, 2 * one);
    const auto a = ids(40, m.vocab, 4);
    ASSERT_EQ(sluice_eval(ctx, a.data(), a.size(), nullptr), SLUICE_OK);  // checkpoints 8..40: 32 and 40 kept
    sluice_stats s = stats(ctx);
    EXPECT_EQ(s.checkpoints_held, 2u);
    EXPECT_EQ(s.checkpoint_bytes, 2 * one);
    EXPECT_EQ(s.checkpoint_capacity, 2u);
    ASSERT_EQ(sluice_rewind(ctx, 20), SLUICE_OK);  // 8 and 16 were evicted: from 0
    sluice_stats s2 = stats(ctx);
    EXPECT_EQ(moved(s, s2), 20u);
    EXPECT_LE(s2.checkpoint_bytes, plan.checkpoints);
    sluice_close(ctx);
    check_turn(m, o, 40, 20, 7, 20);
}

TEST(PromptReuse, ErrorsAreReturnedAndLeaveTheSession) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    const ReuseModel &m = models[0];
    sluice_ctx *ctx = open_ctx(m.path, Opts{});
    ASSERT_NE(ctx, nullptr);
    const auto a = ids(12, m.vocab, 5);
    ASSERT_EQ(sluice_eval(ctx, a.data(), a.size(), nullptr), SLUICE_OK);
    EXPECT_EQ(sluice_rewind(ctx, -1), SLUICE_E_RANGE);
    EXPECT_NE(std::string(sluice_last_error(ctx)).find("outside"), std::string::npos) << sluice_last_error(ctx);
    EXPECT_EQ(sluice_rewind(ctx, 13), SLUICE_E_RANGE);
    EXPECT_EQ(sluice_n_past(ctx), 12);
    int32_t small[4];
    size_t n = 0;
    EXPECT_EQ(sluice_session_tokens(ctx, small, 4, &n), SLUICE_E_RANGE);
    EXPECT_EQ(n, 12u);
    EXPECT_EQ(sluice_session_tokens(ctx, small, 4, nullptr), SLUICE_E_ARG);
    // A loaded state has no token ids: a rewind that must re-evaluate is
    // refused by name, and the session is untouched.
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("sluice-reuse-state-" + std::to_string(::getpid()))).string();
    ASSERT_EQ(sluice_state_save(ctx, path.c_str()), SLUICE_OK);
    ASSERT_EQ(sluice_state_load(ctx, path.c_str()), SLUICE_OK);
    const std::vector<int32_t> unknown(12, -1);
    EXPECT_EQ(session(ctx), unknown);
    EXPECT_EQ(sluice_rewind(ctx, 5), SLUICE_E_STATE);
    EXPECT_NE(std::string(sluice_last_error(ctx)).find("not known"), std::string::npos) << sluice_last_error(ctx);
    EXPECT_EQ(sluice_n_past(ctx), 12);
    EXPECT_EQ(sluice_rewind(ctx, 0), SLUICE_OK);  // the zero state needs no token
    EXPECT_EQ(sluice_n_past(ctx), 0);
    std::filesystem::remove(path);
    sluice_close(ctx);
}

// Where the replay log does not reach back to the checkpoint (a session of
// 200 tokens: the log holds the last 128 positions, the pool the newest four
// interval checkpoints), the tokens a rewind leaves to evaluate wait for the
// next eval: a second rewind inside them keeps fewer, a refused eval keeps
// them, a checkpoint asked for past n_past is taken in the eval's pass, and
// the logits stay those of a fresh evaluation (the server's turn: rewind,
// checkpoint at the prompt's last token, one eval). Saving the state
// evaluates them first.
TEST(PromptReuse, TokensLeftByARewindGoWithTheNextEval) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    const ReuseModel &m = models[0];  // Kimi-Linear
    const Opts o{2, 8, 0};
    sluice_ctx *ctx = open_ctx(m.path, o);
    ASSERT_NE(ctx, nullptr);
    const size_t V = (size_t)sluice_n_vocab(ctx);
    const auto first = ids(200, m.vocab, 6);
    ASSERT_EQ(sluice_eval(ctx, first.data(), first.size(), nullptr), SLUICE_OK);
    const sluice_stats s0 = stats(ctx);
    ASSERT_GT(s0.replay_log_positions, 0u);
    ASSERT_LT(s0.replay_log_positions, 186u) << "the log must not reach position 14";
    ASSERT_EQ(sluice_rewind(ctx, 14), SLUICE_OK);  // no checkpoint at or before 14 is kept: from 0
    EXPECT_EQ(stats(ctx).rewind_tokens_reevaluated - s0.rewind_tokens_reevaluated, 14u);
    EXPECT_EQ(stats(ctx).rewind_tokens_replayed, s0.rewind_tokens_replayed);
    ASSERT_EQ(sluice_rewind(ctx, 11), SLUICE_OK);  // 11 of them kept
    EXPECT_EQ(sluice_n_past(ctx), 11);
    EXPECT_EQ(session(ctx), std::vector<int32_t>(first.begin(), first.begin() + 11));
    EXPECT_EQ(stats(ctx).rewind_tokens_reevaluated - s0.rewind_tokens_reevaluated, 11u);
    EXPECT_EQ(stats(ctx).tokens_evaluated, s0.tokens_evaluated);
    EXPECT_EQ(sluice_checkpoint_at(ctx, 10), SLUICE_E_RANGE);
    EXPECT_NE(std::string(sluice_last_error(ctx)).find("before the session's end"), std::string::npos)
        << sluice_last_error(ctx);
    // A token outside the vocabulary: refused, nothing lost.
    std::vector<int32_t> tail = ids(7, m.vocab, 7);
    std::vector<int32_t> bad = tail;
    bad[3] = m.vocab;
    EXPECT_EQ(sluice_eval(ctx, bad.data(), bad.size(), nullptr), SLUICE_E_RANGE);
    EXPECT_EQ(sluice_n_past(ctx), 11);
    EXPECT_EQ(session(ctx), std::vector<int32_t>(first.begin(), first.begin() + 11));
    // The prompt 0..17: a checkpoint before its last token, one eval.
    ASSERT_EQ(sluice_checkpoint_at(ctx, 17), SLUICE_OK) << sluice_last_error(ctx);
    std::vector<float> got(V);
    ASSERT_EQ(sluice_eval(ctx, tail.data(), tail.size(), got.data()), SLUICE_OK) << sluice_last_error(ctx);
    const sluice_stats s1 = stats(ctx);
    EXPECT_EQ(s1.tokens_evaluated - s0.tokens_evaluated, 11u + tail.size()) << "one pass for both";
    expect_fresh_last(m, o, first, 11, tail, got);
    // Both checkpoints were taken in that pass: the rewind's target (11) and
    // the one asked for (17). Rewinding to either takes nothing again.
    ASSERT_EQ(sluice_rewind(ctx, 17), SLUICE_OK);
    EXPECT_EQ(moved(s1, stats(ctx)), 0u);
    ASSERT_EQ(sluice_rewind(ctx, 11), SLUICE_OK);
    EXPECT_EQ(moved(s1, stats(ctx)), 0u);
    sluice_close(ctx);

    // Saving the state evaluates what a rewind left first: the file is the
    // state at n_past.
    ctx = open_ctx(m.path, o);
    ASSERT_NE(ctx, nullptr);
    ASSERT_EQ(sluice_eval(ctx, first.data(), first.size(), nullptr), SLUICE_OK);
    const sluice_stats s2 = stats(ctx);
    ASSERT_EQ(sluice_rewind(ctx, 30), SLUICE_OK);  // from 0: 30 left
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("sluice-reuse-left-" + std::to_string(::getpid()))).string();
    ASSERT_EQ(sluice_state_save(ctx, path.c_str()), SLUICE_OK) << sluice_last_error(ctx);
    EXPECT_EQ(stats(ctx).tokens_evaluated - s2.tokens_evaluated, 30u);
    EXPECT_EQ(sluice_n_past(ctx), 30);
    std::filesystem::remove(path);
    sluice_close(ctx);
}

// The replay log: a rewind whose checkpoint the log reaches evaluates no
// token through the model (tokens_evaluated does not move), the next eval
// evaluates only its own tokens, and the logits are a fresh evaluation's,
// also for positions a later eval logged again.
TEST(PromptReuse, ReplayLogTakesRewindsItReaches) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    for (const ReuseModel &m : models) {
        if (!m.recurrent) continue;
        SCOPED_TRACE(m.name);
        const Opts o{3, 16, 0};
        sluice_ctx *ctx = open_ctx(m.path, o);
        ASSERT_NE(ctx, nullptr);
        const size_t V = (size_t)sluice_n_vocab(ctx);
        const auto first = ids(100, m.vocab, 8);
        ASSERT_EQ(sluice_eval(ctx, first.data(), first.size(), nullptr), SLUICE_OK);
        const sluice_stats s0 = stats(ctx);
        ASSERT_GE(s0.replay_log_positions, 100u);
        ASSERT_EQ(sluice_rewind(ctx, 75), SLUICE_OK);  // checkpoint 64: 11 replayed
        const sluice_stats s1 = stats(ctx);
        EXPECT_EQ(s1.rewind_tokens_replayed - s0.rewind_tokens_replayed, 11u);
        EXPECT_EQ(s1.rewind_tokens_reevaluated, s0.rewind_tokens_reevaluated);
        EXPECT_EQ(s1.tokens_evaluated, s0.tokens_evaluated);
        EXPECT_EQ(sluice_n_past(ctx), 75);
        const auto tail = ids(9, m.vocab, 9);
        std::vector<float> got(V);
        ASSERT_EQ(sluice_eval(ctx, tail.data(), tail.size(), got.data()), SLUICE_OK);
        EXPECT_EQ(stats(ctx).tokens_evaluated - s1.tokens_evaluated, tail.size());
        expect_fresh_last(m, o, first, 75, tail, got);
        // A replay into a position the later eval logged again, then one
        // more into the first prompt's part of the log.
        ASSERT_EQ(sluice_rewind(ctx, 82), SLUICE_OK);  // checkpoint 80 (the tail's): 2 replayed
        EXPECT_EQ(stats(ctx).rewind_tokens_replayed - s1.rewind_tokens_replayed, 2u);
        ASSERT_EQ(sluice_rewind(ctx, 70), SLUICE_OK);  // checkpoint 64: 6 replayed
        EXPECT_EQ(stats(ctx).rewind_tokens_replayed - s1.rewind_tokens_replayed, 8u);
        ASSERT_EQ(sluice_eval(ctx, tail.data(), tail.size(), got.data()), SLUICE_OK);
        expect_fresh_last(m, o, first, 70, tail, got);
        EXPECT_EQ(stats(ctx).rewind_tokens_reevaluated, s0.rewind_tokens_reevaluated);
        sluice_close(ctx);
    }
}

// Without replay_log (the default: one-shot callers keep the memory for the
// expert cache) the plan has no log and rewinds evaluate their tokens again,
// with the same logits.
TEST(PromptReuse, NoReplayLogUnlessAskedFor) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    const ReuseModel &m = models[0];  // Kimi-Linear
    Opts off{2, 8, 0};
    off.log = 0;
    sluice_ctx *ctx = open_ctx(m.path, off);
    ASSERT_NE(ctx, nullptr);
    sluice_memory_plan plan;
    ASSERT_EQ(sluice_memory_plan_get(ctx, &plan), SLUICE_OK);
    EXPECT_EQ(plan.replay_log, 0u);
    EXPECT_EQ(stats(ctx).replay_log_positions, 0u);
    sluice_close(ctx);
    Opts on = off;
    on.log = 1;
    ctx = open_ctx(m.path, on);
    ASSERT_NE(ctx, nullptr);
    ASSERT_EQ(sluice_memory_plan_get(ctx, &plan), SLUICE_OK);
    EXPECT_GT(plan.replay_log, 0u);
    sluice_close(ctx);
    check_turn(m, off, 40, 13, 9, 13);  // the pool of 4 keeps 16-40: 13 evaluated again, none replayed
}

// warp's fixtures of the three families, when present: a rewind inside the
// case's prompt and the rest fed again reproduce a fresh evaluation.
TEST(PromptReuse, WarpFixturesBitIdentical) {
    if (!have_fixtures()) GTEST_SKIP() << "no fixtures at " << warp_dir();
    for (const std::string name : {"kimi-linear-tiny", "deepseek-yarn-tiny", "k3-tiny"}) {
        const auto cases = fixture_cases(name);
        std::vector<int32_t> prompt = cases[2].ids;
        ReuseModel m{name, container_path(name), name != "deepseek-yarn-tiny", cases[2].vocab};
        const size_t n = prompt.size();
        ASSERT_GE(n, 4u) << name;
        for (const Opts &o : {Opts{1, 2, 0}, Opts{3, 2, 0}}) {
            sluice_ctx *ctx = open_ctx(m.path, o);
            ASSERT_NE(ctx, nullptr);
            const size_t V = (size_t)sluice_n_vocab(ctx);
            std::vector<float> ref(V * n), got(V * n);
            ASSERT_EQ(sluice_eval_all(ctx, prompt.data(), n, ref.data()), SLUICE_OK) << sluice_last_error(ctx);
            for (size_t keep : {n / 2, (size_t)2, (size_t)0, n - 1}) {
                ASSERT_EQ(sluice_rewind(ctx, (int32_t)keep), SLUICE_OK) << sluice_last_error(ctx);
                ASSERT_EQ(sluice_eval_all(ctx, prompt.data() + keep, n - keep, got.data()), SLUICE_OK);
                EXPECT_EQ(std::memcmp(got.data(), ref.data() + keep * V, (n - keep) * V * 4), 0)
                    << name << ": keep " << keep << " of " << n << ", chunk " << o.chunk;
            }
            sluice_close(ctx);
        }
    }
}

}  // namespace

namespace {

// Decode steps (one token per eval) take no interval checkpoint: a long
// reply must not evict the checkpoint where its prompt ended.
TEST(PromptReuse, DecodeStepsKeepThePromptEndCheckpoint) {
    std::string why;
    const auto &models = reuse_models(&why);
    if (models.empty()) GTEST_SKIP() << why;
    const ReuseModel &m = models[0];
    sluice_ctx *probe = open_ctx(m.path, Opts{});
    ASSERT_NE(probe, nullptr);
    sluice_memory_plan plan;
    ASSERT_EQ(sluice_memory_plan_get(probe, &plan), SLUICE_OK);
    sluice_close(probe);
    const Opts o{4, 8, (int64_t)(plan.checkpoints / 4 * 2)};  // a pool of 2
    sluice_ctx *ctx = open_ctx(m.path, o);
    ASSERT_NE(ctx, nullptr);
    const auto a = ids(60, m.vocab, 6);
    ASSERT_EQ(sluice_eval(ctx, a.data(), 19, nullptr), SLUICE_OK);  // checkpoints 8, 16
    ASSERT_EQ(sluice_checkpoint(ctx), SLUICE_OK);                   // 19: 8 evicted
    for (size_t i = 19; i < a.size(); i++) ASSERT_EQ(sluice_eval(ctx, &a[i], 1, nullptr), SLUICE_OK);
    const sluice_stats s0 = stats(ctx);
    EXPECT_EQ(s0.checkpoints_held, 2u);
    ASSERT_EQ(sluice_rewind(ctx, 21), SLUICE_OK);  // from the prompt's end: 2 positions again
    EXPECT_EQ(moved(s0, stats(ctx)), 2u);
    sluice_close(ctx);
}

}  // namespace
