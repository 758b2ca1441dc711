// Other release layouts, made from the tiny fixture by renaming tensors and
// rewriting config.json: K3's wrapped config with the language_model.
// prefix, DeepSeek's MoE naming and key names, and fp8 weights with
// 128x128 block scales. Each must convert to what the plain release gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "convert/numeric.h"
#include "convert/checkpoint.h"
#include "convert/trunk.h"
#include "test_util.h"

using namespace sluice::convert;
using ctest::TempDir;
using ojson = nlohmann::ordered_json;

namespace {

std::string replace_all(std::string s, const std::string& a, const std::string& b) {
    for (size_t p = 0; (p = s.find(a, p)) != std::string::npos; p += b.size()) s.replace(p, a.size(), b);
    return s;
}

// Every stored tensor of the fixture, renamed by `rename`.
std::vector<ctest::StTensor> fixture_tensors(const std::function<std::string(const std::string&)>& rename) {
    Checkpoint ck;
    std::string err;
    EXPECT_TRUE(ck.open(ctest::source_dir(), &err)) << err;
    std::vector<ctest::StTensor> out;
    for (const std::string& n : ck.names()) {
        const TensorInfo* t = ck.find(n);
        ctest::StTensor s{rename(n), t->dtype, {t->shape.begin(), t->shape.end()}, std::string(t->nbytes, '\0')};
        EXPECT_TRUE(ck.read_raw(*t, 0, t->nbytes, s.bytes.data(), &err)) << err;
        out.push_back(std::move(s));
    }
    return out;
}

void write_release(const std::string& dir, const ojson& config, const std::vector<ctest::StTensor>& ts) {
    ctest::fs::create_directories(dir);
    std::ofstream(dir + "/config.json") << config.dump(1);
    for (const char* f : {"tiktoken.model", "tokenizer_config.json"})
        std::ofstream(dir + "/" + f, std::ios::binary) << ctest::slurp(ctest::source_dir() + "/" + f);
    ctest::write_safetensors(dir + "/model.safetensors", ts);  // single-file layout on purpose
}

ojson fixture_config() { return ojson::parse(ctest::slurp(ctest::source_dir() + "/config.json")); }

int convert(const std::string& src, const std::string& out, std::string* err) {
    auto o = ctest::recipe("default");
    o.source_dir = src;
    o.output_dir = out;
    o.kmeans_iters = 3;
    ctest::QuietSink sink;
    return run_convert(o, err, &sink);
}

// Bytes of one trunk entry (payload and scales).
std::string entry_bytes(const std::string& trunk, const ojson& e) {
    return trunk.substr(e["off"].get<size_t>(), e["bytes"].get<size_t>());
}

void expect_banks_equal(const std::string& a, const std::string& b) {
    for (int L = 1; L <= 3; ++L) {
        const std::string f = "/experts-L" + std::to_string(L) + ".bin";
        int64_t n = 0;
        const int64_t bad = ctest::diff_bytes(a + f, b + f, &n);
        std::printf("  %s: %lld bytes compared, %lld mismatches\n", f.c_str() + 1, static_cast<long long>(n),
                    static_cast<long long>(bad));
        EXPECT_EQ(bad, 0) << f;
    }
}

uint8_t e4m3_encode(float x) {
    // Nearest of the 127 non-negative finite codes (monotonic in the code).
    static std::vector<float> pos = [] {
        std::vector<float> v;
        for (int c = 0; c < 0x7F; ++c) v.push_back(fp8_e4m3_to_f32(static_cast<uint8_t>(c)));
        return v;
    }();
    const float a = std::fabs(x);
    auto it = std::lower_bound(pos.begin(), pos.end(), a);
    int c = static_cast<int>(it - pos.begin());
    if (c >= static_cast<int>(pos.size())) c = static_cast<int>(pos.size()) - 1;
    else if (c > 0 && a - pos[c - 1] <= pos[c] - a) c -= 1;
    return static_cast<uint8_t>(c | (x < 0 ? 0x80 : 0));
}

}  // namespace

