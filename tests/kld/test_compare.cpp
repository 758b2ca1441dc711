// compare: exact zeros, fp64 against the numpy oracle, thread bit-identity,
// festr2-v0 compat (numpy statistics; torch float32 rows, also at K3 vocab),
// -inf handling, sidecar, llama.cpp block.
#include "kld_test_util.h"

using namespace kt;

namespace {

constexpr int T = 64, V = 1000;

struct Fixture {
    std::string d;
    Suite s;
    std::vector<std::vector<float>> ref, cand;
};

Fixture& fx() {
    static Fixture f = [] {
        Fixture f;
        f.d = tmpdir("compare");
        f.s = make_synth_suite(f.d, T, V, {"prose", "code", "instruction"}, 2);
        for (size_t w = 0; w < f.s.windows.size(); ++w) {
            f.ref.push_back(synth_ref(T - 1, V, 100 + uint32_t(w)));
            f.cand.push_back(perturb(f.ref.back(), 0.3f + 0.1f * float(w), 200 + uint32_t(w)));
        }
        write_ref(f.s, f.ref, V, f.d + "/ref");
        write_ref(f.s, f.ref, V, f.d + "/same");
        write_ref(f.s, f.cand, V, f.d + "/cand");
        return f;
    }();
    return f;
}

std::unique_ptr<Operand> dir(const std::string& p) {
    std::unique_ptr<Operand> o;
    Status st = open_v0_dir(p, true, &o);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return o;
}

}  // namespace

TEST(KldCompare, IdenticalOperandsGiveExactlyZero) {
    auto& f = fx();
    auto r = dir(f.d + "/ref"), c = dir(f.d + "/same");
    CompareResult res;
    CompareOptions o;
    Status st = run_compare(f.s, *r, *c, o, &res);
    ASSERT_TRUE(st.is_ok()) << st.message();
    for (auto& w : res.windows)
        for (size_t i = 0; i < w.kl.size(); ++i) {
            ASSERT_EQ(w.kl[i], 0.0) << "window " << w.window_index << " row " << i;
            ASSERT_EQ(w.js[i], 0.0);
            ASSERT_EQ(w.top1[i], 1);
            ASSERT_EQ(w.nll_ref[i], w.nll_cand[i]);
        }
    EXPECT_EQ(res.receipt["kl_reference_to_candidate"]["mean"].get<double>(), 0.0);
    EXPECT_EQ(res.receipt["kl_window_cluster_bootstrap"]["ci95_high"].get<double>(), 0.0);
    EXPECT_EQ(res.receipt["top1_agreement"].get<double>(), 1.0);
    EXPECT_GT(res.receipt["sluice"]["ref_tied_rows"].get<int64_t>(), 0);
    std::printf("identical: mean KL %g, ties in reference rows: %lld\n", res.receipt["kl_reference_to_candidate"]["mean"].get<double>(),
                (long long)res.receipt["sluice"]["ref_tied_rows"].get<int64_t>());
}

