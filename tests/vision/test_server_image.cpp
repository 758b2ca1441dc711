// The server's image path (VISION.md §9): an OpenAI request with the image
// as a base64 data: URL must become exactly the fixture's prompt1, and
// refusals carry clear codes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "fixtures_util.h"
#include "server/generate.h"
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

std::string prompt1_body(const std::string &url, bool no_thinking = false) {
    nlohmann::json j = {{"model", "k3v"},
                        {"messages",
                         {{{"role", "user"},
                           {"content",
                            {{{"type", "image_url"}, {"image_url", {{"url", url}}}},
                             {{"type", "text"}, {"text", "What is in this picture?"}}}}}}}};
    // prompt1 was rendered without the think channel (prompt1.segments.json).
    if (no_thinking) j["thinking"] = false;
    return j.dump();
}

// The real model, recording the ids of every eval: what the server's
// generation loop actually feeds the engine.
class Recording final : public Model {
public:
    explicit Recording(std::unique_ptr<Model> m) : m_(std::move(m)) {}
    std::vector<std::vector<int32_t>> evals;

    bool engine_stats(EngineStats *s) override { return m_->engine_stats(s); }
    int32_t vocab() const override { return m_->vocab(); }
    int32_t context() const override { return m_->context(); }
    int32_t eos() const override { return m_->eos(); }
    int32_t bos() const override { return m_->bos(); }
    bool is_control(int32_t id) const override { return m_->is_control(id); }
    int32_t chat_stop_token() override { return m_->chat_stop_token(); }
    bool tokenize(std::string_view t, std::vector<int32_t> *o, std::string *e) override { return m_->tokenize(t, o, e); }
    bool tokenize_markup(std::string_view t, std::vector<int32_t> *o, std::string *e) override {
        return m_->tokenize_markup(t, o, e);
    }
    bool chat_render(const std::vector<ChatMessage> &ms, std::vector<int32_t> *o, std::string *e) override {
        return m_->chat_render(ms, o, e);
    }
    std::string token_bytes(int32_t id) override { return m_->token_bytes(id); }
    std::unique_ptr<Detokenizer> new_detokenizer() override { return m_->new_detokenizer(); }
    std::unique_ptr<Sampler> new_sampler(const SamplingParams &p, std::string *e) override {
        return m_->new_sampler(p, e);
    }
    bool reset(std::string *e) override { return m_->reset(e); }
    bool eval(const int32_t *ids, size_t n, float *logits, std::string *e) override {
        evals.emplace_back(ids, ids + n);
        return m_->eval(ids, n, logits, e);
    }
    bool eval_all(const int32_t *ids, size_t n, float *logits, std::string *e) override {
        evals.emplace_back(ids, ids + n);
        return m_->eval_all(ids, n, logits, e);
    }
    bool chat_render_images(const std::vector<ChatMessage> &ms, std::vector<int32_t> *o, std::string *e,
                            std::string *c) override {
        return m_->chat_render_images(ms, o, e, c);
    }
    bool encode_images(const std::vector<ChatMessage> &ms, std::vector<std::string> *b, std::string *e,
                       std::string *c) override {
        return m_->encode_images(ms, b, e, c);
    }
    bool expand_images(const std::vector<int32_t> &in, std::vector<int32_t> *o, std::string *e) override {
        return m_->expand_images(in, o, e);
    }
    void clear_images() override { m_->clear_images(); }

private:
    std::unique_ptr<Model> m_;
};

struct Quiet : GenObserver {
    void on_prompt(PromptInfo) override {}
    void on_delta(Delta) override {}
    bool cancelled() override { return false; }
};

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

// The server's own path on the K3 fixture (XTML markers: the segments of
// CHAT_K3.md §2 with the media block placed by the renderer, §7): the ids
// the generation loop evaluates are prompt1's, expanded.
TEST(VisionServer, XtmlServerPathEvaluatesPrompt1) {
    if (!fs::exists(vdir() + "/out/cases.json")) GTEST_SKIP() << "no " << vdir() << " (../shared absent)";
    const std::string png = slurp(vdir() + "/images/img_a.png");
    GenRequest r;
    ApiError err;
    ASSERT_TRUE(parse_request(Endpoint::chat, prompt1_body("data:image/png;base64," + base64(png), true), &r, &err))
        << err.message;
    ASSERT_TRUE(resolve_images(&r, false, &err)) << err.message;
    r.max_tokens = 1;
    r.sampling.temperature = 0;
    auto inner = open_model(true, vdir() + "/k3v-tiny.waste");
    ASSERT_TRUE(inner);
    Recording model(std::move(inner));
    Quiet q;
    GenResult res;
    ASSERT_TRUE(generate(model, r, std::chrono::steady_clock::time_point::max(), q, &res, &err))
        << err.code << ": " << err.message;
    std::string want = slurp(vdir() + "/out/prompt1.expanded.i32");
    std::vector<int32_t> w(want.size() / 4);
    std::memcpy(w.data(), want.data(), want.size());
    ASSERT_FALSE(model.evals.empty());
    EXPECT_EQ(model.evals[0], w) << "the server's prompt differs from the fixture's prompt1";
    EXPECT_EQ(res.prompt_tokens, (int)w.size());
    // A second request on the same model: the image is encoded again (the
    // first eval consumed the queue), and the prompt is the same.
    const size_t before = model.evals.size();
    GenResult res2;
    ASSERT_TRUE(generate(model, r, std::chrono::steady_clock::time_point::max(), q, &res2, &err)) << err.message;
    ASSERT_GT(model.evals.size(), before);
    EXPECT_EQ(model.evals[before], w);
    // A text placeholder beside an image part needs a second image: 400.
    GenRequest bad;
    nlohmann::json body = nlohmann::json::parse(prompt1_body("data:image/png;base64," + base64(png), true));
    body["messages"][0]["content"][1]["text"] = "and <|kimi_image_placeholder|>?";
    ASSERT_TRUE(parse_request(Endpoint::chat, body.dump(), &bad, &err)) << err.message;
    ASSERT_TRUE(resolve_images(&bad, false, &err)) << err.message;
    EXPECT_FALSE(generate(model, bad, std::chrono::steady_clock::time_point::max(), q, &res, &err));
    EXPECT_EQ(err.status, 400);
    EXPECT_NE(err.message.find("More image placeholders"), std::string::npos) << err.message;
    // Without --vision the XTML path refuses the image with the same code.
    auto plain = open_model(false, vdir() + "/k3v-tiny.waste");
    ASSERT_TRUE(plain);
    EXPECT_FALSE(generate(*plain, r, std::chrono::steady_clock::time_point::max(), q, &res, &err));
    EXPECT_EQ(err.code, "vision_disabled");
}
