// The fast kernel (KLD.md §7.4): its exp and JS mixture function against
// fp64, its scalar/AVX2/AVX-512/NEON forms against each other (bit for bit), its
// rows against the fp64 path within the §7.4 limits, and its receipts
// across thread counts.
#include <cstring>

#include "kld/kernels/kernel_fast.h"
#include "kld_test_util.h"

using namespace kt;

namespace {

std::vector<FastIsa> isas() {
    std::vector<FastIsa> v;
    for (FastIsa i : {FastIsa::scalar, FastIsa::avx2, FastIsa::avx512, FastIsa::neon})
        if (fast_isa_available(i)) v.push_back(i);
    return v;
}

// Every field, bit for bit.
bool same_bits(const RowMetrics& a, const RowMetrics& b) {
    const double da[] = {a.kl, a.js, a.nll_ref, a.nll_cand, a.dp, a.abs_err_mean, a.abs_err_max};
    const double db[] = {b.kl, b.js, b.nll_ref, b.nll_cand, b.dp, b.abs_err_mean, b.abs_err_max};
    return std::memcmp(da, db, sizeof da) == 0 && a.top1_ref == b.top1_ref && a.top1_cand == b.top1_cand &&
           a.top1 == b.top1 && a.top1_tie_aware == b.top1_tie_aware && a.ref_tied == b.ref_tied;
}

RowMetrics score(const float* x, const float* y, int64_t V, int32_t tok, Numerics n, FastIsa isa = FastIsa::automatic,
                 bool js = true) {
    RowMetrics m;
    int64_t col = 0;
    int side = 0;
    Status st = score_row(x, y, V, tok, n, js, &m, &col, &side, isa);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return m;
}

// Row pairs of every kind the limits must hold for: BF16-valued rows with
// tied maxima and -inf entries, peaked and flat rows, candidates from
// 1e-4 to 3 nats of noise, BF16-rounded candidates, and -inf in both.
struct Case {
    int64_t V;
    std::vector<float> x, y;
    std::string what;
};

std::vector<Case> cases() {
    std::vector<Case> out;
    std::mt19937 rng(2026);
    const float sigmas[] = {1e-4f, 1e-3f, 1e-2f, 0.1f, 0.3f, 1.f, 3.f};
    for (int64_t V : {int64_t(1000), int64_t(1003), int64_t(4099), int64_t(163840)}) {
        const int rows = V > 10000 ? 6 : 40;
        for (int r = 0; r < rows; ++r) {
            Case c;
            c.V = V;
            std::normal_distribution<float> nd(0.f, r % 4 == 0 ? 0.5f : 3.f);  // some flat rows
            c.x.resize(size_t(V));
            for (auto& v : c.x) v = bf16_round(nd(rng));
            if (r % 4 != 0) c.x[rng() % V] = r % 3 == 0 ? 30.f : 14.f;  // peaked
            if (r % 5 == 0) c.x[rng() % V] = *std::max_element(c.x.begin(), c.x.end());  // tie at the max
            if (r % 3 == 0)
                for (int k = 0; k < 5; ++k) c.x[rng() % V] = -INFINITY;
            const float s = sigmas[r % 7];
            std::normal_distribution<float> pd(0.f, s);
            c.y.resize(size_t(V));
            for (int64_t v = 0; v < V; ++v) c.y[v] = std::isinf(c.x[v]) ? (r % 2 ? -INFINITY : -25.f) : c.x[v] + pd(rng);
            if (r % 6 == 1)
                for (auto& v : c.y) v = bf16_round(v);
            if (r % 10 == 7) c.y[rng() % V] = -INFINITY;  // KL = +inf if x is finite there
            c.what = "V " + std::to_string(V) + " row " + std::to_string(r) + " sigma " + std::to_string(s);
            out.push_back(std::move(c));
        }
    }
    // Pass 1 runs in tiles of 4096 with a running max: rows whose leading
    // tiles are all -inf, and rows whose max rises tile after tile.
    for (int k = 0; k < 4; ++k) {
        Case c;
        c.V = 9000 + 7 * k;
        c.x.resize(size_t(c.V));
        c.y.resize(size_t(c.V));
        std::normal_distribution<float> nd(0.f, 2.f);
        for (int64_t v = 0; v < c.V; ++v) {
            c.x[v] = (k % 2 == 0 && v < 5000) ? -INFINITY : bf16_round(nd(rng) + (k >= 2 ? float(v) / 600.f : 0.f));
            c.y[v] = std::isinf(c.x[v]) ? (k == 0 ? -INFINITY : -40.f) : c.x[v] + 0.05f * nd(rng);
        }
        c.what = "tiled V " + std::to_string(c.V) + " kind " + std::to_string(k);
        out.push_back(std::move(c));
    }
    return out;
}

}  // namespace

