// capture through the engine callback, resume, --model streaming, paired, noise.
#include "kld_test_util.h"

using namespace kt;

namespace {

// A deterministic toy "model": row r depends only on tokens[0..r] through a
// running hash, so chunking the window differently never changes a row.
class HashEngine : public LogitsEngine {
public:
    HashEngine(int V, float temp, uint64_t salt) : V_(V), temp_(temp), salt_(salt) {}
    int64_t n_vocab() override { return V_; }
    Status reset() override {
        h_ = salt_;
        return {};
    }
    Status eval(const int32_t* tok, size_t n, float* out) override {
        for (size_t i = 0; i < n; ++i) {
            h_ = (h_ ^ uint64_t(tok[i])) * 0x100000001b3ull;
            std::mt19937_64 g(h_);
            for (int v = 0; v < V_; ++v) {
                float x = float(int64_t(g() % 2001) - 1000) / 100.f * temp_;
                if (nan_at_ >= 0 && evals_ == nan_at_ && v == 3) x = NAN;
                out[i * size_t(V_) + size_t(v)] = bf16_round(x);
            }
            ++evals_;
        }
        return {};
    }
    json identity() override { return json{{"engine", "hash"}, {"temp", temp_}}; }
    std::map<std::string, std::string> extra_metadata() override { return {{"sluice_version", "test"}}; }
    int nan_at_ = -1;
    int evals_ = 0;
private:
    int V_;
    float temp_;
    uint64_t salt_, h_ = 0;
};

KldHooks hooks_for(float temp) {
    KldHooks h;
    h.open_engine = [temp](const std::string&, int, std::unique_ptr<LogitsEngine>* e) -> Status {
        *e = std::make_unique<HashEngine>(500, temp, 11);
        return {};
    };
    return h;
}

}  // namespace

TEST(KldCapture, WritesV0LayoutResumesAndStreamsModel) {
    const std::string d = tmpdir("capture");
    Suite s = make_synth_suite(d, 48, 500, {"prose", "code"}, 2);
    std::string out, er;
    ASSERT_EQ(kld({"capture", "--model", "toy", "--suite", d + "/suite", "--out", d + "/cap", "--windows", "0-1", "--chunk", "5"},
                  &out, &er, hooks_for(1.f)), 0) << er;
    std::printf("%s", out.c_str());
    json m = json::parse(read_text(d + "/cap/manifest.json"));
    EXPECT_EQ(m["window_count"], 2);
    EXPECT_EQ(m["windows"][1]["file"], "logits_001.safetensors");
    EXPECT_EQ(m["windows"][1]["shape"], json::array({47, 500}));
    EXPECT_EQ(m["runtime"]["capture_tool"], "sluice kld capture");
    StFile f;
    ASSERT_TRUE(f.open(d + "/cap/logits_001.safetensors").is_ok());
    EXPECT_EQ(f.metadata().size(), 8u);  // the seven festr2 keys + sluice_version
    EXPECT_EQ(f.metadata().at("format"), "sluice-kld-logits-v1");
    EXPECT_EQ(f.metadata().at("token_ids_json_sha256"), s.windows[1].token_hash);
    std::string h;
    ASSERT_TRUE(sha256_file(d + "/cap/logits_001.safetensors", &h).is_ok());
    EXPECT_EQ(m["windows"][1]["sha256"], h);
    // Resume: the two finished windows are skipped, the rest captured.
    ASSERT_EQ(kld({"capture", "--model", "toy", "--suite", d + "/suite", "--out", d + "/cap"}, &out, &er, hooks_for(1.f)), 0) << er;
    std::printf("%s", out.c_str());
    EXPECT_NE(out.find("captured 2 windows"), std::string::npos);
    EXPECT_NE(out.find("skipped 2"), std::string::npos);
    // A corrupted file is recaptured on the next run.
    {
        std::fstream c(d + "/cap/logits_000.safetensors", std::ios::in | std::ios::out | std::ios::binary);
        c.seekp(-4, std::ios::end);
        c.write("\x01\x02\x03\x04", 4);
    }
    ASSERT_EQ(kld({"capture", "--model", "toy", "--suite", d + "/suite", "--out", d + "/cap"}, &out, &er, hooks_for(1.f)), 0) << er;
    EXPECT_NE(out.find("captured 1 windows"), std::string::npos) << out;
    // Streaming the model as the candidate against its own capture: KL exactly 0.
    const std::string rj = d + "/self.json";
    ASSERT_EQ(kld({"compare", "--suite", d + "/suite", "--reference", d + "/cap", "--model", "toy", "--json", rj}, &out, &er,
                  hooks_for(1.f)), 0) << er;
    json r = json::parse(read_text(rj));
    EXPECT_EQ(r["kl_reference_to_candidate"]["max"].get<double>(), 0.0);
    EXPECT_EQ(r["sluice"]["candidate"]["kind"], "engine");
    // A different "model" streams a non-zero KL, with no candidate files written.
    ASSERT_EQ(kld({"compare", "--suite", d + "/suite", "--reference", d + "/cap", "--model", "toy2", "--json", rj}, &out, &er,
                  hooks_for(0.8f)), 0) << er;
    r = json::parse(read_text(rj));
    std::printf("streamed candidate (temp 0.8): mean KL %.6f top1 %.4f\n", r["kl_reference_to_candidate"]["mean"].get<double>(),
                r["top1_agreement"].get<double>());
    EXPECT_GT(r["kl_reference_to_candidate"]["mean"].get<double>(), 0.0);
}

