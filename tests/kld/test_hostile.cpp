// Hostile and mistaken input to `sluice kld` (issue 16): each is refused with
// its §7.9 exit code and a message naming what is wrong, never an abort or
// a silent run with defaults.
#include "kld_test_util.h"

#include <functional>

#include "kld/io/llamakld.h"

using namespace kt;

namespace {
constexpr int T = 40, V = 300;

struct HF {
    std::string d;
    Suite s;
};
HF& hf() {
    static HF f = [] {
        HF f;
        f.d = tmpdir("hostile");
        f.s = make_synth_suite(f.d, T, V, {"prose", "code"}, 2);
        std::vector<std::vector<float>> ref, cand;
        for (int w = 0; w < 4; ++w) {
            ref.push_back(synth_ref(T - 1, V, 90 + uint32_t(w)));
            cand.push_back(perturb(ref.back(), 0.25f, 95 + uint32_t(w)));
        }
        write_ref(f.s, ref, V, f.d + "/ref");
        write_ref(f.s, cand, V, f.d + "/cand");
        return f;
    }();
    return f;
}

int run(std::vector<std::string> w, std::string* er) {
    std::string out;
    er->clear();
    int rc = kld(std::move(w), &out, er);
    std::printf("  exit %d: %s", rc, er->c_str());
    return rc;
}
}  // namespace

TEST(KldHostile, UnknownFlagIsAUsageError) {
    auto& f = hf();
    std::string er;
    EXPECT_EQ(run({"compare", "--suite", f.d + "/suite", "--reference", f.d + "/ref", "--candidate", f.d + "/cand",
                   "--windoes", "0-1"},
                  &er),
              2);
    EXPECT_NE(er.find("--windoes"), std::string::npos);
    EXPECT_EQ(run({"suite", "verify", f.d + "/suite", "--vocabb", "5"}, &er), 2);
    EXPECT_NE(er.find("--vocabb"), std::string::npos);
    EXPECT_EQ(run({"paired", "--receipts", "a.json", "b.json", "--noise-diff", "abc"}, &er), 2);
}

TEST(KldHostile, SuiteMakeRefusesANonEmptyDirAndForceReplacesIt) {
    const std::string d = tmpdir("remake");
    fs::create_directories(d + "/src");
    std::vector<int32_t> ids(200);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i % 50);
    write_text(d + "/src/a.tok", compact_int_array(ids));
    std::string er;
    ASSERT_EQ(run({"suite", "make", "--out", d + "/s", "--context", "20", "--tokens-source", "a=" + d + "/src/a.tok:4"},
                  &er),
              0);
    const std::string m1 = read_text(d + "/s/suite-manifest.json");
    // Again with fewer windows: refused, the suite untouched.
    EXPECT_EQ(run({"suite", "make", "--out", d + "/s", "--context", "20", "--tokens-source", "a=" + d + "/src/a.tok:2"},
                  &er),
              2);
    EXPECT_NE(er.find("--force"), std::string::npos);
    EXPECT_EQ(read_text(d + "/s/suite-manifest.json"), m1);
    // --force: replaced as a whole, no stale window files left behind.
    EXPECT_EQ(run({"suite", "make", "--out", d + "/s", "--context", "20", "--tokens-source", "a=" + d + "/src/a.tok:2",
                   "--force"},
                  &er),
              0);
    int n = 0;
    for (auto& e : fs::directory_iterator(d + "/s/tokens")) n += e.is_regular_file();
    std::printf("  window files after --force: %d\n", n);
    EXPECT_EQ(n, 2);
    EXPECT_FALSE(fs::exists(d + "/s.partial"));
    EXPECT_EQ(run({"suite", "verify", d + "/s"}, &er), 0) << er;
}