TEST(KldFast, ExpIsWithinTwoUlpOfFp64) {
    using sluice::kld::fastk::exp32;
    EXPECT_EQ(exp32(0.f), 1.f);
    EXPECT_EQ(exp32(-INFINITY), 0.f);
    EXPECT_EQ(exp32(-100.f), 0.f);
    double worst = 0, at = 0;
    for (int i = 0; i <= 2000000; ++i) {
        const float t = -87.f * float(i) / 2000000.f;
        const double want = std::exp(double(t));
        const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
        const double e = std::fabs(double(exp32(t)) - want) / ulp;
        if (e > worst) { worst = e; at = t; }
    }
    std::printf("exp32 on [-87, 0]: max error %.3f ulp (at %.6g)\n", worst, at);
    EXPECT_LE(worst, 2.0);
}

TEST(KldFast, JsMixtureFunctionKeepsRelativeAccuracy) {
    using sluice::kld::fastk::g32;
    EXPECT_EQ(g32(0.f), 0.f);
    double worst = 0, at = 0;
    for (int i = 1; i <= 400000; ++i) {
        const float u = i < 200000 ? std::ldexp(float(i), -20) * 0.5f : 40.f * float(i - 200000) / 200000.f;
        if (u == 0) continue;
        const double want = -std::log1p(std::expm1(-double(u)) / 2);  // ln 2 - log1p(e^-u), no cancellation
        const double e = std::fabs(double(g32(u)) - want) / want;
        if (e > worst) { worst = e; at = u; }
    }
    std::printf("g(u) = ln2 - log1p(exp(-u)) in fp32: max relative error %.3g (at u = %.6g)\n", worst, at);
    EXPECT_LT(worst, 5e-7);
}

TEST(KldFast, ScalarAvx2Avx512AreBitIdentical) {
    const auto av = isas();
    std::printf("fast kernel forms on this CPU:");
    for (auto i : av) std::printf(" %s", fast_isa_name(i));
    std::printf(" (automatic: %s)\n", fast_isa_name(fast_isa()));
    if (av.size() < 2) GTEST_SKIP() << "only the scalar form runs on this CPU; nothing to compare";
    int n = 0;
    for (const Case& c : cases())
        for (bool js : {true, false}) {
            const RowMetrics base = score(c.x.data(), c.y.data(), c.V, int32_t(c.V / 3), Numerics::fast, av[0], js);
            for (size_t k = 1; k < av.size(); ++k) {
                const RowMetrics m = score(c.x.data(), c.y.data(), c.V, int32_t(c.V / 3), Numerics::fast, av[k], js);
                ASSERT_TRUE(same_bits(base, m)) << c.what << ": " << fast_isa_name(av[k]) << " vs " << fast_isa_name(av[0])
                                                << " KL " << m.kl << " vs " << base.kl << " JS " << m.js << " vs " << base.js;
            }
            ++n;
        }
    // Short rows: only the scalar tail, or one vector step plus a tail.
    for (int64_t V : {1, 2, 7, 15, 16, 17, 31, 33}) {
        std::vector<float> x(static_cast<size_t>(V)), y(static_cast<size_t>(V));
        for (int64_t v = 0; v < V; ++v) { x[v] = float(v % 5) - 2.f; y[v] = float((v * 3) % 7) * 0.5f; }
        const RowMetrics base = score(x.data(), y.data(), V, 0, Numerics::fast, av[0]);
        for (size_t k = 1; k < av.size(); ++k)
            ASSERT_TRUE(same_bits(base, score(x.data(), y.data(), V, 0, Numerics::fast, av[k]))) << "V " << V;
        ++n;
    }
    std::printf("%d row pairs bit-identical across %zu forms\n", n, av.size());
}

