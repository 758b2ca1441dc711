// Session state save/load: a restored session continues bit-identically;
// a state file for another model, or a damaged one, is refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "fixtures_util.h"
#include "sluice/sluice.h"

using namespace sluice_test;
namespace fs = std::filesystem;

namespace {

sluice_ctx *open_model(const std::string &name) {
    sluice_ctx *ctx = nullptr;
    EXPECT_EQ(sluice_open(container_path(name).c_str(), nullptr, &ctx), SLUICE_OK) << sluice_last_error(ctx);
    return ctx;
}

std::string tmp_path(const std::string &leaf) {
    return (fs::temp_directory_path() / ("sluice-state-" + std::to_string(::getpid()) + "-" + leaf)).string();
}

TEST(Session, SaveLoadContinuesBitIdentically) {
    if (!have_fixtures()) GTEST_SKIP() << "no fixtures at " << warp_dir();
    for (const std::string name : {"kimi-linear-tiny", "deepseek-yarn-tiny", "k3-tiny"}) {
        const auto ids = fixture_cases(name)[2].ids;
        const size_t half = ids.size() / 2;
        sluice_ctx *a = open_model(name);
        const int V = sluice_n_vocab(a);
        std::vector<float> ref((size_t)V), got((size_t)V);
        ASSERT_EQ(sluice_eval(a, ids.data(), ids.size(), ref.data()), SLUICE_OK);
        ASSERT_EQ(sluice_reset(a), SLUICE_OK);
        ASSERT_EQ(sluice_eval(a, ids.data(), half, nullptr), SLUICE_OK);
        const std::string path = tmp_path(name);
        ASSERT_EQ(sluice_state_save(a, path.c_str()), SLUICE_OK) << sluice_last_error(a);
        sluice_ctx *b = open_model(name);
        ASSERT_EQ(sluice_state_load(b, path.c_str()), SLUICE_OK) << sluice_last_error(b);
        EXPECT_EQ(sluice_n_past(b), (int)half);
        ASSERT_EQ(sluice_eval(b, ids.data() + half, ids.size() - half, got.data()), SLUICE_OK);
        const bool same = std::memcmp(ref.data(), got.data(), (size_t)V * 4) == 0;
        std::printf("%-20s saved at %zu of %zu tokens (%llu bytes): restored logits %s\n", name.c_str(), half,
                    ids.size(), (unsigned long long)fs::file_size(path), same ? "bit-identical" : "DIFFERENT");
        EXPECT_TRUE(same) << name;
        sluice_close(a);
        sluice_close(b);
        fs::remove(path);
    }
}

// A fresh session (no token evaluated) has empty MLA caches: saving it once
// passed a null buffer to fwrite, which UBSan aborts on (`chat` then `/save`).
TEST(Session, EmptySessionSavesAndLoads) {
    if (!have_fixtures()) GTEST_SKIP() << "no fixtures at " << warp_dir();
    for (const std::string name : {"kimi-linear-tiny", "deepseek-yarn-tiny"}) {
        const auto ids = fixture_cases(name)[0].ids;
        sluice_ctx *a = open_model(name);
        const int V = sluice_n_vocab(a);
        std::vector<float> ref((size_t)V), got((size_t)V);
        ASSERT_EQ(sluice_eval(a, ids.data(), ids.size(), ref.data()), SLUICE_OK);
        ASSERT_EQ(sluice_reset(a), SLUICE_OK);
        const std::string path = tmp_path(name + "-empty");
        ASSERT_EQ(sluice_state_save(a, path.c_str()), SLUICE_OK) << sluice_last_error(a);
        sluice_ctx *b = open_model(name);
        ASSERT_EQ(sluice_state_load(b, path.c_str()), SLUICE_OK) << sluice_last_error(b);
        EXPECT_EQ(sluice_n_past(b), 0);
        ASSERT_EQ(sluice_eval(b, ids.data(), ids.size(), got.data()), SLUICE_OK);
        EXPECT_EQ(std::memcmp(ref.data(), got.data(), (size_t)V * 4), 0) << name;
        sluice_close(a);
        sluice_close(b);
        fs::remove(path);
    }
}

TEST(Session, RefusesOtherModelsAndDamage) {
    if (!have_fixtures()) GTEST_SKIP() << "no fixtures at " << warp_dir();
    sluice_ctx *a = open_model("kimi-linear-tiny");
    const int32_t ids[3] = {1, 2, 3};
    ASSERT_EQ(sluice_eval(a, ids, 3, nullptr), SLUICE_OK);
    const std::string path = tmp_path("refuse");
    ASSERT_EQ(sluice_state_save(a, path.c_str()), SLUICE_OK);

    struct Case {
        std::string model, needle;
    } cases[] = {{"k3-tiny", "different model"}, {"kimi-linear-tok", "vocab"}, {"converted-default", "vocab is 256, this model has 512"}};
    for (const auto &c : cases) {
        sluice_ctx *b = open_model(c.model);
        EXPECT_EQ(sluice_state_load(b, path.c_str()), SLUICE_E_FORMAT);
        std::string msg = sluice_last_error(b);
        std::printf("load into %-18s -> %s\n", c.model.c_str(), msg.c_str());
        EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
        EXPECT_EQ(sluice_n_past(b), 0);
        sluice_close(b);
    }
    // Same shapes, another container: kimi-linear-prefixed differs in the manifest.
    {
        sluice_ctx *b = open_model("kimi-linear-prefixed");
        EXPECT_EQ(sluice_state_load(b, path.c_str()), SLUICE_E_FORMAT);
        std::printf("load into kimi-linear-prefixed -> %s\n", sluice_last_error(b));
        sluice_close(b);
    }
    // Truncated and bad magic.
    const std::string bad = tmp_path("bad");
    fs::copy_file(path, bad, fs::copy_options::overwrite_existing);
    fs::resize_file(bad, fs::file_size(bad) - 7);
    EXPECT_EQ(sluice_state_load(a, bad.c_str()), SLUICE_E_FORMAT);
    std::printf("truncated -> %s\n", sluice_last_error(a));
    {
        std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
        f.write("XXXX", 4);
    }
    EXPECT_EQ(sluice_state_load(a, bad.c_str()), SLUICE_E_FORMAT);
    std::printf("bad magic -> %s\n", sluice_last_error(a));
    EXPECT_EQ(sluice_n_past(a), 3);  // a refused load leaves the session as it was
    sluice_close(a);
    fs::remove(path);
    fs::remove(bad);
}

// Damage inside the body (fuzz_session's classes of mutation): a file cut
// anywhere is a format error naming the layer, a NaN or Inf anywhere in the
// saved state is refused naming its layer, and after each refusal the
// session evaluates exactly as before.
TEST(Session, DamagedBodyIsRefusedByLayerAndLeavesTheSession) {
    if (!have_fixtures()) GTEST_SKIP() << "no fixtures at " << warp_dir();
    sluice_ctx *a = open_model("kimi-linear-tiny");
    const int32_t ids[3] = {1, 2, 3}, next = 4;
    ASSERT_EQ(sluice_eval(a, ids, 3, nullptr), SLUICE_OK);
    const std::string path = tmp_path("body");
    ASSERT_EQ(sluice_state_save(a, path.c_str()), SLUICE_OK);
    const int V = sluice_n_vocab(a);
    std::vector<float> ref((size_t)V), got((size_t)V);
    ASSERT_EQ(sluice_eval(a, &next, 1, ref.data()), SLUICE_OK);
    ASSERT_EQ(sluice_state_load(a, path.c_str()), SLUICE_OK);
    std::string good;
    {
        std::ifstream f(path, std::ios::binary);
        good.assign(std::istreambuf_iterator<char>(f), {});
    }
    const size_t header = 120;  // the fixed header (magic .. manifest sha256)
    ASSERT_GT(good.size(), header + 8);
    const std::string bad = tmp_path("body-bad");
    auto refused = [&](const std::string &bytes, const char *needle) -> std::string {
        std::ofstream(bad, std::ios::binary | std::ios::trunc).write(bytes.data(), (std::streamsize)bytes.size());
        EXPECT_EQ(sluice_state_load(a, bad.c_str()), SLUICE_E_FORMAT);
        const std::string msg = sluice_last_error(a);
        EXPECT_NE(msg.find(needle), std::string::npos) << msg;
        EXPECT_NE(msg.find(bad), std::string::npos) << msg;
        EXPECT_EQ(sluice_n_past(a), 3);
        EXPECT_EQ(sluice_eval(a, &next, 1, got.data()), SLUICE_OK);
        EXPECT_EQ(std::memcmp(ref.data(), got.data(), (size_t)V * 4), 0) << "a refused load changed the session";
        EXPECT_EQ(sluice_state_load(a, path.c_str()), SLUICE_OK);
        return msg;
    };
    int cuts = 0, poisoned = 0;
    for (size_t cut : {header, header + 1, header + 4, good.size() / 2, good.size() - 4, good.size() - 1}) {
        const std::string msg = refused(good.substr(0, cut), "truncated: layer ");
        if (cut == good.size() / 2) std::printf("cut at %zu of %zu -> %s\n", cut, good.size(), msg.c_str());
        cuts++;
    }
    const float poison[] = {std::nanf(""), INFINITY, -INFINITY};
    for (size_t at : {header, good.size() / 2 & ~size_t(3), good.size() - 4}) {
        for (float p : poison) {
            std::string b = good;
            std::memcpy(&b[at], &p, 4);
            const std::string msg = refused(b, "holds a NaN or infinite value");
            if (at == header && std::isnan(p)) std::printf("NaN at %zu -> %s\n", at, msg.c_str());
            poisoned++;
        }
    }
    std::printf("%d cut and %d poisoned state files refused; session unchanged after each\n", cuts, poisoned);
    sluice_close(a);
    fs::remove(path);
    fs::remove(bad);
}

}  // namespace
