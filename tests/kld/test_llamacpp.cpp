// llama.cpp .kld interchange (§6).
#include "kld_test_util.h"

using namespace kt;

TEST(KldLlama, RowEncodingMatchesOracleBitForBit) {
    if (!have_numpy()) GTEST_SKIP() << "no /usr/bin/python3 with numpy (install python3-numpy)";
    const std::string d = tmpdir("kldenc");
    for (int V : {1000, 999, 7}) {
        const int R = 20;
        std::vector<float> x = synth_ref(R, V, 5 + uint32_t(V));
        for (auto& v : x) if (std::isinf(v)) v = -40.f;  // below the -16 cut
        for (int v = 0; v < V; ++v) x[size_t(19) * V + size_t(v)] = 1.5f;  // flat row: scale 0
        std::ofstream(d + "/x", std::ios::binary).write(reinterpret_cast<const char*>(x.data()), std::streamsize(x.size() * 4));
        json o = run_oracle("kldenc " + d + "/x " + std::to_string(R) + " " + std::to_string(V));
        const size_t nv = size_t(2 * ((V + 1) / 2) + 4);
        std::vector<uint16_t> enc(nv * R);
        for (int r = 0; r < R; ++r) kld_encode_row(x.data() + size_t(r) * V, V, enc.data() + size_t(r) * nv);
        std::string hex;
        const uint8_t* b = reinterpret_cast<const uint8_t*>(enc.data());
        char t[3];
        for (size_t i = 0; i < enc.size() * 2; ++i) { std::snprintf(t, 3, "%02x", b[i]); hex += t; }
        EXPECT_EQ(hex, o["hex"].get<std::string>()) << "V " << V;
        std::printf("V=%d: %d rows encoded, %s\n", V, R, hex == o["hex"].get<std::string>() ? "bit-identical to oracle" : "DIFFER");
    }
}

TEST(KldLlama, ExportReadRoundTripAndCompare) {
    const std::string d = tmpdir("kldrt");
    const int T = 64, V = 999;  // odd V: one padding slot per row
    Suite s = make_synth_suite(d, T, V, {"prose", "code"}, 2);
    std::vector<std::vector<float>> ref, cand;
    for (int w = 0; w < 4; ++w) {
        ref.push_back(synth_ref(T - 1, V, 40 + uint32_t(w)));
        cand.push_back(perturb(ref.back(), 0.25f, 50 + uint32_t(w)));
    }
    write_ref(s, ref, V, d + "/ref");
    write_ref(s, cand, V, d + "/cand");
    std::string out, er;
    ASSERT_EQ(kld({"export-kld", "--suite", d + "/suite", "--reference", d + "/ref", "--out", d + "/base.kld"}, &out, &er), 0) << er;
    EXPECT_NE(er.find("BOS"), std::string::npos);
    KldFile f;
    Status st = kld_open(d + "/base.kld", &f);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(f.n_ctx, T);
    EXPECT_EQ(f.n_vocab, V);
    EXPECT_EQ(f.n_chunk, 4);
    EXPECT_EQ(fs::file_size(d + "/base.kld"), kld_expected_size(T, V, 4));
    for (int c = 0; c < 4; ++c)
        EXPECT_TRUE(std::equal(s.windows[c].tokens.begin(), s.windows[c].tokens.end(), f.tokens.begin() + c * T));
    // Every stored row equals a fresh encoding of the reference row.
    std::vector<uint16_t> row, enc(size_t(f.row_u16()));
    int same = 0, total = 0;
    for (int c = 0; c < 4; ++c)
        for (int j = T / 2; j <= T - 2; ++j) {
            ASSERT_TRUE(kld_read_row(f, c, j, &row).is_ok());
            kld_encode_row(ref[c].data() + size_t(j) * V, V, enc.data());
            same += row == enc;
            ++total;
        }
    EXPECT_EQ(same, total);
    std::printf(".kld round trip: %d/%d rows identical, file %llu bytes\n", same, total, (unsigned long long)fs::file_size(d + "/base.kld"));
    // llama.cpp flow against the base: the reference itself gives only the quantization error.
    ASSERT_EQ(kld({"compare", "--reference", d + "/base.kld", "--candidate", d + "/ref", "--json", d + "/self.json"}, &out, &er), 0) << er;
    json self = json::parse(read_text(d + "/self.json"));
    std::printf("reference vs its own .kld: KLD %.3g same-top %.4f\n", self["kld_mean"].get<double>(), self["same_top_p"].get<double>());
    EXPECT_LT(std::fabs(self["kld_mean"].get<double>()), 1e-5);
    ASSERT_EQ(kld({"compare", "--reference", d + "/base.kld", "--candidate", d + "/cand", "--json", d + "/c.json"}, &out, &er), 0) << er;
    std::printf("%s", out.c_str());
    json cj = json::parse(read_text(d + "/c.json"));
    // Against the exact fp64 path restricted to llama.cpp's rows: close, but
    // not equal (−16 cut, uint16 quantization).
    ASSERT_EQ(kld({"compare", "--suite", d + "/suite", "--reference", d + "/ref", "--candidate", d + "/cand", "--llamacpp-block",
                   "--llamacpp-positions", "second-half", "--json", d + "/exact.json"}, &out, &er), 0) << er;
    std::printf("exact block from fp32 reference:\n%s", out.c_str());
    double exact = 0;
    int n = 0;
    json ex = json::parse(read_text(d + "/exact.json"));
    (void)ex;
    CompareResult res;
    std::unique_ptr<Operand> r, c;
    ASSERT_TRUE(open_v0_dir(d + "/ref", true, &r).is_ok());
    ASSERT_TRUE(open_v0_dir(d + "/cand", true, &c).is_ok());
    ASSERT_TRUE(run_compare(s, *r, *c, CompareOptions{}, &res).is_ok());
    for (auto& w : res.windows)
        for (int j = T / 2; j <= T - 2; ++j) { exact += w.kl[size_t(j)]; ++n; }
    exact /= n;
    std::printf(".kld KLD %.6f vs exact second-half KL %.6f\n", cj["kld_mean"].get<double>(), exact);
    EXPECT_NEAR(cj["kld_mean"].get<double>(), exact, 0.02 * exact + 1e-4);
    // Refusals: vocab mismatch, bad magic, wrong size.
    write_ref(s, ref, V, d + "/ref");
    Suite s2 = make_synth_suite(d + "/other", T, 1000, {"prose", "code"}, 2);
    std::vector<std::vector<float>> r1000;
    for (int w = 0; w < 4; ++w) r1000.push_back(synth_ref(T - 1, 1000, 1));
    write_ref(s2, r1000, 1000, d + "/v1000");
    EXPECT_EQ(kld({"compare", "--reference", d + "/base.kld", "--candidate", d + "/v1000"}, &out, &er), 3) << er;
    std::string bytes = read_text(d + "/base.kld");
    write_text(d + "/short.kld", bytes.substr(0, bytes.size() - 2));
    EXPECT_EQ(kld({"compare", "--reference", d + "/short.kld", "--candidate", d + "/ref"}, &out, &er), 4);
    std::printf("size refusal: %s", er.c_str());
    bytes[0] = 'X';
    write_text(d + "/magic.kld", bytes);
    EXPECT_EQ(kld({"compare", "--reference", d + "/magic.kld", "--candidate", d + "/ref"}, &out, &er), 4);
    std::printf("magic refusal: %s", er.c_str());
}