TEST(KldFast, WithinSection74LimitsOfFp64) {
    double max_kl = 0, max_kl_ratio = 0, max_js = 0, max_js_ratio = 0, max_nll = 0, sum_f = 0, sum_d = 0;
    std::string worst_case;
    int n = 0, inf_rows = 0;
    for (const Case& c : cases()) {
        const int32_t tok = int32_t((c.V * 7) / 11);
        const RowMetrics f = score(c.x.data(), c.y.data(), c.V, tok, Numerics::fast);
        const RowMetrics d = score(c.x.data(), c.y.data(), c.V, tok, Numerics::fp64);
        ASSERT_EQ(std::isinf(f.kl), std::isinf(d.kl)) << c.what;
        EXPECT_EQ(f.top1, d.top1) << c.what;
        EXPECT_EQ(f.top1_ref, d.top1_ref) << c.what;
        EXPECT_EQ(f.top1_tie_aware, d.top1_tie_aware) << c.what;
        EXPECT_EQ(f.ref_tied, d.ref_tied) << c.what;
        EXPECT_EQ(f.abs_err_max, d.abs_err_max) << c.what;
        EXPECT_NEAR(f.abs_err_mean, d.abs_err_mean, 1e-12 * (1 + d.abs_err_mean)) << c.what;
        if (std::isinf(d.kl)) {
            ++inf_rows;
        } else {
            const double e = std::fabs(f.kl - d.kl), lim = 2e-7 + 1e-5 * std::fabs(d.kl);
            max_kl = std::max(max_kl, e);
            if (e / lim > max_kl_ratio) { max_kl_ratio = e / lim; worst_case = c.what; }
            EXPECT_LE(e, lim) << c.what << ": fast KL " << f.kl << " fp64 " << d.kl;
            sum_f += f.kl;
            sum_d += d.kl;
            ++n;
        }
        const double ej = std::fabs(f.js - d.js), limj = 2e-7 + 1e-5 * std::fabs(d.js);
        max_js = std::max(max_js, ej);
        max_js_ratio = std::max(max_js_ratio, ej / limj);
        EXPECT_LE(ej, limj) << c.what << ": fast JS " << f.js << " fp64 " << d.js;
        max_nll = std::max({max_nll, std::fabs(f.nll_ref - d.nll_ref), std::fabs(f.nll_cand - d.nll_cand)});
    }
    const double mean_diff = std::fabs(sum_f - sum_d) / n;
    std::printf("fast vs fp64 over %d finite rows (+%d with KL = inf on both):\n"
                "  max |dKL| %.3g (worst |dKL|/(2e-7+1e-5|KL|) = %.3g, %s)\n"
                "  max |dJS| %.3g (worst ratio to the same limit %.3g)\n"
                "  max |dNLL| %.3g   |mean KL difference| %.3g (limit 1e-8)\n",
                n, inf_rows, max_kl, max_kl_ratio, worst_case.c_str(), max_js, max_js_ratio, max_nll, mean_diff);
    EXPECT_GT(inf_rows, 0);
    EXPECT_LE(mean_diff, 1e-8);
    EXPECT_LT(max_nll, 1e-6);
}

TEST(KldFast, IdenticalRowsGiveExactlyZero) {
    for (const Case& c : cases()) {
        for (FastIsa i : isas()) {
            const RowMetrics m = score(c.x.data(), c.x.data(), c.V, 3, Numerics::fast, i);
            ASSERT_EQ(m.kl, 0.0) << c.what << " " << fast_isa_name(i);
            ASSERT_EQ(m.js, 0.0) << c.what << " " << fast_isa_name(i);
            ASSERT_EQ(m.nll_ref, m.nll_cand);
        }
    }
}

TEST(KldFast, NonFiniteIsRefusedAtTheSameColumn) {
    std::vector<float> x(1000, 0.5f), y(1000, 0.25f);
    for (auto [col, val] : std::vector<std::pair<int, float>>{{0, NAN}, {517, INFINITY}, {999, NAN}}) {
        auto yy = y;
        yy[size_t(col)] = val;
        for (Numerics n : {Numerics::fast, Numerics::fp64}) {
            RowMetrics m;
            int64_t bad = -1;
            int side = -1;
            Status st = score_row(x.data(), yy.data(), 1000, 1, n, true, &m, &bad, &side);
            EXPECT_EQ(code_of(st), Code::nonfinite);
            EXPECT_EQ(bad, col);
            EXPECT_EQ(side, 1);
        }
    }
    std::vector<float> allneg(1000, -INFINITY);
    RowMetrics m;
    int64_t bad;
    int side;
    EXPECT_EQ(code_of(score_row(allneg.data(), y.data(), 1000, 1, Numerics::fast, true, &m, &bad, &side)), Code::nonfinite);
}