TEST(KldCompare, Fp64MatchesNumpyOracle) {
    if (!have_numpy()) GTEST_SKIP() << "no /usr/bin/python3 with numpy (install python3-numpy)";
    auto& f = fx();
    auto r = dir(f.d + "/ref"), c = dir(f.d + "/cand");
    CompareResult res, fres;
    CompareOptions o64;
    o64.precision = Precision::fp64;  // the 1e-9 bound is the fp64 path's (§7.10)
    ASSERT_TRUE(run_compare(f.s, *r, *c, o64, &res).is_ok());
    auto r2 = dir(f.d + "/ref"), c2 = dir(f.d + "/cand");
    ASSERT_TRUE(run_compare(f.s, *r2, *c2, CompareOptions{}, &fres).is_ok());  // the default: fast
    double maxd = 0, maxdj = 0, maxdn = 0, fast_ratio = 0, fast_sum = 0, oracle_sum = 0;
    for (size_t w = 0; w < f.s.windows.size(); ++w) {
        const std::string o = f.d + "/o" + std::to_string(w);
        std::ofstream(o + ".x", std::ios::binary).write(reinterpret_cast<const char*>(f.ref[w].data()), std::streamsize(f.ref[w].size() * 4));
        std::ofstream(o + ".y", std::ios::binary).write(reinterpret_cast<const char*>(f.cand[w].data()), std::streamsize(f.cand[w].size() * 4));
        std::ofstream(o + ".t", std::ios::binary).write(reinterpret_cast<const char*>(f.s.windows[w].tokens.data()), T * 4);
        json j = run_oracle("kl " + o + ".x " + o + ".y " + std::to_string(T - 1) + " " + std::to_string(V) + " " + o + ".t");
        const WindowResult& wr = res.windows[w];
        for (int i = 0; i < T - 1; ++i) {
            maxd = std::max(maxd, std::fabs(wr.kl[size_t(i)] - j["kl"][i].get<double>()));
            const double fk = fres.windows[w].kl[size_t(i)], ok = j["kl"][i].get<double>();
            fast_ratio = std::max(fast_ratio, std::fabs(fk - ok) / (2e-7 + 1e-5 * std::fabs(ok)));
            fast_sum += fk;
            oracle_sum += ok;
            maxdj = std::max(maxdj, std::fabs(wr.js[size_t(i)] - j["js"][i].get<double>()));
            maxdn = std::max(maxdn, std::fabs(wr.nll_ref[size_t(i)] - j["nll_ref"][i].get<double>()));
            maxdn = std::max(maxdn, std::fabs(wr.nll_cand[size_t(i)] - j["nll_cand"][i].get<double>()));
            EXPECT_EQ(wr.top1[size_t(i)], j["top1"][i].get<int>());
            EXPECT_EQ(wr.top1_tie[size_t(i)], j["top1_tie"][i].get<int>());
        }
    }
    std::printf("fp64 vs numpy: max |dKL| %.3g  max |dJS| %.3g  max |dNLL| %.3g\n", maxd, maxdj, maxdn);
    const double fast_mean = std::fabs(fast_sum - oracle_sum) / double(f.s.windows.size() * (T - 1));
    std::printf("fast vs numpy: worst |dKL|/(2e-7+1e-5|KL|) %.3g  |mean KL difference| %.3g\n", fast_ratio, fast_mean);
    EXPECT_LE(fast_ratio, 1.0);  // §7.4 limits
    EXPECT_LE(fast_mean, 1e-8);
    std::printf("mean KL %.9f  CI95 [%.9f, %.9f]  JS %.9f  top1 %.4f  tie-aware %.4f  PPL ref %.4f cand %.4f\n",
                res.receipt["kl_reference_to_candidate"]["mean"].get<double>(),
                res.receipt["kl_window_cluster_bootstrap"]["ci95_low"].get<double>(),
                res.receipt["kl_window_cluster_bootstrap"]["ci95_high"].get<double>(), res.receipt["js"]["mean"].get<double>(),
                res.receipt["top1_agreement"].get<double>(), res.receipt["sluice"]["top1_tie_aware"].get<double>(),
                res.receipt["sluice"]["ppl_ref"].get<double>(), res.receipt["sluice"]["ppl_cand"].get<double>());
    EXPECT_LT(maxd, 1e-9);
    EXPECT_LT(maxdj, 1e-9);
    EXPECT_LT(maxdn, 1e-9);
}

TEST(KldCompare, BitIdenticalForAnyThreadCount) {
    auto& f = fx();
    std::string base;
    for (int th : {1, 2, 3, 7}) {
        auto r = dir(f.d + "/ref"), c = dir(f.d + "/cand");
        CompareOptions o;
        o.threads = th;
        o.llamacpp_block = true;
        CompareResult res;
        ASSERT_TRUE(run_compare(f.s, *r, *c, o, &res).is_ok());
        const std::string txt = dump_py(strip_timing(res.receipt));
        if (base.empty()) base = txt;
        EXPECT_EQ(txt, base) << "threads " << th;
        std::printf("threads %d: receipt sha256 %s\n", th, sha256_hex(txt).c_str());
    }
}

