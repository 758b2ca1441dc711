// The one SHA-256 (common/sha256.h): FIPS 180-4 example digests on both
// engines, and the SHA-extensions engine (one stream and two interleaved)
// against the portable one on every length class.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "common/sha256.h"

using sluice::Sha256;

namespace {

std::string digest(const std::string &s, Sha256::Engine e, size_t piece = 0) {
    Sha256 h(e);
    if (!piece) piece = std::max<size_t>(s.size(), 1);
    for (size_t off = 0; off < s.size(); off += piece) h.update(s.data() + off, std::min(piece, s.size() - off));
    return h.hex();
}

std::string random_bytes(std::mt19937 &rng, size_t n) {
    std::string s(n, '\0');
    for (auto &c : s) c = char(rng());
    return s;
}

}  // namespace

TEST(Sha256, NistVectorsOnBothEngines) {
    struct V {
        std::string msg, want;
    };
    const std::vector<V> vs = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",  // 448 bits
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {std::string(1000000, 'a'), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
    };
    std::printf("SHA extensions on this CPU: %s\n", Sha256::has_sha_ni() ? "yes" : "no");
    for (const V &v : vs) {
        for (auto e : {Sha256::Engine::automatic, Sha256::Engine::portable}) {
            EXPECT_EQ(digest(v.msg, e), v.want) << v.msg.size() << " bytes";
            EXPECT_EQ(digest(v.msg, e, 7), v.want) << v.msg.size() << " bytes in 7-byte pieces";
        }
    }
    EXPECT_EQ(sluice::sha256_hex("abc"), vs[1].want);
    EXPECT_FALSE(Sha256(Sha256::Engine::portable).uses_sha_ni());
}

TEST(Sha256, ShaExtensionsMatchPortableOnRandomLengths) {
    if (!Sha256::has_sha_ni()) GTEST_SKIP() << "this CPU has no SHA extensions (CPUID sha/ssse3/sse4.1): nothing to compare";
    std::mt19937 rng(19);
    for (size_t n = 0; n <= 10000; n += 1 + rng() % 37) {
        const std::string s = random_bytes(rng, n);
        const size_t piece = 1 + rng() % 200;
        Sha256 ni;
        ASSERT_TRUE(ni.uses_sha_ni());
        for (size_t off = 0; off < n; off += piece) ni.update(s.data() + off, std::min(piece, n - off));
        ASSERT_EQ(ni.hex(), digest(s, Sha256::Engine::portable)) << n << " bytes, " << piece << "-byte pieces";
    }
}

TEST(Sha256, TwoInterleavedStreamsMatchPortable) {
    // The KLD operand hashes: two files whose headers differ in length, so
    // the streams sit at different block offsets, updated in any size
    // class. Runs on either engine (update2 falls back to two updates).
    std::mt19937 rng(5);
    for (int trial = 0; trial < 60; ++trial) {
        const size_t ha = rng() % 200, hb = rng() % 200;
        const size_t body = (trial % 3 == 0) ? 0 : rng() % 5000 + (trial % 7 == 0 ? 1 << 20 : 0);
        const std::string a = random_bytes(rng, ha + body), b = random_bytes(rng, hb + body);
        Sha256 sa, sb;
        sa.update(a.data(), ha);
        sb.update(b.data(), hb);
        for (size_t off = 0; off < body;) {
            const size_t n = std::min(body - off, size_t(rng() % 3000 + 1) * (trial % 2 ? 1 : 97));
            Sha256::update2(sa, a.data() + ha + off, sb, b.data() + hb + off, n);
            off += n;
        }
        ASSERT_EQ(sa.hex(), digest(a, Sha256::Engine::portable)) << "trial " << trial;
        ASSERT_EQ(sb.hex(), digest(b, Sha256::Engine::portable)) << "trial " << trial;
    }
    for (size_t n : {0, 1, 55, 56, 63, 64, 65, 119, 120, 128}) {
        const std::string s(n, 'x');
        EXPECT_EQ(digest(s, Sha256::Engine::automatic), digest(s, Sha256::Engine::portable)) << n;
    }
}