TEST(KldCapture, EngineNanRefusedNothingPartialLeft) {
    const std::string d = tmpdir("capture-nan");
    Suite s = make_synth_suite(d, 32, 500, {"prose"}, 2);
    HashEngine e(500, 1.f, 11);
    e.nan_at_ = 40;  // inside window 1
    CaptureReport rep;
    Status st = capture(&e, s, {0, 1}, d + "/cap", CaptureOptions{}, &rep);
    std::printf("engine NaN: %s\n", st.message().c_str());
    EXPECT_EQ(code_of(st), Code::nonfinite);
    EXPECT_EQ(exit_code(st), 6);
    EXPECT_TRUE(file_exists(d + "/cap/logits_000.safetensors"));
    EXPECT_FALSE(file_exists(d + "/cap/logits_001.safetensors"));
    EXPECT_FALSE(file_exists(d + "/cap/logits_001.safetensors.tmp"));
    json m = json::parse(read_text(d + "/cap/manifest.json"));
    EXPECT_EQ(m["window_count"], 1);
}

TEST(KldCapture, PairedAndNoise) {
    const std::string d = tmpdir("paired");
    Suite s = make_synth_suite(d, 48, 500, {"prose", "code"}, 3);
    auto cap = [&](float temp, uint64_t salt, const std::string& out) {
        HashEngine e(500, temp, salt);
        CaptureReport rep;
        std::vector<int> pos = {0, 1, 2, 3, 4, 5};
        Status st = capture(&e, s, pos, out, CaptureOptions{}, &rep);
        ASSERT_TRUE(st.is_ok()) << st.message();
    };
    cap(1.f, 11, d + "/ref");
    cap(1.f, 11, d + "/ref2");     // a repeat capture: bit-identical
    cap(0.97f, 11, d + "/a");      // close to the reference
    cap(0.7f, 11, d + "/b");       // further away
    std::string out, er;
    ASSERT_EQ(kld({"noise", "--suite", d + "/suite", "--runs", d + "/ref", d + "/ref2", "--json", d + "/noise.json"}, &out, &er), 0) << er;
    std::printf("%s", out.c_str());
    json n = json::parse(read_text(d + "/noise.json"));
    EXPECT_TRUE(n["bit_identical"].get<bool>());
    EXPECT_EQ(n["noise_floor_kl"]["mean"].get<double>(), 0.0);
    EXPECT_EQ(n["noise_diff"].get<double>(), 0.0);
    ASSERT_EQ(kld({"paired", "--suite", d + "/suite", "--reference", d + "/ref", "--a", d + "/a", "--b", d + "/b", "--noise",
                   d + "/noise.json", "--json", d + "/paired.json"}, &out, &er), 0) << er;
    std::printf("%s", out.c_str());
    json p = json::parse(read_text(d + "/paired.json"));
    EXPECT_EQ(p["verdict"]["verdict"], "A better");
    EXPECT_LT(p["kl_difference"]["bootstrap"]["ci95_high"].get<double>(), 0.0);
    EXPECT_EQ(p["kl_difference"]["bootstrap"]["p_delta_below_zero"].get<double>(), 1.0);
    // Swapped: B better. With a large noise floor: indistinguishable.
    ASSERT_EQ(kld({"paired", "--suite", d + "/suite", "--reference", d + "/ref", "--a", d + "/b", "--b", d + "/a", "--json", d + "/p2.json"}, &out, &er), 0);
    EXPECT_EQ(json::parse(read_text(d + "/p2.json"))["verdict"]["verdict"], "B better");
    ASSERT_EQ(kld({"paired", "--suite", d + "/suite", "--reference", d + "/ref", "--a", d + "/a", "--b", d + "/b", "--noise-diff", "10",
                   "--json", d + "/p3.json"}, &out, &er), 0);
    EXPECT_EQ(json::parse(read_text(d + "/p3.json"))["verdict"]["verdict"], "indistinguishable at this suite size");
    // Noise with a reference: the spread between two different runs.
    ASSERT_EQ(kld({"noise", "--suite", d + "/suite", "--runs", d + "/a", d + "/b", "--reference", d + "/ref", "--json", d + "/n2.json"}, &out, &er), 0) << er;
    std::printf("%s", out.c_str());
    json n2 = json::parse(read_text(d + "/n2.json"));
    EXPECT_FALSE(n2["bit_identical"].get<bool>());
    EXPECT_GT(n2["noise_diff"].get<double>(), 0.0);
    // Receipts mode needs identical reference identity.
    ASSERT_EQ(kld({"compare", "--suite", d + "/suite", "--reference", d + "/ref", "--candidate", d + "/a", "--json", d + "/ra.json"}), 0);
    ASSERT_EQ(kld({"compare", "--suite", d + "/suite", "--reference", d + "/ref", "--candidate", d + "/b", "--json", d + "/rb.json"}), 0);
    ASSERT_EQ(kld({"compare", "--suite", d + "/suite", "--reference", d + "/a", "--candidate", d + "/b", "--json", d + "/rx.json"}), 0);
    ASSERT_EQ(kld({"paired", "--receipts", d + "/ra.json", d + "/rb.json", "--json", d + "/pr.json"}, &out, &er), 0) << er;
    EXPECT_EQ(json::parse(read_text(d + "/pr.json"))["verdict"]["verdict"], "A better");
    EXPECT_EQ(kld({"paired", "--receipts", d + "/ra.json", d + "/rx.json"}, &out, &er), 3) << er;
}

