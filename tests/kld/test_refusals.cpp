// §7.9 refusals: each with its distinct exit code and a message naming the
// file/window/field.
#include <algorithm>

#include "kld_test_util.h"

using namespace kt;

namespace {
constexpr int T = 40, V = 300;
struct RF {
    std::string d;
    Suite s;
    std::vector<std::vector<float>> ref;
};
RF& rf() {
    static RF f = [] {
        RF f;
        f.d = tmpdir("refuse");
        f.s = make_synth_suite(f.d, T, V, {"prose", "code"}, 2);
        for (int w = 0; w < 4; ++w) f.ref.push_back(synth_ref(T - 1, V, 70 + uint32_t(w)));
        write_ref(f.s, f.ref, V, f.d + "/ref");
        return f;
    }();
    return f;
}
int cmp(const std::string& cand, std::string* er, std::vector<std::string> extra = {}) {
    auto& f = rf();
    std::vector<std::string> w = {"compare", "--suite", f.d + "/suite", "--reference", f.d + "/ref", "--candidate", cand};
    w.insert(w.end(), extra.begin(), extra.end());
    std::string out;
    int rc = kld(w, &out, er);
    std::printf("  exit %d: %s", rc, er->c_str());
    return rc;
}
std::string copy_ref(const std::string& name) {
    auto& f = rf();
    const std::string d = f.d + "/" + name;
    fs::remove_all(d);
    fs::copy(f.d + "/ref", d);
    return d;
}
}  // namespace

TEST(KldRefusals, Usage) {
    std::string er;
    EXPECT_EQ(kld({}, nullptr, &er), 2);
    EXPECT_EQ(kld({"compare"}, nullptr, &er), 2);
    EXPECT_EQ(kld({"frobnicate"}, nullptr, &er), 2);
    EXPECT_EQ(cmp(rf().d + "/ref", &er, {"--compat", "festr2-v9"}), 2);
    EXPECT_EQ(kld({"compare", "--suite", "x", "--reference", "y", "--model", "m"}, nullptr, &er), 2);  // no engine hook
}

// Bad usage: exit 2, the reason on the first line, at most one hint line
// after it (never the whole usage before the error).
TEST(KldRefusals, UsageIsOneLine) {
    const std::vector<std::vector<std::string>> bad = {
        {},
        {"frobnicate"},
        {"suite"},
        {"suite", "make", "--context", "64"},
        {"compare", "--reference", "r", "--candidate", "c", "--windoes", "1"},
        {"compare", "--reference", "r", "--candidate", "c", "--seed", "x"},
        {"compare", "--reference", "r", "--candidate", "c", "--precision", "fp16"},
        {"compare", "--reference", "r", "--candidate", "c", "--progress", "--no-progress"},
        {"compare", "--reference", "r", "--candidate", "c", "--torch-lanes", "16"},
        {"capture", "--suite", "s", "--out", "o"},
        {"report", "--receipts", "a.json", "--out", "r.html", "stray"},
        {"report", "--receipts", "a.json", "--out", "r.html", "--bins-per-decade", "0"},
        {"paired", "--receipts", "a.json"},
        {"inspect"},
    };
    for (const auto& args : bad) {
        std::string out, er;
        const int rc = kld(args, &out, &er);
        std::string words;
        for (const auto& a : args) words += " " + a;
        EXPECT_EQ(rc, 2) << "kld" << words << ": " << er;
        EXPECT_EQ(er.rfind("sluice kld: error (usage): ", 0), 0u) << "kld" << words << ": " << er;
        EXPECT_LE(std::count(er.begin(), er.end(), '\n'), 2) << "kld" << words << ": " << er;
        EXPECT_TRUE(out.empty()) << "kld" << words << ": " << out;
    }
}