namespace {

constexpr int T = 64, VV = 1000;

struct Fx {
    std::string d;
    Suite s;
    std::vector<std::vector<float>> ref, cand;
};

Fx& fx() {
    static Fx f = [] {
        Fx f;
        f.d = tmpdir("fast");
        f.s = make_synth_suite(f.d, T, VV, {"prose", "code", "instruction"}, 2, 31);
        for (size_t w = 0; w < f.s.windows.size(); ++w) {
            f.ref.push_back(synth_ref(T - 1, VV, 500 + uint32_t(w)));
            f.cand.push_back(perturb(f.ref.back(), 0.05f + 0.2f * float(w), 600 + uint32_t(w)));
        }
        write_ref(f.s, f.ref, VV, f.d + "/ref");
        write_ref(f.s, f.cand, VV, f.d + "/cand");
        return f;
    }();
    return f;
}

CompareResult compare(Precision p, int threads) {
    auto& f = fx();
    std::unique_ptr<Operand> r, c;
    EXPECT_TRUE(open_v0_dir(f.d + "/ref", true, &r).is_ok());
    EXPECT_TRUE(open_v0_dir(f.d + "/cand", true, &c).is_ok());
    CompareOptions o;
    o.precision = p;
    o.threads = threads;
    o.llamacpp_block = true;
    CompareResult res;
    Status st = run_compare(f.s, *r, *c, o, &res);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return res;
}

}  // namespace

TEST(KldFast, ReceiptsBitIdenticalForAnyThreadCountAndIsa) {
    for (Precision p : {Precision::fast, Precision::fp64}) {
        std::string base;
        for (int th : {1, 2, 3, 7}) {
            CompareResult res = compare(p, th);
            json r = strip_timing(res.receipt);
            r["sluice"].erase("kernel");
            const std::string txt = dump_py(r);
            if (base.empty()) base = txt;
            EXPECT_EQ(txt, base) << "threads " << th;
            std::printf("%s threads %d: receipt sha256 %s\n", p == Precision::fast ? "fast" : "fp64", th, sha256_hex(txt).c_str());
        }
        if (p != Precision::fast) continue;
        const FastIsa keep = fast_isa();
        for (FastIsa i : isas()) {  // the ISA changes nothing either
            ASSERT_TRUE(set_fast_isa(i).is_ok());
            CompareResult res = compare(p, 2);
            json r = strip_timing(res.receipt);
            EXPECT_EQ(r["sluice"]["kernel"].get<std::string>(), fast_isa_name(i));
            r["sluice"].erase("kernel");
            EXPECT_EQ(dump_py(r), base) << fast_isa_name(i);
        }
        ASSERT_TRUE(set_fast_isa(keep).is_ok());
    }
}

TEST(KldFast, GlobalMeanWithinLimitOfFp64) {
    CompareResult f = compare(Precision::fast, 2), d = compare(Precision::fp64, 2);
    const double mf = f.receipt["kl_reference_to_candidate"]["mean"].get<double>();
    const double md = d.receipt["kl_reference_to_candidate"]["mean"].get<double>();
    double worst = 0;
    for (size_t w = 0; w < f.windows.size(); ++w)
        for (size_t r = 0; r < f.windows[w].kl.size(); ++r) {
            const double a = f.windows[w].kl[r], b = d.windows[w].kl[r];
            worst = std::max(worst, std::fabs(a - b) / (2e-7 + 1e-5 * std::fabs(b)));
        }
    std::printf("suite: mean KL fast %.12g fp64 %.12g |diff| %.3g; worst per-token ratio to the limit %.3g\n", mf, md,
                std::fabs(mf - md), worst);
    EXPECT_LE(std::fabs(mf - md), 1e-8);
    EXPECT_LE(worst, 1.0);
    EXPECT_EQ(f.receipt["sluice"]["precision"], "fast");
    EXPECT_EQ(d.receipt["sluice"]["precision"], "fp64");
    EXPECT_EQ(f.receipt["top1_agreement"], d.receipt["top1_agreement"]);
}