TEST(KldHostile, SuiteVerifyCatchesEditedDerivedFields) {
    auto& f = hf();
    const json m0 = json::parse(read_text(f.d + "/suite/suite-manifest.json"));
    struct Edit {
        const char* what;
        std::function<void(json&)> fn;
    };
    const std::vector<Edit> edits = {
        {"format_version", [](json& m) { m["format_version"] = 2; }},
        {"total_scored_positions", [](json& m) { m["total_scored_positions"] = 7; }},
        {"scored_positions_per_window", [](json& m) { m["scored_positions_per_window"] = 3; }},
        {"domain_counts", [](json& m) { m["domain_counts"]["prose"] = 5; }},
        {"index", [](json& m) { m["windows"][1]["index"] = 9; }},
        {"source_token_start", [](json& m) { m["windows"][0]["source_token_start"] = 3; }},
        {"token_ids_first16", [](json& m) { m["windows"][0]["token_ids_first16"][0] = 12345; }},
        {"token_file", [](json& m) { m["windows"][0]["token_file"] = "../x.json"; }},
        {"domain", [](json& m) { m["windows"][0]["domain"] = true; }},
        {"kind", [](json& m) { m["kind"] = "something else"; }},
        {"window_starts", [](json& m) { m["datasets"][0]["window_starts"] = json::array({0}); }},
        {"context_length", [](json& m) { m["context_length"] = 1e12; }},
    };
    int caught = 0;
    for (const auto& e : edits) {
        const std::string d = f.d + "/edit-" + e.what;
        fs::remove_all(d);
        fs::copy(f.d + "/suite", d, fs::copy_options::recursive);
        json m = m0;
        e.fn(m);
        write_text(d + "/suite-manifest.json", dump_py(m, true));
        std::string er;
        const int rc = run({"suite", "verify", d}, &er);
        EXPECT_EQ(rc, 4) << e.what;
        caught += rc == 4;
    }
    std::printf("  suite verify: %d of %zu edited manifests refused\n", caught, edits.size());
}

TEST(KldHostile, WrongTypesInReceiptsAreFormatErrorsNotAborts) {
    auto& f = hf();
    std::string er;
    ASSERT_EQ(run({"compare", "--suite", f.d + "/suite", "--reference", f.d + "/ref", "--candidate", f.d + "/cand",
                   "--json", f.d + "/r.json", "--bootstrap-samples", "10"},
                  &er),
              0);
    const json r = json::parse(read_text(f.d + "/r.json"));
    // Change every number in the receipt to `true`, one key at a time, and
    // every object to null: each run must end in an exit code, not SIGABRT.
    int n = 0, bad = 0;
    for (auto& [k, v] : r.items()) {
        for (const json& repl : {json(true), json(nullptr), json(1e300), json("x")}) {
            json m = r;
            m[k] = repl;
            write_text(f.d + "/m.json", m.dump());
            const int rc = run({"report", "--receipts", f.d + "/m.json", "--out", f.d + "/m.html"}, &er);
            const int rc2 = run({"paired", "--receipts", f.d + "/m.json", f.d + "/r.json"}, &er);
            ++n;
            bad += !(rc == 0 || (rc >= 2 && rc <= 8)) || !(rc2 == 0 || (rc2 >= 2 && rc2 <= 8));
        }
    }
    std::printf("  %d mutated receipts through report and paired, %d bad exits\n", n, bad);
    EXPECT_EQ(bad, 0);
    // The operand manifest too (windows[i].domain = true).
    const std::string d = f.d + "/cand-bad";
    fs::remove_all(d);
    fs::copy(f.d + "/cand", d);
    json om = json::parse(read_text(d + "/manifest.json"));
    if (om.contains("windows") && om["windows"].is_array() && !om["windows"].empty()) om["windows"][0]["domain"] = true;
    write_text(d + "/manifest.json", dump_py(om));
    const int rc = run({"compare", "--suite", f.d + "/suite", "--reference", f.d + "/ref", "--candidate", d}, &er);
    EXPECT_TRUE(rc >= 2 && rc <= 8) << rc;
}

TEST(KldHostile, NonFiniteKldScaleExits6) {
    auto& f = hf();
    std::string er;
    ASSERT_EQ(run({"export-kld", "--suite", f.d + "/suite", "--reference", f.d + "/ref", "--out", f.d + "/b.kld"}, &er), 0);
    KldFile kf;
    ASSERT_TRUE(kld_open(f.d + "/b.kld", &kf).is_ok());
    std::string bytes = read_text(f.d + "/b.kld");
    for (float bad : {NAN, INFINITY}) {
        std::string b = bytes;
        std::memcpy(&b[kf.rows_offset], &bad, 4);  // scale of the first row
        write_text(f.d + "/nan.kld", b);
        EXPECT_EQ(run({"compare", "--reference", f.d + "/nan.kld", "--candidate", f.d + "/ref"}, &er), 6);
        EXPECT_NE(er.find("nan.kld"), std::string::npos);
        EXPECT_NE(er.find("scale"), std::string::npos);
    }
}
