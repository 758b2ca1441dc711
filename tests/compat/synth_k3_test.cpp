// `sluice synth --family k3` at a tiny size: the same code path as the
// full-size K3-shaped container (latent MoE, AttnRes, SiTU, gated MLA,
// full-rank KDA gate), small dims. The writer is byte-identical across
// --jobs, the container passes the container verifier (headers, CRCs,
// bank sizes), sluice opens it as K3, and its logits are finite and
// bit-identical across placements. The full-size preset's expert record is
// checked against K3's published record size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "sluice/sluice.h"
#include "synth/synth.h"

namespace fs = std::filesystem;

namespace {

sluice::SynthOptions tiny_k3(const std::string &out, int jobs) {
    sluice::SynthOptions o = sluice::k3_shape();
    o.out = out;
    o.jobs = jobs;
    o.layers = 7;  // MLA at 1-based 3, 6, 7; AttnRes blocks of 2: three stored blocks
    o.mla_every = 3;
    o.attn_res_block = 2;
    o.hidden = 128;
    o.vocab = 512;
    o.heads = 4;
    o.kda_heads = 4;
    o.kda_dim = 32;
    o.kv_lora = 32;
    o.q_lora = 48;
    o.d_nope = 16;
    o.d_rope = 8;
    o.d_v = 16;
    o.inter = 256;
    o.experts = 20;  // more than one 16-expert work item per layer
    o.top_k = 8;
    o.moe_inter = 128;
    o.r_lat = 192;  // latent wider than the hidden, as in the full-size preset
    return o;
}

std::string slurp(const fs::path &p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

struct Where {
    int threads = 1, no_cache = 1, chunk = 1, no_direct = 1, io_engine = SLUICE_IO_AUTO;
    uint64_t budget = 0;
};

std::vector<float> logits(const std::string &model, const std::vector<int32_t> &ids, const Where &r) {
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.n_threads = r.threads;
    cfg.no_cache = r.no_cache;
    cfg.prefill_chunk = r.chunk;
    cfg.no_direct_io = r.no_direct;
    cfg.io_engine = r.io_engine;
    cfg.budget_bytes = r.budget;
    cfg.no_hotlist = 1;
    sluice_ctx *ctx = nullptr;
    EXPECT_EQ(sluice_open(model.c_str(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
    std::vector<float> all;
    if (ctx) {
        const int V = sluice_n_vocab(ctx);
        all.resize((size_t)V * ids.size());
        EXPECT_EQ(sluice_eval_all(ctx, ids.data(), ids.size(), all.data()), SLUICE_OK) << sluice_last_error(ctx);
    }
    sluice_close(ctx);
    return all;
}

class SynthK3 : public ::testing::Test {
  protected:
    fs::path dir;
    void SetUp() override {
        dir = fs::temp_directory_path() / ("sluice-synth-k3-" + std::to_string(::getpid()));
        fs::create_directories(dir);
    }
    void TearDown() override { fs::remove_all(dir); }
};

TEST_F(SynthK3, ByteIdenticalAcrossJobs) {
    const sluice::SynthOptions a = tiny_k3((dir / "j1.waste").string(), 1);
    const sluice::SynthOptions b = tiny_k3((dir / "j3.waste").string(), 3);
    ASSERT_TRUE(sluice::run_synth(a, nullptr)) << "jobs 1";
    ASSERT_TRUE(sluice::run_synth(b, nullptr)) << "jobs 3";
    int files = 0;
    uint64_t bytes = 0;
    for (auto &e : fs::directory_iterator(a.out)) {
        const std::string x = slurp(e.path()), y = slurp(fs::path(b.out) / e.path().filename());
        EXPECT_EQ(x.size(), y.size()) << e.path().filename();
        EXPECT_TRUE(x == y) << e.path().filename() << " differs between --jobs 1 and --jobs 3";
        files++;
        bytes += x.size();
    }
    std::printf("k3 synth, jobs 1 vs 3: %d files, %llu bytes compared\n", files, (unsigned long long)bytes);
    EXPECT_EQ(files, 3 + 6);  // manifest, trunk, codebooks, 6 MoE banks
    // Another seed gives other bytes: the comparison above is not vacuous.
    sluice::SynthOptions c = tiny_k3((dir / "s2.waste").string(), 2);
    c.seed = 2;
    ASSERT_TRUE(sluice::run_synth(c, nullptr));
    EXPECT_NE(slurp(fs::path(a.out) / "trunk.bin"), slurp(fs::path(c.out) / "trunk.bin"));
    EXPECT_NE(slurp(fs::path(a.out) / "experts-L3.bin"), slurp(fs::path(c.out) / "experts-L3.bin"));
}

TEST_F(SynthK3, ContainerPassesTheVerifierAndOpensAsK3) {
    const sluice::SynthOptions o = tiny_k3((dir / "m.waste").string(), 2);
    ASSERT_TRUE(sluice::run_synth(o, nullptr));
    sluice::convert::VerifyOptions vo;
    vo.container_dir = o.out;
    sluice::convert::VerifyReport rep;
    std::string err;
    const int rc = sluice::convert::run_verify(vo, &rep, &err);
    for (const auto &p : rep.problems) std::printf("verify: %s\n", p.c_str());
    EXPECT_EQ(rc, 0) << err;
    EXPECT_EQ(rep.records_checked, 6 * o.experts);
    EXPECT_EQ(rep.crc_failures, 0);
    EXPECT_EQ(rep.header_failures, 0);

    const auto m = nlohmann::json::parse(slurp(fs::path(o.out) / "manifest.json"));
    EXPECT_EQ(m["tensor_prefix"], "language_model.");
    EXPECT_EQ(m["config"]["routed_expert_hidden_size"], o.r_lat);
    EXPECT_EQ(m["config"]["attn_res_block_size"], o.attn_res_block);
    EXPECT_EQ(m["config"]["hidden_act"], "situ");
    const sluice::SynthSizes z = sluice::synth_sizes(o);
    EXPECT_EQ(fs::file_size(fs::path(o.out) / "trunk.bin"), z.trunk_bytes);
    EXPECT_EQ(fs::file_size(fs::path(o.out) / "experts-L1.bin"), (uint64_t)o.experts * z.record_bytes);

    sluice_config cfg;
    sluice_config_default(&cfg);
    sluice_ctx *ctx = nullptr;
    ASSERT_EQ(sluice_open(o.out.c_str(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
    sluice_memory_plan plan{};
    EXPECT_EQ(sluice_memory_plan_get(ctx, &plan), SLUICE_OK);
    EXPECT_EQ(plan.record_bytes, z.record_bytes);
    EXPECT_EQ(sluice_n_vocab(ctx), o.vocab);
    sluice_close(ctx);
}

TEST_F(SynthK3, FiniteLogitsBitIdenticalAcrossPlacements) {
    const sluice::SynthOptions o = tiny_k3((dir / "m.waste").string(), 2);
    ASSERT_TRUE(sluice::run_synth(o, nullptr));
    std::vector<int32_t> ids(24);
    for (int i = 0; i < 24; i++) ids[(size_t)i] = (i * 131 + 7) % o.vocab;
    const auto ref = logits(o.out, ids, Where{});
    ASSERT_EQ(ref.size(), ids.size() * (size_t)o.vocab);
    size_t finite = 0;
    double mx = 0, sum = 0;
    for (float v : ref) {
        finite += std::isfinite(v);
        mx = std::max(mx, (double)std::fabs(v));
        sum += std::fabs(v);
    }
    std::printf("k3 synth logits: %zu of %zu finite, max |logit| %.3f, mean |logit| %.3f\n", finite, ref.size(), mx,
                sum / (double)ref.size());
    EXPECT_EQ(finite, ref.size());
    EXPECT_GT(mx, 1e-3) << "logits are all ~0: the forward pass is not exercising anything";
    // Positions differ: the per-token state (KDA, MLA cache) is live.
    const float *a = ref.data(), *b = ref.data() + (ids.size() - 1) * (size_t)o.vocab;
    EXPECT_NE(std::memcmp(a, b, (size_t)o.vocab * 4), 0);

    const Where variants[] = {
        {2, 0, 1, 1, SLUICE_IO_AUTO, 0},      {2, 0, 5, 0, SLUICE_IO_AUTO, 0},
        {3, 1, 24, 0, SLUICE_IO_THREADS, 0},  {1, 0, 1, 0, SLUICE_IO_THREADS, 0},
    };
    for (const Where &r : variants) {
        const auto got = logits(o.out, ids, r);
        double md = 0;
        for (size_t i = 0; i < std::min(got.size(), ref.size()); i++) md = std::max(md, (double)std::fabs(got[i] - ref[i]));
        const bool same = got.size() == ref.size() && std::memcmp(got.data(), ref.data(), ref.size() * 4) == 0;
        std::printf("threads %d, cache %s, chunk %2d, %s I/O, %s engine: %s (max |diff| %.3g)\n", r.threads,
                    r.no_cache ? "off" : "on", r.chunk, r.no_direct ? "buffered" : "direct",
                    r.io_engine == SLUICE_IO_THREADS ? "threads" : "auto", same ? "bit-identical" : "DIFFERENT", md);
        EXPECT_TRUE(same);
    }
}

TEST(SynthK3Preset, RealExpertRecordAndLayerSchedule) {
    const sluice::SynthOptions o = sluice::k3_shape();
    const sluice::SynthSizes z = sluice::synth_sizes(o);
    std::printf("%s", sluice::describe_synth(o).c_str());
    // K3's record: gate/up [3072 x 3584] and down [3584 x 3072] at 3 bytes per
    // 8 weights, plus header and f16 row scales, padded to 4 KiB: 11.83 MiB.
    EXPECT_EQ(z.record_bytes % 4096, 0u);
    EXPECT_NEAR((double)z.record_bytes / 1048576.0, 11.83, 0.005);
    EXPECT_EQ(z.moe_layers, 92);
    EXPECT_EQ(z.kda_layers, 69);
    EXPECT_EQ(z.mla_layers, 24);
    EXPECT_EQ(o.top_k, 16);
    EXPECT_EQ(o.shared, 2);
    EXPECT_GE(o.experts, 32);
    EXPECT_LT(z.total, 45e9) << "must fit the shared disk";
    EXPECT_LT(z.trunk_bytes, 8e9) << "the trunk must leave a 24 GB machine room for a cache";
}

}  // namespace
