// The C API's finish-now mode (sluice_sampler_set_draw_limit,
// sluice_sampler_draws_to_finish) on real vocabularies: kimi-linear-tok
// (K3-style specials) and converted-default (Kimi-Linear). The bound is
// counted in bytes; on these byte-level BPE vocabularies it must hold in
// tokens: with random logits, every output ends with its end token within
// the limit, from the tightest limit up, and parses.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "fixtures_util.h"
#include "sluice/sluice.h"

using namespace sluice_test;

namespace {

const char *kSchema = R"({"type":"object","properties":{"name":{"type":"string","maxLength":24},
    "age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":4},
    "role":{"enum":["admin","user"]}},"required":["name","age","tags","role"],"additionalProperties":false})";

class FinishNow : public ::testing::TestWithParam<const char *> {
protected:
    void SetUp() override {
        if (!have_fixtures()) GTEST_SKIP() << "no fixtures at " << warp_dir();
    }
};

}  // namespace

TEST_P(FinishNow, EveryOutputEndsWithinTheLimitAndParses) {
    sluice_ctx *ctx = nullptr;
    ASSERT_EQ(sluice_open(container_path(GetParam()).c_str(), nullptr, &ctx), SLUICE_OK) << sluice_last_error(ctx);
    const int32_t V = sluice_n_vocab(ctx), eos = sluice_token_eos(ctx);
    ASSERT_GE(eos, 0);
    int outputs = 0, tight = 0;
    for (const char *schema : {kSchema, ""}) {
        for (int32_t slack : {0, 2, 10, 60}) {
            for (uint64_t seed = 1; seed <= 8; seed++) {
                sluice_sampling p;
                sluice_sampling_default(&p);
                p.temperature = 1.0f;
                p.top_k = 0;
                p.top_p = 1.0f;
                p.min_p = 0.0f;
                p.seed = seed;
                sluice_sampler *s = sluice_sampler_new(&p);
                ASSERT_NE(s, nullptr);
                EXPECT_EQ(sluice_sampler_draws_to_finish(s), -1);  // no constraint yet
                ASSERT_EQ(sluice_sampler_set_json_schema(s, ctx, schema, std::char_traits<char>::length(schema), &eos, 1),
                          SLUICE_OK)
                    << sluice_last_error(ctx);
                const int32_t limit = sluice_sampler_draws_to_finish(s) + slack;
                ASSERT_GT(limit, 1);
                std::mt19937_64 rng(seed * 7919 + (uint64_t)slack);
                std::normal_distribution<float> nd(0.0f, 3.0f);
                std::vector<float> logits((size_t)V);
                std::vector<int32_t> out;
                int32_t draws = 0;
                bool ended = false;
                while (draws < limit) {
                    ASSERT_EQ(sluice_sampler_set_draw_limit(s, limit - draws), SLUICE_OK);
                    for (float &x : logits) x = nd(rng);
                    const int32_t id = sluice_sampler_sample(s, logits.data(), V, out.data(), out.size());
                    ASSERT_GE(id, 0);
                    draws++;
                    if (id == eos) {
                        ended = true;
                        break;
                    }
                    out.push_back(id);
                }
                EXPECT_EQ(sluice_sampler_draws_to_finish(s), ended ? 0 : 1);
                sluice_sampler_free(s);
                size_t n = 0;
                std::string text(out.size() * 64 + 16, '\0');
                ASSERT_EQ(sluice_detokenize(ctx, out.data(), out.size(), text.data(), text.size(), &n), SLUICE_OK);
                text.resize(n);
                EXPECT_TRUE(ended) << GetParam() << " limit " << limit << ": " << text;
                EXPECT_TRUE(nlohmann::json::accept(text)) << GetParam() << " limit " << limit << ": " << text;
                outputs++;
                tight += draws == limit;
            }
        }
    }
    std::printf("%s: %d outputs, %d used every draw of their limit\n", GetParam(), outputs, tight);
    EXPECT_EQ(outputs, 2 * 4 * 8);
    EXPECT_EQ(sluice_sampler_set_draw_limit(nullptr, 3), SLUICE_E_ARG);
    EXPECT_EQ(sluice_sampler_draws_to_finish(nullptr), -1);
    sluice_close(ctx);
}

INSTANTIATE_TEST_SUITE_P(Containers, FinishNow, ::testing::Values("kimi-linear-tok", "converted-default"),
                         [](const auto &info) { return std::string(info.param) == "kimi-linear-tok" ? "KimiLinearTok"
                                                                                                     : "ConvertedDefault"; });