TEST(KldCapture, VllmReferenceDefaultsToPublishedNoiseFloor) {
    const std::string d = tmpdir("paired-vllm");
    Suite s = make_synth_suite(d, 40, 500, {"prose"}, 3);
    for (auto [t, name] : std::vector<std::pair<float, std::string>>{{1.f, "ref"}, {0.999f, "a"}, {0.998f, "b"}}) {
        HashEngine e(500, t, 11);
        CaptureReport rep;
        ASSERT_TRUE(capture(&e, s, {0, 1, 2}, d + "/" + name, CaptureOptions{}, &rep).is_ok());
    }
    // Strip sluice's capture tag: the reference now looks vLLM-captured.
    json m = json::parse(read_text(d + "/ref/manifest.json"));
    m["runtime"] = json{{"vllm", "55e46aeb"}};
    write_text(d + "/ref/manifest.json", dump_py(m));
    std::string out, er;
    ASSERT_EQ(kld({"paired", "--suite", d + "/suite", "--reference", d + "/ref", "--a", d + "/a", "--b", d + "/b", "--json", d + "/p.json"}, &out, &er), 0) << er;
    json p = json::parse(read_text(d + "/p.json"));
    std::printf("%s", out.c_str());
    EXPECT_EQ(p["verdict"]["noise_diff"].get<double>(), 0.004);
}
