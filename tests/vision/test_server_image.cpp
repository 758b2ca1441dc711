// The server's image path (VISION.md §9): an OpenAI request with the image
// as a base64 data: URL must become exactly the fixture's prompt1, and
// refusals carry clear codes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "fixtures_util.h"
#include "server/images.h"
#include "server/request.h"
#include "server/sluice_model.h"

namespace fs = std::filesystem;
using namespace sluice::server;

namespace {

std::string vdir() { return sluice_test::fixtures_dir() + "/vision"; }

std::string base64(const std::string &in) {
    static const char *t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        uint32_t v = (uint8_t)in[i] << 16 | (uint8_t)in[i + 1] << 8 | (uint8_t)in[i + 2];
        for (int k = 3; k >= 0; k--) out += t[(v >> (6 * k)) & 63];
    }
    if (i < in.size()) {
        uint32_t v = (uint8_t)in[i] << 16 | (i + 1 < in.size() ? (uint8_t)in[i + 1] << 8 : 0);
        out += t[(v >> 18) & 63];
        out += t[(v >> 12) & 63];
        out += i + 1 < in.size() ? t[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

std::string slurp(const std::string &p) {
    std::ifstream f(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), {});
}

std::string prompt1_body(const std::string &url) {
    nlohmann::json j = {{"model", "k3v"},
                        {"messages",
                         {{{"role", "user"},
                           {"content",
                            {{{"type", "image_url"}, {"image_url", {{"url", url}}}},
                             {{"type", "text"}, {"text", "What is in this picture?"}}}}}}}};
    return j.dump();
}

std::unique_ptr<Model> open_model(bool vision, const std::string &path) {
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.vision = vision;
    cfg.no_hotlist = 1;
    cfg.n_threads = 2;
    sluice_ctx *ctx = nullptr;
    if (sluice_open(path.c_str(), &cfg, &ctx) != SLUICE_OK) {
        ADD_FAILURE() << sluice_last_error(ctx);
        sluice_close(ctx);
        return nullptr;
    }
    return make_sluice_model(ctx, vision);
}

}  // namespace

TEST(VisionServer, Base64IsStrict) {
    std::string out;
    EXPECT_TRUE(base64_decode("aGVsbG8=", &out));
    EXPECT_EQ(out, "hello");
    EXPECT_TRUE(base64_decode("aGVsbG8", &out));
    EXPECT_EQ(out, "hello");
    EXPECT_FALSE(base64_decode("aGVs bG8=", &out));
    EXPECT_FALSE(base64_decode("aGVsbG8==", &out));
    EXPECT_FALSE(base64_decode("a", &out));
    EXPECT_EQ(base64("hello"), "aGVsbG8=");
}

TEST(VisionServer, ReferencesAreResolvedOrRefused) {
    GenRequest r;
    ApiError err;
    ASSERT_TRUE(parse_request(Endpoint::chat, prompt1_body("https://example.com/a.png"), &r, &err)) << err.message;
    EXPECT_FALSE(resolve_images(&r, true, &err));
    EXPECT_EQ(err.code, "invalid_image_url");
    EXPECT_EQ(err.param, "image_url");
    ASSERT_TRUE(parse_request(Endpoint::chat, prompt1_body("/etc/hostname"), &r, &err));
    EXPECT_FALSE(resolve_images(&r, false, &err));
    EXPECT_NE(err.message.find("--allow-local-images"), std::string::npos) << err.message;
    ASSERT_TRUE(parse_request(Endpoint::chat, prompt1_body("data:image/png,abc"), &r, &err));
    EXPECT_FALSE(resolve_images(&r, false, &err));
    EXPECT_NE(err.message.find("base64"), std::string::npos) << err.message;
    ASSERT_TRUE(parse_request(Endpoint::chat, prompt1_body("data:image/png;base64,@@@"), &r, &err));
    EXPECT_FALSE(resolve_images(&r, false, &err));
    ASSERT_TRUE(parse_request(Endpoint::chat, prompt1_body(""), &r, &err) == false);
    EXPECT_NE(err.message.find("no url"), std::string::npos) << err.message;
}

TEST(VisionServer, DataUrlPromptIsPrompt1) {
    if (!fs::exists(vdir() + "/out/cases.json")) GTEST_SKIP() << "no " << vdir() << " (../shared absent)";
    const std::string png = slurp(vdir() + "/images/img_a.png");
    GenRequest r;
    ApiError err;
    ASSERT_TRUE(parse_request(Endpoint::chat, prompt1_body("data:image/png;base64," + base64(png)), &r, &err))
        << err.message;
    ASSERT_TRUE(resolve_images(&r, false, &err)) << err.message;
    ASSERT_EQ(r.messages[0].parts.size(), 2u);
    EXPECT_EQ(r.messages[0].parts[0].bytes, png);
    auto model = open_model(true, vdir() + "/k3v-tiny.waste");
    ASSERT_TRUE(model);
    std::vector<int32_t> ids;
    std::string e, code;
    ASSERT_TRUE(model->chat_render_images(r.messages, &ids, &e, &code)) << code << ": " << e;
    std::string want = slurp(vdir() + "/out/prompt1.expanded.i32");
    std::vector<int32_t> w(want.size() / 4);
    std::memcpy(w.data(), want.data(), want.size());
    EXPECT_EQ(ids, w) << "the server's prompt differs from the fixture's prompt1";
    std::printf("server prompt: %zu ids, fixture prompt1: %zu ids, identical: %s\n", ids.size(), w.size(),
                ids == w ? "yes" : "no");
    // Without --vision: a clear refusal.
    auto plain = open_model(false, vdir() + "/k3v-tiny.waste");
    ASSERT_TRUE(plain);
    EXPECT_FALSE(plain->chat_render_images(r.messages, &ids, &e, &code));
    EXPECT_EQ(code, "vision_disabled");
    // A container without a tower, with --vision.
    const std::string k3 = sluice_test::container_path("k3-tiny");
    if (fs::exists(k3)) {
        auto text_only = open_model(true, k3);
        ASSERT_TRUE(text_only);
        EXPECT_FALSE(text_only->chat_render_images(r.messages, &ids, &e, &code));
        EXPECT_EQ(code, "vision_unsupported");
    }
    // An image that does not decode: named, and nothing stays queued.
    r.messages[0].parts[0].bytes = "not an image";
    EXPECT_FALSE(model->chat_render_images(r.messages, &ids, &e, &code));
    EXPECT_EQ(code, "invalid_image");
}