// --help on every subcommand: exit 0, the options with their defaults.
TEST(KldRefusals, HelpShowsDefaults) {
    const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
        {{"--help"}, {"suite", "capture", "compare", "paired", "noise", "export-kld", "report", "inspect"}},
        {{"help"}, {"compare", "report"}},
        {{"help", "compare"}, {"--bootstrap-samples", "10000"}},
        {{"suite", "make", "--help"}, {"NAME=FILE:W", "windows of --context T tokens", "2048", "--force"}},
        {{"suite", "verify", "--help"}, {"--expect-suite-hash", "--vocab"}},
        {{"compare", "--help"}, {"--bootstrap-samples", "10000", "--max-ram", "1073741824", "--json", "--progress"}},
        {{"capture", "--help"}, {"--align", "--chunk", "256"}},
        {{"paired", "--help"}, {"--receipts", "--noise-diff"}},
        {{"noise", "--help"}, {"--runs"}},
        {{"export-kld", "--help"}, {"--out"}},
        {{"report", "--help"}, {"--hist-min", "--bins-per-decade", "4"}},
    };
    for (const auto& [args, want] : cases) {
        std::string out, er;
        const int rc = kld(args, &out, &er);
        std::string words;
        for (const auto& a : args) words += " " + a;
        EXPECT_EQ(rc, 0) << "kld" << words << ": " << er;
        for (const auto& w : want) EXPECT_NE(out.find(w), std::string::npos) << "kld" << words << " lacks " << w << ":\n" << out;
    }
}

// suite make numbers windows in command-line order across --source and
// --tokens-source (CLI11 keeps each option's values apart).
TEST(KldRefusals, SuiteMakeKeepsSourceOrder) {
    const std::string d = tmpdir("source-order");
    std::string a, b;
    for (int i = 0; i < 200; ++i) a += std::to_string(i % 50) + (i + 1 < 200 ? "," : "");
    for (int i = 0; i < 200; ++i) b += std::to_string(50 + i % 50) + (i + 1 < 200 ? "," : "");
    write_text(d + "/a.json", "[" + a + "]");
    write_text(d + "/b.json", "[" + b + "]");
    std::string out, er;
    ASSERT_EQ(kld({"suite", "make", "--out", d + "/s", "--context", "16", "--tokens-source", "bee=" + d + "/b.json:2",
                   "--tokens-source", "ay=" + d + "/a.json:1"},
                  &out, &er),
              0)
        << er;
    Suite s;
    ASSERT_TRUE(load_suite(d + "/s", {}, &s).is_ok());
    ASSERT_EQ(s.windows.size(), 3u);
    EXPECT_EQ(s.windows[0].domain, "bee");
    EXPECT_EQ(s.windows[2].domain, "ay");
}

TEST(KldRefusals, SuiteHashMismatch) {
    auto& f = rf();
    const std::string d = copy_ref("suitehash");
    json m = json::parse(read_text(d + "/manifest.json"));
    m["suite_token_hash_sha256"] = std::string(64, 'f');
    write_text(d + "/manifest.json", dump_py(m));
    std::string er;
    EXPECT_EQ(cmp(d, &er), 3);
    EXPECT_NE(er.find("suite_token_hash_sha256"), std::string::npos);
    (void)f;
}

TEST(KldRefusals, TokenHashMismatch) {
    const std::string d = copy_ref("tokhash");
    json m = json::parse(read_text(d + "/manifest.json"));
    m["windows"][2]["token_ids_json_sha256"] = std::string(64, 'e');
    write_text(d + "/manifest.json", dump_py(m));
    std::string er;
    EXPECT_EQ(cmp(d, &er), 3);
    EXPECT_NE(er.find("window 2"), std::string::npos);
}

TEST(KldRefusals, MissingWindowAndMissingFile) {
    std::string er;
    std::string d = copy_ref("missingwin");
    json m = json::parse(read_text(d + "/manifest.json"));
    m["windows"].erase(1);
    write_text(d + "/manifest.json", dump_py(m));
    EXPECT_EQ(cmp(d, &er), 3);
    d = copy_ref("missingfile");
    fs::remove(d + "/logits_003.safetensors");
    EXPECT_EQ(cmp(d, &er), 5);
    EXPECT_NE(er.find("logits_003"), std::string::npos);
}

TEST(KldRefusals, VocabAndShapeMismatch) {
    auto& f = rf();
    std::string er;
    // Vocabulary: a candidate captured at V+2.
    std::vector<std::vector<float>> wide;
    for (int w = 0; w < 4; ++w) wide.push_back(synth_ref(T - 1, V + 2, 1));
    write_ref(f.s, wide, V + 2, f.d + "/wide");
    EXPECT_EQ(cmp(f.d + "/wide", &er), 3);
    EXPECT_NE(er.find("vocab"), std::string::npos);
    // Shape: manifest claims V but the file holds fewer rows.
    const std::string d = copy_ref("shape");
    std::vector<float> small(size_t(T - 2) * V, 0.f);
    std::string sha;
    uint64_t size;
    ASSERT_TRUE(write_safetensors(d + "/logits_001.safetensors", {}, {{"logits", "F32", {uint64_t(T - 2), uint64_t(V)}, small.data()}}, 8, &sha, &size).is_ok());
    EXPECT_EQ(cmp(d, &er, {"--verify-hashes", "off"}), 3);
    EXPECT_NE(er.find("shape"), std::string::npos);
}