TEST(KldCompare, Festr2CompatReproducesNumpyExactly) {
    if (!have_numpy()) GTEST_SKIP() << "no /usr/bin/python3 with numpy (install python3-numpy)";
    auto& f = fx();
    // Finite data only: festr2's fp32 path turns a reference -inf into NaN.
    const std::string d = f.d + "/compat";
    std::vector<std::vector<float>> rf, cf;
    for (size_t w = 0; w < f.ref.size(); ++w) {
        rf.push_back(f.ref[w]);
        for (auto& x : rf.back()) if (std::isinf(x)) x = -30.f;
        cf.push_back(perturb(rf.back(), 0.2f, 300 + uint32_t(w)));
    }
    write_ref(f.s, rf, V, d + "/ref");
    write_ref(f.s, cf, V, d + "/cand");
    auto r = dir(d + "/ref"), c = dir(d + "/cand");
    CompareOptions o;
    o.compat = Compat::festr2_v0;
    CompareResult res;
    ASSERT_TRUE(run_compare(f.s, *r, *c, o, &res).is_ok());
    // Per-token fp32 KL against numpy's fp32 computation.
    double worst = 0, sa = 0, sb = 0;
    std::vector<double> wm, all;
    for (size_t w = 0; w < rf.size(); ++w) {
        const std::string p = d + "/o" + std::to_string(w);
        std::ofstream(p + ".x", std::ios::binary).write(reinterpret_cast<const char*>(rf[w].data()), std::streamsize(rf[w].size() * 4));
        std::ofstream(p + ".y", std::ios::binary).write(reinterpret_cast<const char*>(cf[w].data()), std::streamsize(cf[w].size() * 4));
        std::ofstream(p + ".t", std::ios::binary).write(reinterpret_cast<const char*>(f.s.windows[w].tokens.data()), T * 4);
        json j = run_oracle("kl " + p + ".x " + p + ".y " + std::to_string(T - 1) + " " + std::to_string(V) + " " + p + ".t");
        for (int i = 0; i < T - 1; ++i) {
            const double a = res.windows[w].kl[size_t(i)], b = j["kl32"][i].get<double>();
            // 2e-6: two float32 ulps of a log-normaliser near ln(1000) + 4.5 (sluice
            // follows torch's exp/log and sum order, numpy has its own; a shift
            // of e in lse moves KL by about e).
            worst = std::max(worst, std::fabs(a - b) / (2e-6 + 1e-3 * std::fabs(b)));
            sa += a;
            sb += b;
        }
        wm.push_back(np_mean(res.windows[w].kl));
        all.insert(all.end(), res.windows[w].kl.begin(), res.windows[w].kl.end());
    }
    std::printf("festr2-v0 fp32 KL vs numpy fp32: worst |d|/(2e-6+1e-3|KL|) %.3g, mean KL relative difference %.3g\n", worst,
                std::fabs(sa - sb) / sb);
    EXPECT_LT(worst, 1.0);  // fp32 exp/log and sum order differ (torch's vs numpy's)
    EXPECT_LT(std::fabs(sa - sb) / sb, 1e-5);
    // Given our per-token vectors, every reported statistic is numpy's, bit for bit.
    write_f64(d + "/wm.f64", wm);
    write_f64(d + "/all.f64", all);
    json b = run_oracle("boot " + d + "/wm.f64 10000 1"), s = run_oracle("summ " + d + "/all.f64");
    const json& kb = res.receipt["kl_window_cluster_bootstrap"];
    for (const char* k : {"estimate", "standard_error", "ci95_low", "ci95_high"}) EXPECT_EQ(kb[k].get<double>(), b[k].get<double>()) << k;
    for (const char* k : {"mean", "median", "p95", "p99", "max"})
        EXPECT_EQ(res.receipt["kl_reference_to_candidate"][k].get<double>(), s[k].get<double>()) << k;
    // Per-domain bootstraps: fresh generator per domain, sorted order.
    for (const char* dom : {"code", "instruction", "prose"}) {
        std::vector<double> dm;
        for (size_t w = 0; w < rf.size(); ++w)
            if (f.s.windows[w].domain == dom) dm.push_back(wm[w]);
        write_f64(d + "/dm.f64", dm);
        json bd = run_oracle("boot " + d + "/dm.f64 10000 1");
        EXPECT_EQ(res.receipt["domains"][dom]["ci95_low"].get<double>(), bd["ci95_low"].get<double>()) << dom;
        EXPECT_EQ(res.receipt["domains"][dom]["ci95_high"].get<double>(), bd["ci95_high"].get<double>()) << dom;
    }
    // §4.7 exact top-level key set (plus the sluice{} block).
    std::vector<std::string> keys;
    for (auto it = res.receipt.begin(); it != res.receipt.end(); ++it) keys.push_back(it.key());
    EXPECT_EQ(keys, (std::vector<std::string>{"candidate_dir", "direction", "domains", "js", "kl_reference_to_candidate",
                                              "kl_window_cluster_bootstrap", "per_window", "positions", "reference_dir",
                                              "sluice", "top1_agreement", "window_range", "windows"}));
    std::printf("festr2-v0: mean KL %.9g CI [%.9g, %.9g] top1 %.6f\n", res.receipt["kl_reference_to_candidate"]["mean"].get<double>(),
                kb["ci95_low"].get<double>(), kb["ci95_high"].get<double>(), res.receipt["top1_agreement"].get<double>());
}

