// Shared helpers for the tokenizer unit tests.
#pragma once
#include <gtest/gtest.h>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace sluice::tok::test {

inline std::string fixtures() { return SLUICE_FIXTURES_DIR; }
inline std::string kimi_tok_dir() { return fixtures() + "/warp/kimi-linear-tok.waste"; }
inline std::string converted_dir() { return fixtures() + "/warp/converted-default.waste"; }
inline std::string hf_dir() { return fixtures() + "/hf/tiny-kimi-linear"; }

// Without ../shared/fixtures every test here SKIPs with the reason instead
// of crashing on a missing tokenizer (a missing prerequisite is a SKIP).
class FixturesEnv : public ::testing::Environment {
public:
    void SetUp() override {
        if (!std::ifstream(kimi_tok_dir() + "/tokenizer.model").good())
            GTEST_SKIP() << "fixtures not found at " << fixtures() << " (../shared/fixtures)";
    }
};
inline const bool kFixturesEnvRegistered = (::testing::AddGlobalTestEnvironment(new FixturesEnv), true);

inline std::string b64(const std::string &s) {
    static const char *A = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < s.size(); i += 3) {
        unsigned v = (unsigned char)s[i] << 16 | (unsigned char)s[i + 1] << 8 | (unsigned char)s[i + 2];
        for (int k = 18; k >= 0; k -= 6) out.push_back(A[(v >> k) & 63]);
    }
    if (s.size() - i == 1) {
        unsigned v = (unsigned char)s[i] << 16;
        out += {A[v >> 18], A[(v >> 12) & 63], '=', '='};
    } else if (s.size() - i == 2) {
        unsigned v = (unsigned char)s[i] << 16 | (unsigned char)s[i + 1] << 8;
        out += {A[v >> 18], A[(v >> 12) & 63], A[(v >> 6) & 63], '='};
    }
    return out;
}

// A rank file: the 256 single bytes, then `merges` in order.
inline std::string rank_text(const std::vector<std::string> &merges) {
    std::string t;
    int r = 0;
    for (int c = 0; c < 256; ++c) t += b64(std::string(1, (char)c)) + " " + std::to_string(r++) + "\n";
    for (const auto &m : merges) t += b64(m) + " " + std::to_string(r++) + "\n";
    return t;
}

}  // namespace sluice::tok::test