TEST(KldRefusals, ContentHashMismatchMarksReceipt) {
    const std::string d = copy_ref("content");
    {
        std::fstream c(d + "/logits_002.safetensors", std::ios::in | std::ios::out | std::ios::binary);
        c.seekp(-8, std::ios::end);
        const float z[2] = {0.5f, 0.25f};
        c.write(reinterpret_cast<const char*>(z), 8);
    }
    std::string er;
    const std::string j = rf().d + "/content.json";
    EXPECT_EQ(cmp(d, &er, {"--json", j}), 3);
    EXPECT_NE(er.find("sha256"), std::string::npos);
    EXPECT_EQ(json::parse(read_text(j))["sluice"]["integrity"], "failed");
}

TEST(KldRefusals, NanAndPlusInfRefused) {
    auto& f = rf();
    std::string er;
    for (float bad : {NAN, INFINITY}) {
        auto c = f.ref;
        c[3][size_t(5) * V + 17] = bad;
        const std::string d = f.d + (std::isnan(bad) ? "/nan" : "/pinf");
        fs::remove_all(d);
        // Written directly: capture itself refuses non-finite engine output.
        write_ref(f.s, f.ref, V, d);
        std::string sha;
        uint64_t size;
        std::map<std::string, std::string> meta = {{"token_ids_json_sha256", f.s.windows[3].token_hash}};
        ASSERT_TRUE(write_safetensors(d + "/logits_003.safetensors", meta, {{"logits", "F32", {uint64_t(T - 1), uint64_t(V)}, c[3].data()}}, 8, &sha, &size).is_ok());
        json m = json::parse(read_text(d + "/manifest.json"));
        m["windows"][3]["sha256"] = sha;
        write_text(d + "/manifest.json", dump_py(m));
        EXPECT_EQ(cmp(d, &er), 6);
        EXPECT_NE(er.find("window 3 row 5 column 17"), std::string::npos);
        // And as the reference side.
        std::string out;
        EXPECT_EQ(kld({"compare", "--suite", f.d + "/suite", "--reference", d, "--candidate", f.d + "/ref"}, &out, &er), 6);
        EXPECT_NE(er.find("reference"), std::string::npos);
    }
}

TEST(KldRefusals, FormatErrors) {
    std::string er;
    std::string d = copy_ref("badst");
    write_text(d + "/logits_000.safetensors", "garbage!!");
    EXPECT_EQ(cmp(d, &er, {"--verify-hashes", "off"}), 4);
    d = copy_ref("badjson");
    write_text(d + "/manifest.json", "{not json");
    EXPECT_EQ(cmp(d, &er), 4);
    d = copy_ref("extra");
    std::vector<float> a(size_t(T - 1) * V, 0.f), b(4, 0.f);
    std::string sha;
    uint64_t size;
    ASSERT_TRUE(write_safetensors(d + "/logits_000.safetensors", {}, {{"logits", "F32", {uint64_t(T - 1), uint64_t(V)}, a.data()}, {"other", "F32", {4}, b.data()}}, 8, &sha, &size).is_ok());
    EXPECT_EQ(cmp(d, &er, {"--verify-hashes", "off"}), 4);
    EXPECT_NE(er.find("other than"), std::string::npos);
}

TEST(KldRefusals, ResourcePlanOverCap) {
    std::string er;
    EXPECT_EQ(cmp(rf().d + "/ref", &er, {"--max-ram", "1000"}), 7);
}

TEST(KldRefusals, SuiteManifestMissingKey) {
    auto& f = rf();
    const std::string d = f.d + "/badsuite";
    fs::remove_all(d);
    fs::copy(f.d + "/suite", d, fs::copy_options::recursive);
    json m = json::parse(read_text(d + "/suite-manifest.json"));
    m.erase("windows");
    write_text(d + "/suite-manifest.json", dump_py(m));
    std::string er;
    EXPECT_EQ(kld({"suite", "verify", d}, nullptr, &er), 4);
    EXPECT_NE(er.find("'windows'"), std::string::npos);
}
