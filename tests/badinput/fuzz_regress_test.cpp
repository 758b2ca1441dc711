// Inputs the libFuzzer harnesses (tests/fuzz, scripts/fuzz.sh) found to
// crash or trip a sanitizer, kept as regression tests after the fix. Each
// must now be a named error, under the Release and the ASan/UBSan builds.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "kld/io/llamakld.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace {

std::string write_temp(const std::string &name, const std::string &bytes) {
    const fs::path dir = fs::temp_directory_path() / ("sluice-fuzz-regress-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary).write(bytes.data(), (std::streamsize)bytes.size());
    return path;
}

}  // namespace

// fuzz_llamakld: a 25-byte .kld whose header fields (n_ctx 1 768 263 535,
// n_vocab 1 073 845 132, n_chunk 6 619 072) made kld_expected_size overflow
// int64 (UBSan: signed integer overflow) before the size check could refuse it.
TEST(FuzzRegress, KldHeaderWhoseSizeOverflows64Bits) {
    const unsigned char crash[] = {0x5f, 0x6c, 0x6f, 0x67, 0x69, 0x74, 0x73, 0x5f, 0x6f, 0x95, 0x67, 0x69, 0x8c,
                                   0x93, 0x01, 0x40, 0xc0, 0xff, 0x64, 0x00, 0x00, 0xff, 0x00, 0x00, 0x00};
    const std::string path = write_temp("overflow.kld", std::string(reinterpret_cast<const char *>(crash), sizeof crash));
    sluice::kld::KldFile f;
    const sluice::Status s = sluice::kld::kld_open(path, &f);
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(sluice::kld::code_of(s), sluice::kld::Code::format);
    EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("2^64"), std::string::npos) << s.message();
    // The extremes saturate instead of wrapping; ordinary sizes are unchanged.
    EXPECT_EQ(sluice::kld::kld_expected_size(INT32_MAX, INT32_MAX, INT32_MAX), UINT64_MAX);
    const int64_t n_ctx = 6, V = 5, C = 3, S = n_ctx - 1 - n_ctx / 2, nv = 2 * ((V + 1) / 2) + 4;
    EXPECT_EQ(sluice::kld::kld_expected_size(n_ctx, V, C), uint64_t(20 + 4 * n_ctx * C + 2 * nv * S * C));
    fs::remove_all(fs::path(path).parent_path());
}

// fuzz_tokenizer (long run, 2026-12-03): a number past double's range in
// chat.json or a specials file made nlohmann's parser throw out_of_range,
// which only parse_error was caught for: std::terminate. Both are now a
// format error naming the file.
TEST(FuzzRegress, JsonNumberPastDoubleIsAFormatErrorNotATerminate) {
    const std::string huge = "1e99999";
    auto fmt = sluice::tok::parse_chat_json("{\"system\": " + huge + "}", "fuzz/chat.json");
    ASSERT_FALSE(fmt);
    EXPECT_NE(fmt.status().message().find("fuzz/chat.json"), std::string::npos) << fmt.status().message();
    std::printf("chat.json: %s\n", fmt.status().message().c_str());
    // A byte-level rank file (every single byte, base64, rank = byte), so the
    // specials file is what gets parsed.
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string ranks;
    for (int b = 0; b < 256; b++)
        ranks.append(1, b64[b >> 2]).append(1, b64[(b & 3) << 4]).append("== ").append(std::to_string(b)).append("\n");
    auto tok = sluice::tok::Tokenizer::from_text(ranks, "{\"added_tokens_decoder\": {\"256\": " + huge + "}}", {},
                                                 "fuzz/tokenizer_config.json");
    ASSERT_FALSE(tok);
    EXPECT_NE(tok.status().message().find("JSON"), std::string::npos) << tok.status().message();
    std::printf("specials: %s\n", tok.status().message().c_str());
}