TEST(KldCompare, CandidateMinusInfMakesKlInfiniteAndIsNamed) {
    auto& f = fx();
    const std::string d = f.d + "/inf";
    auto c = f.ref;
    const int w = 1, row = 4;
    float* x = c[w].data() + size_t(row) * V;
    const int col = int(std::max_element(x, x + V) - x);
    x[col] = -INFINITY;
    write_ref(f.s, c, V, d);
    auto r = dir(f.d + "/ref"), cd = dir(d);
    CompareResult res;
    ASSERT_TRUE(run_compare(f.s, *r, *cd, CompareOptions{}, &res).is_ok());
    EXPECT_TRUE(std::isinf(res.windows[w].kl[row]));
    EXPECT_EQ(res.receipt["sluice"]["inf_kl_tokens"].get<int>(), 1);
    EXPECT_EQ(res.receipt["sluice"]["inf_kl_named"][0].get<std::string>(), "window 1 row 4");
    EXPECT_EQ(dump_py(res.receipt["kl_reference_to_candidate"]["mean"]), "Infinity\n");
    CompareOptions o;
    o.finite_only = true;
    auto r2 = dir(f.d + "/ref"), c2 = dir(d);
    ASSERT_TRUE(run_compare(f.s, *r2, *c2, o, &res).is_ok());
    EXPECT_EQ(res.receipt["kl_reference_to_candidate"]["mean"].get<double>(), 0.0);
    EXPECT_EQ(res.receipt["positions"].get<int>(), 6 * 63);
}

TEST(KldCompare, CliReceiptSidecarAndLlamaBlock) {
    auto& f = fx();
    std::string out, er;
    const std::string j = f.d + "/receipt.json", tk = f.d + "/tokens.safetensors";
    int rc = kld({"compare", "--suite", f.d + "/suite", "--reference", f.d + "/ref", "--candidate", f.d + "/cand", "--json", j,
                  "--tokens", tk, "--llamacpp-block", "--threads", "3"}, &out, &er);
    ASSERT_EQ(rc, 0) << er;
    std::printf("%s", out.c_str());
    EXPECT_NE(out.find("====== KL divergence statistics ======"), std::string::npos);
    EXPECT_NE(out.find("Same top p:"), std::string::npos);
    json r = json::parse(read_text(j));
    EXPECT_EQ(read_text(j), dump_py(r));
    StFile sf;
    ASSERT_TRUE(sf.open(tk).is_ok());
    EXPECT_EQ(sf.find("kl")->shape[0], 6u * 63);
    EXPECT_EQ(sf.find("top1")->dtype, "U8");
    EXPECT_EQ(sf.find("window")->dtype, "I32");
    // Quick gate: window list selection.
    rc = kld({"compare", "--suite", f.d + "/suite", "--reference", f.d + "/ref", "--candidate", f.d + "/cand", "--windows", "0,2-3"}, &out, &er);
    ASSERT_EQ(rc, 0) << er;
    // Without --json: the summary and a per-domain table, no per-window JSON lines.
    EXPECT_EQ(out.find('{'), std::string::npos) << out;
    EXPECT_NE(out.find("mean KL"), std::string::npos) << out;
    EXPECT_NE(out.find("domain"), std::string::npos) << out;
}