class ConvertVariants : public ::testing::Test {
protected:
    void SetUp() override {
        if (!ctest::have_fixtures()) GTEST_SKIP() << "fixtures not found at " << ctest::fixtures();
        std::string err;
        ASSERT_EQ(convert(ctest::source_dir(), ref_ = tmp_.sub("ref.waste"), &err), 0) << err;
    }
    TempDir tmp_;
    std::string ref_;
};

TEST_F(ConvertVariants, K3WrappedConfigAndPrefix) {
    ojson outer;
    outer["architectures"] = {"KimiLinearForCausalLM"};
    outer["model_type"] = "wrapped";
    outer["text_config"] = fixture_config();
    outer["vision_config"] = {{"vt_hidden_size", 16}};
    outer["media_placeholder_token_id"] = 7;
    auto ts = fixture_tensors([](const std::string& n) { return "language_model." + n; });
    std::vector<float> vis(16, 0.25f);
    ts.push_back({"vision_tower.patch_embed.weight", "F32", {4, 4}, ctest::raw(vis)});
    const std::string src = tmp_.sub("k3src"), out = tmp_.sub("k3.waste");
    write_release(src, outer, ts);
    std::string err;
    ASSERT_EQ(convert(src, out, &err), 0) << err;
    const ojson m = ojson::parse(ctest::slurp(out + "/manifest.json"));
    const ojson w = ojson::parse(ctest::slurp(ctest::warp_dir("default") + "/manifest.json"));
    EXPECT_EQ(m["tensor_prefix"], "language_model.");
    EXPECT_EQ(m["arch"], "kimi-linear");
    ojson want = fixture_config();
    want["_outer"] = outer;
    want["_outer"].erase("text_config");
    EXPECT_EQ(m["config"], want);
    // Same tensors under the prefix, same offsets; the vision tensor sorts last.
    ASSERT_EQ(m["trunk"].size(), w["trunk"].size() + 1);
    for (size_t i = 0; i < w["trunk"].size(); ++i) {
        ojson e = w["trunk"][i];
        e["name"] = "language_model." + e["name"].get<std::string>();
        EXPECT_EQ(m["trunk"][i], e);
    }
    EXPECT_EQ(m["trunk"].back()["name"], "vision_tower.patch_embed.weight");
    const ojson v = ojson::parse(ctest::slurp(out + "/vision.json"));
    std::printf("K3 layout: vision.json = %s\n", v.dump().c_str());
    EXPECT_EQ(v["vt_hidden_size"], 16);
    EXPECT_EQ(v["media_placeholder_token_id"], 7);
    EXPECT_EQ(v["max_patches"], 1024);
    EXPECT_EQ(v["vt_rms_eps"].get<double>(), 1.1920928955078125e-07);
    EXPECT_EQ(v["image_mean"], ojson({0.5, 0.5, 0.5}));
    const std::string mine = ctest::slurp(out + "/trunk.bin"), theirs = ctest::slurp(ctest::warp_dir("default") + "/trunk.bin");
    std::printf("K3 layout: trunk.bin %zu bytes, first %zu equal to warp's plain conversion: %s\n", mine.size(),
                theirs.size(), mine.compare(0, theirs.size(), theirs) == 0 ? "yes" : "NO");
    EXPECT_EQ(mine.compare(0, theirs.size(), theirs), 0);
    EXPECT_EQ(mine.size(), theirs.size() + 64);
    expect_banks_equal(out, ref_);
}

