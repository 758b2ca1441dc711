// The shelf's policy (server/session_shelf.h) against a fake keeper whose
// "sessions" are their token lists: when a kept conversation replaces the
// live one, when the live one is kept first, what goes when the byte limit
// is reached, and that a failing save never empties the shelf.
#include <gtest/gtest.h>

#include <numeric>

#include "server/session_shelf.h"

using namespace sluice::server;

namespace {

// Sessions are their tokens; each costs 4 bytes a token; `limit` bounds the
// kept ones together, as session_bytes bounds sluice_session_save.
class FakeKeeper final : public Keeper {
public:
    std::vector<int32_t> live;
    uint64_t limit = 1u << 20, used = 0;
    bool broken = false;  // keep() fails for another reason than room
    struct K final : Kept {
        uint64_t *used = nullptr;
        ~K() override { *used -= bytes; }
    };
    std::unique_ptr<Kept> keep(bool *full) override {
        *full = false;
        if (broken) return nullptr;
        const uint64_t b = live.size() * 4;
        if (used + b > limit) return *full = true, nullptr;
        auto k = std::make_unique<K>();
        k->tokens = live;
        k->bytes = b;
        k->used = &used;
        used += b;
        return k;
    }
    bool resume(const Kept &k) override {
        live = k.tokens;
        return true;
    }
};

std::vector<int32_t> conv(int start, size_t n) {
    std::vector<int32_t> v(n);
    std::iota(v.begin(), v.end(), start);
    return v;
}

std::vector<int32_t> plus(std::vector<int32_t> v, int32_t more) {
    v.push_back(more);
    v.push_back(more + 1);
    return v;
}

TEST(SessionShelf, AConversationThatComesBackGoesOnFromItsOwnSession) {
    FakeKeeper k;
    SessionShelf shelf;
    const std::vector<int32_t> a = conv(1000, 100), b = conv(5000, 80);
    k.live = a;  // A ran
    std::vector<int32_t> live = k.live;
    shelf.before_prompt(k, &live, plus(b, 1));  // B arrives: A is cut away, so kept first
    EXPECT_EQ(shelf.stats().kept, 1u);
    EXPECT_EQ(live, a) << "nothing kept shares more with B than the live session";
    k.live = b;  // B ran (after the live session was reset)
    live = k.live;
    shelf.before_prompt(k, &live, plus(a, 7));  // A comes back
    EXPECT_EQ(live, a) << "A was restored";
    EXPECT_EQ(k.live, a);
    EXPECT_EQ(shelf.stats().resumed, 1u);
    EXPECT_EQ(shelf.stats().held, 1u) << "B kept aside in its place, A's copy gone";
    live = k.live;
    shelf.before_prompt(k, &live, plus(b, 9));
    EXPECT_EQ(k.live, b);
    EXPECT_EQ(shelf.stats().resumed, 2u);
}

TEST(SessionShelf, SmallGainsStayWithTheLiveSession) {
    FakeKeeper k;
    SessionShelf shelf;
    std::vector<int32_t> shared = conv(1, 200);
    std::vector<int32_t> a = shared, b = shared;
    a.insert(a.end(), 10, 7);  // A and B differ in their last 10 tokens only
    b.insert(b.end(), 10, 8);
    k.live = a;
    std::vector<int32_t> live = k.live;
    shelf.before_prompt(k, &live, plus(b, 1));
    EXPECT_EQ(shelf.stats().kept, 0u) << "cutting 10 tokens costs less than a copy";
}

TEST(SessionShelf, TheLeastRecentlyUsedGoesWhenTheLimitIsReached) {
    FakeKeeper k;
    k.limit = 4 * 250;  // room for two conversations of 100 tokens, not three
    SessionShelf shelf;
    const std::vector<int32_t> a = conv(1000, 100), b = conv(3000, 100), c = conv(5000, 100), d = conv(7000, 100);
    std::vector<int32_t> live;
    for (const auto *next : {&b, &c, &d}) {
        k.live = next == &b ? a : next == &c ? b : c;
        live = k.live;
        shelf.before_prompt(k, &live, plus(*next, 1));
    }
    const ShelfStats st = shelf.stats();
    EXPECT_EQ(st.kept, 3u);
    EXPECT_EQ(st.dropped, 1u);
    EXPECT_EQ(st.held, 2u);
    EXPECT_LE(st.bytes, k.limit);
    // A went first: it does not come back. Keeping D (cut away by A's
    // return) pushes out the next least recently used, B; C comes back.
    k.live = d;
    live = k.live;
    shelf.before_prompt(k, &live, plus(a, 3));
    EXPECT_EQ(shelf.stats().resumed, 0u);
    EXPECT_EQ(shelf.stats().dropped, 2u);
    k.live = a;
    live = k.live;
    shelf.before_prompt(k, &live, plus(c, 3));
    EXPECT_EQ(k.live, c);
    EXPECT_EQ(shelf.stats().resumed, 1u);
}

TEST(SessionShelf, ALongerCopyOfTheSameConversationReplacesTheShorter) {
    FakeKeeper k;
    SessionShelf shelf;
    const std::vector<int32_t> a = conv(1000, 100), b = conv(5000, 100);
    std::vector<int32_t> a_long = a;
    for (int i = 0; i < 60; i++) a_long.push_back(9000 + i);
    k.live = a;
    std::vector<int32_t> live = k.live;
    shelf.before_prompt(k, &live, plus(b, 1));  // A (100) kept
    k.live = a_long;                            // later A ran on to 160 tokens
    live = k.live;
    shelf.before_prompt(k, &live, plus(b, 1));  // kept again: the 100-token copy is the same conversation
    EXPECT_EQ(shelf.stats().held, 1u);
    EXPECT_EQ(shelf.stats().bytes, a_long.size() * 4);
}

TEST(SessionShelf, ASaveThatFailsForAnotherReasonKeepsTheShelf) {
    FakeKeeper k;
    SessionShelf shelf;
    const std::vector<int32_t> a = conv(1000, 100), b = conv(5000, 100), c = conv(8000, 100);
    k.live = a;
    std::vector<int32_t> live = k.live;
    shelf.before_prompt(k, &live, plus(b, 1));
    ASSERT_EQ(shelf.stats().held, 1u);
    k.live = b;
    k.broken = true;
    live = k.live;
    shelf.before_prompt(k, &live, plus(c, 1));
    EXPECT_EQ(shelf.stats().held, 1u) << "A stays kept";
    EXPECT_EQ(shelf.stats().dropped, 0u);
}

TEST(SessionShelf, SharedPrefixNeverCountsTheLastPromptTokenOrUnknownPositions) {
    EXPECT_EQ(shared_prefix({1, 2, 3}, {1, 2, 3}), 2u);
    EXPECT_EQ(shared_prefix({1, -1, 3}, {1, 2, 3, 4}), 1u);
    EXPECT_EQ(shared_prefix({}, {1}), 0u);
    EXPECT_EQ(shared_prefix({1, 2}, {}), 0u);
}

}  // namespace