TEST(KldCompare, Festr2CompatAgreesWithTorchFloat32) {
    if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "no torch for /usr/bin/python3 (install python3-torch)";
    auto& f = fx();
    const std::string d = f.d + "/torch";
    fs::create_directories(d);
    double sa = 0, sb = 0, ja = 0, jb = 0, worst = 0;
    int t1a = 0, t1b = 0;
    for (size_t w = 0; w < 3; ++w) {
        std::vector<float> x = f.ref[w];
        for (auto& v : x) if (std::isinf(v)) v = -30.f;
        std::vector<float> y = perturb(x, 0.2f, 900 + uint32_t(w));
        std::ofstream(d + "/x", std::ios::binary).write(reinterpret_cast<const char*>(x.data()), std::streamsize(x.size() * 4));
        std::ofstream(d + "/y", std::ios::binary).write(reinterpret_cast<const char*>(y.data()), std::streamsize(y.size() * 4));
        json o = run_oracle("torchkl " + d + "/x " + d + "/y " + std::to_string(T - 1) + " " + std::to_string(V));
        for (int r = 0; r < T - 1; ++r) {
            RowMetrics m;
            int64_t col;
            int side;
            ASSERT_TRUE(score_row(x.data() + size_t(r) * V, y.data() + size_t(r) * V, V, -1, Numerics::festr2_v0, true, &m, &col, &side).is_ok());
            const double tk = o["kl"][r].get<double>();
            worst = std::max(worst, std::fabs(m.kl - tk) / (2e-7 + 1e-3 * std::fabs(tk)));
            sa += m.kl; sb += tk;
            ja += m.js; jb += o["js"][r].get<double>();
            t1a += m.top1; t1b += o["top1"][r].get<int>();
        }
    }
    std::printf("festr2-v0 vs torch fp32: mean KL rel diff %.3g, mean JS rel diff %.3g, worst row %.3g, top1 %d/%d\n",
                std::fabs(sa - sb) / sb, std::fabs(ja - jb) / jb, worst, t1a, t1b);
    EXPECT_LT(worst, 1.0);
    EXPECT_LT(std::fabs(sa - sb) / sb, 1e-5);
    EXPECT_LT(std::fabs(ja - jb) / jb, 1e-5);
    EXPECT_EQ(t1a, t1b);
}

namespace {

// One torch comparison at Kimi K3 vocab size; returns false (with *why) when
// the oracle did not run torch with the capability asked for.
struct TorchAgreement {
    double kl_rel = 0, js_rel = 0, worst = 0, mean_kl = 0;
    int kl_bit_equal = 0, js_bit_equal = 0, worst_row = -1, rows = 0;
    std::string capability;
};

// The lane count follows the capability torch reports (AVX2: 8, AVX512: 16);
// t.rows stays 0 for any other.
TorchAgreement torch_agreement(const std::string& d, const std::vector<float>& x, const std::vector<float>& y, int R,
                               int V, const std::string& cap) {
    TorchAgreement t;
    json o = run_oracle("torchkl " + d + "/x " + d + "/y " + std::to_string(R) + " " + std::to_string(V) + " " + cap);
    t.capability = o.value("capability", "");
    const int lanes = t.capability == "AVX2" ? 8 : t.capability == "AVX512" ? 16 : 0;
    if (!lanes) return t;
    double sa = 0, sb = 0, ja = 0, jb = 0;
    for (int r = 0; r < R; ++r) {
        RowMetrics m;
        int64_t col;
        int side;
        EXPECT_TRUE(score_row(x.data() + size_t(r) * V, y.data() + size_t(r) * V, V, -1, Numerics::festr2_v0, true, &m,
                              &col, &side, FastIsa::automatic, lanes)
                        .is_ok());
        const double tk = o["kl"][r].get<double>(), tj = o["js"][r].get<double>();
        const double rel = std::fabs(m.kl - tk) / std::fabs(tk);
        if (rel > t.worst) { t.worst = rel; t.worst_row = r; }
        t.kl_bit_equal += m.kl == tk;
        t.js_bit_equal += m.js == tj;
        sa += m.kl; sb += tk;
        ja += m.js; jb += tj;
    }
    t.rows = R;
    t.kl_rel = std::fabs(sa - sb) / sb;
    t.js_rel = std::fabs(ja - jb) / jb;
    t.mean_kl = sb / R;
    return t;
}

}  // namespace