TEST_F(ConvertVariants, DeepSeekNamingAndAliases) {
    ojson cfg;
    const ojson base = fixture_config();
    for (auto it = base.begin(); it != base.end(); ++it) {
        std::string k = it.key();
        if (k == "moe_renormalize") continue;
        if (k == "num_experts") k = "n_routed_experts";
        if (k == "num_experts_per_token") k = "num_experts_per_tok";
        if (k == "num_shared_experts") k = "n_shared_experts";
        cfg[k] = it.value();
    }
    cfg["norm_topk_prob"] = true;
    cfg["architectures"] = {"DeepseekV3ForCausalLM"};
    auto ts = fixture_tensors([](const std::string& n) {
        std::string s = replace_all(n, ".block_sparse_moe.", ".mlp.");
        s = replace_all(s, ".w1.weight", ".gate_proj.weight");
        s = replace_all(s, ".w3.weight", ".up_proj.weight");
        return replace_all(s, ".w2.weight", ".down_proj.weight");
    });
    const std::string src = tmp_.sub("dssrc"), out = tmp_.sub("ds.waste");
    write_release(src, cfg, ts);
    std::string err;
    ASSERT_EQ(convert(src, out, &err), 0) << err;
    const ojson m = ojson::parse(ctest::slurp(out + "/manifest.json"));
    const ojson w = ojson::parse(ctest::slurp(ctest::warp_dir("default") + "/manifest.json"));
    EXPECT_EQ(m["arch"], "DeepseekV3ForCausalLM");
    EXPECT_EQ(m["config"]["num_experts"], 8);
    EXPECT_EQ(m["config"]["num_experts_per_token"], 2);
    EXPECT_EQ(m["config"]["num_shared_experts"], 1);
    EXPECT_EQ(m["config"]["moe_renormalize"], true);
    EXPECT_FALSE(ctest::fs::exists(out + "/chat.json"));  // no built-in template for this family
    // Renamed back to block_sparse_moe; order follows the source names, so
    // compare tensor by tensor.
    const std::string mine = ctest::slurp(out + "/trunk.bin"), theirs = ctest::slurp(ctest::warp_dir("default") + "/trunk.bin");
    ASSERT_EQ(m["trunk"].size(), w["trunk"].size());
    int64_t compared = 0, bad = 0;
    for (const ojson& e : w["trunk"]) {
        const ojson* mine_e = nullptr;
        for (const ojson& x : m["trunk"])
            if (x["name"] == e["name"]) mine_e = &x;
        ASSERT_NE(mine_e, nullptr) << e["name"];
        EXPECT_EQ((*mine_e)["fmt"], e["fmt"]);
        EXPECT_EQ((*mine_e)["shape"], e["shape"]);
        const std::string a = entry_bytes(mine, *mine_e), b = entry_bytes(theirs, e);
        compared += static_cast<int64_t>(b.size());
        bad += a != b;
    }
    std::printf("DeepSeek layout: %zu tensors, %lld bytes compared, %lld tensors differ\n", w["trunk"].size(),
                static_cast<long long>(compared), static_cast<long long>(bad));
    EXPECT_EQ(bad, 0);
    expect_banks_equal(out, ref_);
}