TEST(KldFast, CliPrecisionFlag) {
    auto& f = fx();
    std::string out, er;
    const std::vector<std::string> base = {"compare", "--suite", f.d + "/suite", "--reference", f.d + "/ref", "--candidate", f.d + "/cand"};
    auto w = base;
    w.insert(w.end(), {"--json", f.d + "/fast.json"});
    ASSERT_EQ(kld(w, &out, &er), 0) << er;
    EXPECT_EQ(json::parse(read_text(f.d + "/fast.json"))["sluice"]["precision"], "fast");  // the default
    w = base;
    w.insert(w.end(), {"--precision", "fp64", "--json", f.d + "/fp64.json"});
    ASSERT_EQ(kld(w, &out, &er), 0) << er;
    EXPECT_EQ(json::parse(read_text(f.d + "/fp64.json"))["sluice"]["precision"], "fp64");
    w = base;
    w.insert(w.end(), {"--precision", "fp16"});
    EXPECT_EQ(kld(w, &out, &er), 2);
    EXPECT_NE(er.find("--precision"), std::string::npos) << er;
}

TEST(KldFast, ReceiptsIdenticalAcrossIoModesAndChunkSizes) {
    // §7.8: I/O mode, read size and read-ahead change nothing in the receipt.
    auto& f = fx();
    std::string base;
    const std::vector<std::vector<std::string>> modes = {
        {}, {"--io", "buffered"}, {"--read-chunk", "4096"}, {"--read-chunk", "70000", "--io", "buffered"},
        {"--read-chunk", "67108864", "--threads", "3"}, {"--verify-hashes", "off", "--io", "buffered"},
        {"--verify-hashes", "off", "--read-chunk", "8192"}};
    for (const auto& m : modes) {
        std::vector<std::string> w = {"compare", "--suite", f.d + "/suite", "--reference", f.d + "/ref", "--candidate", f.d + "/cand",
                                      "--json", f.d + "/io.json"};
        w.insert(w.end(), m.begin(), m.end());
        std::string out, er;
        ASSERT_EQ(kld(w, &out, &er), 0) << er;
        json r = strip_timing(json::parse(read_text(f.d + "/io.json")));
        if (m.size() >= 2 && m[1] == "off") {  // the receipt records what was not verified
            EXPECT_EQ(r["sluice"]["integrity"], "not checked (--verify-hashes off)");
            r["sluice"]["integrity"] = "verified";
        }
        const std::string txt = dump_py(r);
        if (base.empty()) base = txt;
        std::string label;
        for (auto& s : m) label += s + " ";
        EXPECT_EQ(txt, base) << label;
        std::printf("%-45s receipt sha256 %s\n", label.empty() ? "(defaults)" : label.c_str(), sha256_hex(txt).c_str());
    }
}

TEST(KldFast, NumpyComparatorToolAgreesOnTheSuite) {
    // tools/kld_ref.py (the bench's numpy baseline) on whole v0 directories:
    // fp64 to 1e-12, fast within the 7.4 mean limit.
    if (!have_numpy()) GTEST_SKIP() << "no /usr/bin/python3 with numpy (install python3-numpy)";
    auto& f = fx();
    const std::string out = f.d + "/kld_ref.json";
    const std::string cmd = std::string("/usr/bin/python3 ") + KLD_REF_PY + " --suite " + f.d + "/suite --reference " + f.d +
                            "/ref --candidate " + f.d + "/cand --json " + out + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const json n = json::parse(read_text(out));
    CompareResult d = compare(Precision::fp64, 2), q = compare(Precision::fast, 2);
    const json& sd = d.receipt["sluice"];
    const double kd = d.receipt["kl_reference_to_candidate"]["mean"].get<double>();
    const double kn = n["kl_mean"].get<double>();
    std::printf("kld_ref.py mean KL %.15g, sluice fp64 %.15g (|diff| %.3g), fast %.15g; JS %.12g vs %.12g\n", kn, kd,
                std::fabs(kn - kd), q.receipt["kl_reference_to_candidate"]["mean"].get<double>(), n["js_mean"].get<double>(),
                d.receipt["js"]["mean"].get<double>());
    EXPECT_NEAR(kd, kn, 1e-12);
    EXPECT_NEAR(d.receipt["js"]["mean"].get<double>(), n["js_mean"].get<double>(), 1e-12);
    EXPECT_NEAR(q.receipt["kl_reference_to_candidate"]["mean"].get<double>(), kn, 1e-8);
    EXPECT_EQ(d.receipt["top1_agreement"].get<double>(), n["top1"].get<double>());
    EXPECT_NEAR(sd["nll_ref_mean"].get<double>(), n["nll_ref_mean"].get<double>(), 1e-10);
    EXPECT_NEAR(sd["nll_cand_mean"].get<double>(), n["nll_cand_mean"].get<double>(), 1e-10);
    EXPECT_EQ(n["positions"].get<int64_t>(), d.receipt["positions"].get<int64_t>());
}