// §7.4 compat target at the Kimi K3 vocabulary (V = 163840): festr2-v0 means
// within 1e-6 relative of torch's float32 CPU arithmetic. Rows are BF16-valued
// N(0, 3^2) logits; the candidate adds N(0, s^2) noise with s from 0.05 to
// 0.15 (KL about 1e-3 to 1e-2).
TEST(KldCompare, Festr2CompatK3VocabMatchesTorch) {
    if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "no torch for /usr/bin/python3 (install python3-torch)";
    constexpr int R = 24, VK = 163840;
    const std::string d = tmpdir("k3torch");
    std::mt19937 rng(4242);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(size_t(R) * VK), y(x.size());
    for (int r = 0; r < R; ++r) {
        const float s = 0.05f + 0.1f * float(r) / float(R - 1);
        for (int v = 0; v < VK; ++v) {
            const size_t i = size_t(r) * VK + size_t(v);
            x[i] = bf16_round(3.f * nd(rng));
            y[i] = x[i] + s * nd(rng);
        }
        if (r % 4 == 0) {  // a few peaked rows (the peak on both sides)
            const size_t i = size_t(r) * VK + size_t(rng() % VK);
            x[i] = 18.f;
            y[i] = 18.f + s * nd(rng);
        }
    }
    std::ofstream(d + "/x", std::ios::binary).write(reinterpret_cast<const char*>(x.data()), std::streamsize(x.size() * 4));
    std::ofstream(d + "/y", std::ios::binary).write(reinterpret_cast<const char*>(y.data()), std::streamsize(y.size() * 4));
    int checked = 0;
    for (const char* cap : {"", "avx512"}) {  // torch's default capability, then ATEN_CPU_CAPABILITY=avx512
        // Asking torch for AVX-512 kernels on a CPU without them kills it
        // with SIGILL (seen on a VM that lost AVX-512): nothing to compare.
#if defined(__x86_64__) || defined(__i386__)
        const bool has512 = __builtin_cpu_supports("avx512f");
#else
        const bool has512 = false;
#endif
        if (*cap && !has512) {
            std::printf("torch capability 'avx512': this CPU has no AVX-512, not checked\n");
            continue;
        }
        const TorchAgreement t = torch_agreement(d, x, y, R, VK, cap);
        if (t.rows == 0) {
            std::printf("torch capability '%s' (asked: '%s'): no lane count to check\n", t.capability.c_str(), cap);
            continue;
        }
        std::printf("festr2-v0 vs torch %s, V=%d, %d rows, mean KL %.4g: mean KL rel diff %.3g, mean JS rel diff %.3g, "
                    "bit-equal row KL %d/%d, JS %d/%d, worst row %d (KL rel diff %.3g)\n",
                    t.capability.c_str(), VK, t.rows, t.mean_kl, t.kl_rel, t.js_rel, t.kl_bit_equal, t.rows,
                    t.js_bit_equal, t.rows, t.worst_row, t.worst);
        EXPECT_LE(t.kl_rel, 1e-6) << t.capability;
        EXPECT_LE(t.js_rel, 1e-6) << t.capability;
        EXPECT_LT(t.worst, 1e-4) << t.capability;
        ++checked;
    }
    if (!checked) GTEST_SKIP() << "torch ran with neither the AVX2 nor the AVX512 CPU capability";
}

TEST(KldCompare, TorchLanesOptionReachesTheReceipt) {
    auto& f = fx();
    const std::string d = f.d + "/lanes";
    std::vector<std::vector<float>> rf = f.ref, cf = f.cand;  // finite: festr2-v0 turns -inf into NaN
    for (auto* t : {&rf, &cf})
        for (auto& w : *t)
            for (auto& x : w) if (std::isinf(x)) x = -30.f;
    write_ref(f.s, rf, V, d + "/ref");
    write_ref(f.s, cf, V, d + "/cand");
    std::string out, er;
    const std::string j = d + "/lanes16.json";
    const std::vector<std::string> base = {"compare", "--suite", f.d + "/suite", "--reference", d + "/ref",
                                           "--candidate", d + "/cand", "--windows", "0"};
    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> w = base;
        w.insert(w.end(), extra.begin(), extra.end());
        return kld(w, &out, &er);
    };
    ASSERT_EQ(with({"--compat", "festr2-v0", "--torch-lanes", "16", "--json", j}), 0) << er;
    EXPECT_EQ(json::parse(read_text(j))["sluice"]["torch_lanes"].get<int>(), 16);
    ASSERT_EQ(with({"--compat", "festr2-v0", "--json", j}), 0) << er;
    EXPECT_EQ(json::parse(read_text(j))["sluice"]["torch_lanes"].get<int>(), 8);  // the default
    EXPECT_EQ(with({"--compat", "festr2-v0", "--torch-lanes", "12"}), 2);
    EXPECT_NE(er.find("--torch-lanes"), std::string::npos) << er;
    EXPECT_EQ(with({"--torch-lanes", "16"}), 2);  // festr2-v0 only
}