TEST_F(ConvertVariants, Fp8BlockScaledWeights) {
    // lm_head, embeddings and layer 0's dense MLP become F8_E4M3 with one f32
    // scale per 128x128 tile (520 rows: a partial last tile), layer 2's
    // experts too (as DeepSeek/K2 ship them).
    Checkpoint ck;
    std::string err;
    ASSERT_TRUE(ck.open(ctest::source_dir(), &err)) << err;
    auto ts = fixture_tensors([](const std::string& n) { return n; });
    std::vector<ctest::StTensor> out_ts;
    int n_fp8 = 0;
    for (auto& t : ts) {
        const bool pick = t.dtype == "BF16" && t.shape.size() == 2 &&
                          (t.name == "lm_head.weight" || t.name.find("layers.0.mlp.") != std::string::npos ||
                           t.name.find("layers.2.block_sparse_moe.experts.") != std::string::npos);
        if (!pick) {
            out_ts.push_back(t);
            continue;
        }
        const int64_t M = t.shape[0], N = t.shape[1], gm = (M + 127) / 128, gn = (N + 127) / 128;
        std::vector<float> w(M * N), sc(gm * gn, 0.0f);
        ASSERT_TRUE(ck.read_rows_f32(t.name, 0, M, w.data(), &err)) << err;
        for (int64_t i = 0; i < M * N; ++i) {
            float& s = sc[(i / N / 128) * gn + (i % N) / 128];
            s = std::max(s, std::fabs(w[i]) / 448.0f);
        }
        std::vector<uint8_t> q(M * N);
        for (int64_t i = 0; i < M * N; ++i) q[i] = e4m3_encode(w[i] / sc[(i / N / 128) * gn + (i % N) / 128]);
        out_ts.push_back({t.name, "F8_E4M3", t.shape, ctest::raw(q)});
        out_ts.push_back({t.name + "_scale_inv", "F32", {gm, gn}, ctest::raw(sc)});
        ++n_fp8;
    }
    ojson cfg = fixture_config();
    cfg["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
    const std::string src = tmp_.sub("f8src"), out = tmp_.sub("f8.waste");
    write_release(src, cfg, out_ts);
    ASSERT_EQ(convert(src, out, &err), 0) << err;

    // Each fp8 trunk tensor equals quantize_rows of q * scale computed here.
    Checkpoint f8;
    ASSERT_TRUE(f8.open(src, &err)) << err;
    const ojson m = ojson::parse(ctest::slurp(out + "/manifest.json"));
    const std::string trunk = ctest::slurp(out + "/trunk.bin");
    int checked = 0, companions = 0;
    for (const ojson& e : m["trunk"]) {
        const std::string name = e["name"];
        if (name.ends_with("_scale_inv")) {
            EXPECT_EQ(e["fmt"], 0) << name;  // companions stay, as small F32 entries
            ++companions;
            continue;
        }
        const TensorInfo* t = f8.find(name);
        if (!t || t->dtype != "F8_E4M3") continue;
        const TensorInfo* s = f8.find(name + "_scale_inv");
        const int64_t M = t->shape[0], N = t->shape[1], gn = (N + 127) / 128;
        std::string qb(t->nbytes, '\0'), sb(s->nbytes, '\0');
        ASSERT_TRUE(f8.read_raw(*t, 0, t->nbytes, qb.data(), &err) && f8.read_raw(*s, 0, s->nbytes, sb.data(), &err));
        const float* sf = reinterpret_cast<const float*>(sb.data());
        std::vector<float> w(M * N);
        for (int64_t i = 0; i < M * N; ++i)
            w[i] = fp8_e4m3_to_f32(static_cast<uint8_t>(qb[i])) * sf[(i / N / 128) * gn + (i % N) / 128];
        const int fmt = e["fmt"];
        const int64_t ng = (N + 127) / 128;
        const uint64_t rb = trunk_row_bytes(fmt, ng * 128);
        std::string want(rb * M + 2 * M * ng, '\0');
        quantize_rows(w.data(), M, N, fmt, reinterpret_cast<uint8_t*>(want.data()),
                      reinterpret_cast<uint16_t*>(want.data() + rb * M));
        EXPECT_EQ(entry_bytes(trunk, e), want) << name;
        ++checked;
    }
    std::printf("fp8: %d tensors converted to F8_E4M3, %d trunk tensors checked byte for byte, %d scale_inv companions\n",
                n_fp8, checked, companions);
    EXPECT_EQ(checked, 4);
    EXPECT_EQ(companions, 4);
    VerifyOptions vo;
    vo.container_dir = out;
    vo.source_dir = src;
    VerifyReport rep;
    ctest::QuietSink sink;
    ASSERT_EQ(run_verify(vo, &rep, &err, &sink), 0) << err;
    for (const auto& x : rep.experts)
        if (x.name.rfind("L2.", 0) == 0) {
            std::printf("fp8 experts %s: rel. Frobenius mean %.4f max %.4f\n", x.name.c_str(), x.rel_frob, x.rel_frob_max);
            EXPECT_LT(x.rel_frob_max, 0.2);
        }
}
