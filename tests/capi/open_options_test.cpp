// The open options of issue 17 through the C API, on models/sluice-mini:
// cpus (placement: bit-identical logits), route dump (changes nothing, and
// a failed eval writes nothing), metadata_only, exclusive_open, lock_memory
// against RLIMIT_MEMLOCK, progress, and an older caller's smaller struct.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sluice/sluice.h"

namespace fs = std::filesystem;

namespace {

const std::string kModel = SLUICE_MINI_DIR;

struct Ctx {
    sluice_ctx *c = nullptr;
    sluice_status st = SLUICE_E_ARG;
    explicit Ctx(const sluice_config &cfg, const std::string &path = kModel) { st = sluice_open(path.c_str(), &cfg, &c); }
    ~Ctx() { sluice_close(c); }
    std::string err() const { return sluice_last_error(c); }
};

sluice_config base() {
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.n_threads = 2;
    return cfg;
}

const std::vector<int32_t> kPrompt = {4096, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1100};

std::vector<float> all_logits(sluice_ctx *c) {
    std::vector<float> v((size_t)sluice_n_vocab(c) * kPrompt.size());
    EXPECT_EQ(sluice_eval_all(c, kPrompt.data(), kPrompt.size(), v.data()), SLUICE_OK) << sluice_last_error(c);
    return v;
}

double max_diff(const std::vector<float> &a, const std::vector<float> &b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); i++) m = std::max(m, (double)std::fabs(a[i] - b[i]));
    return m;
}

std::string copy_model(const std::string &name) {
    const fs::path d = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::copy(kModel, d, fs::copy_options::recursive);
    return d.string();
}

bool have_model() { return fs::exists(kModel + "/manifest.json"); }

}  // namespace

#define NEED_MODEL() \
    if (!have_model()) GTEST_SKIP() << kModel << " is missing"

TEST(OpenOptions, CpusPinningGivesBitIdenticalLogits) {
    NEED_MODEL();
    Ctx ref(base());
    ASSERT_EQ(ref.st, SLUICE_OK) << ref.err();
    const std::vector<float> want = all_logits(ref.c);
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    std::vector<std::string> lists = {"0"};
    if (CPU_ISSET(0, &set) && CPU_ISSET(1, &set)) lists.push_back("0-1");
    for (const std::string &l : lists)
        for (int threads : {0, 2, 3}) {
            sluice_config cfg = base();
            cfg.cpus = l.c_str();
            cfg.n_threads = threads;
            Ctx c(cfg);
            ASSERT_EQ(c.st, SLUICE_OK) << c.err();
            sluice_info in;
            ASSERT_EQ(sluice_info_get(c.c, &in), SLUICE_OK);
            if (threads == 0) {
                EXPECT_EQ(in.n_threads, l == "0" ? 1 : 2) << "one thread per CPU listed";
            }
            const std::vector<float> got = all_logits(c.c);
            std::printf("cpus %s threads %d: max|diff| %g over %zu logits\n", l.c_str(), in.n_threads,
                        max_diff(want, got), got.size());
            EXPECT_EQ(got, want) << "cpus " << l << " threads " << threads;
        }
}

TEST(OpenOptions, BadCpuListsAreRefusedWithTheReason) {
    NEED_MODEL();
    for (const char *l : {"x", "3-1", "1,,2", "5000", "0-"}) {
        sluice_config cfg = base();
        cfg.cpus = l;
        Ctx c(cfg);
        EXPECT_EQ(c.st, SLUICE_E_ARG) << l;
        EXPECT_NE(c.err().find("cpus"), std::string::npos) << c.err();
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    if (!CPU_ISSET(1023, &set)) {
        sluice_config cfg = base();
        cfg.cpus = "1023";
        Ctx c(cfg);
        EXPECT_EQ(c.st, SLUICE_E_ARG);
        EXPECT_NE(c.err().find("not available"), std::string::npos) << c.err();
    }
}

TEST(OpenOptions, RouteDumpChangesNothingAndSkipsFailedEvals) {
    NEED_MODEL();
    Ctx ref(base());
    ASSERT_EQ(ref.st, SLUICE_OK);
    const std::vector<float> want = all_logits(ref.c);
    Ctx c(base());
    ASSERT_EQ(c.st, SLUICE_OK);
    const std::string path = (fs::temp_directory_path() / ("routes-" + std::to_string(::getpid()) + ".jsonl")).string();
    ASSERT_EQ(sluice_route_dump(c.c, path.c_str()), SLUICE_OK) << c.err();
    EXPECT_EQ(all_logits(c.c), want);
    const int32_t bad = 1 << 30;
    EXPECT_EQ(sluice_eval(c.c, &bad, 1, nullptr), SLUICE_E_RANGE);
    ASSERT_EQ(sluice_route_dump(c.c, nullptr), SLUICE_OK);
    std::ifstream f(path);
    std::string line;
    int n = 0;
    while (std::getline(f, line)) {
        EXPECT_EQ(line.rfind("{\"tok\": " + std::to_string(n) + ", \"layers\": [[", 0), 0u) << line;
        n++;
    }
    EXPECT_EQ(n, (int)kPrompt.size()) << "one line per evaluated position; the failed eval wrote none";
    fs::remove(path);
    EXPECT_EQ(sluice_route_dump(c.c, "/nonexistent-dir/r.jsonl"), SLUICE_E_IO);
    EXPECT_NE(c.err().find("/nonexistent-dir/r.jsonl"), std::string::npos);
    // A FIFO is refused, not opened (which would block until a reader came).
    const std::string fifo = path + ".fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_EQ(sluice_route_dump(c.c, fifo.c_str()), SLUICE_E_IO);
    EXPECT_NE(c.err().find("not a regular file"), std::string::npos) << c.err();
    fs::remove(fifo);
}

TEST(OpenOptions, MetadataOnlyReadsNoTrunk) {
    NEED_MODEL();
    const std::string d = copy_model("sluice-meta");
    std::ofstream(d + "/trunk.bin", std::ios::trunc).close();  // any trunk read would fail
    sluice_config cfg = base();
    cfg.metadata_only = 1;
    {
        Ctx c(cfg, d);
        ASSERT_EQ(c.st, SLUICE_OK) << c.err();
        sluice_info in;
        ASSERT_EQ(sluice_info_get(c.c, &in), SLUICE_OK);
        EXPECT_STREQ(in.family, "kimi-linear");
        int32_t ids[64];
        size_t n = 0;
        EXPECT_EQ(sluice_tokenize(c.c, "God", 3, ids, 64, &n), SLUICE_OK) << c.err();
        EXPECT_GT(n, 0u);
        EXPECT_EQ(sluice_eval(c.c, kPrompt.data(), 1, nullptr), SLUICE_E_STATE);
        EXPECT_NE(c.err().find("metadata-only"), std::string::npos) << c.err();
        sluice_stats s;
        EXPECT_EQ(sluice_stats_get(c.c, &s), SLUICE_E_STATE);
    }
    Ctx full(base(), d);
    EXPECT_NE(full.st, SLUICE_OK) << "a full open of the same container reads the (empty) trunk and fails";
    fs::remove_all(d);
}

TEST(OpenOptions, ExclusiveOpenRefusesASecondOpen) {
    NEED_MODEL();
    const std::string d = copy_model("sluice-excl");
    sluice_config ex = base();
    ex.metadata_only = 1;
    ex.exclusive_open = 1;
    sluice_config plain = base();
    plain.metadata_only = 1;
    {
        Ctx a(ex, d);
        ASSERT_EQ(a.st, SLUICE_OK) << a.err();
        Ctx b(plain, d);
        EXPECT_EQ(b.st, SLUICE_E_BUSY);
        EXPECT_NE(b.err().find("exclusive"), std::string::npos) << b.err();
        EXPECT_STREQ(sluice_status_name(SLUICE_E_BUSY), "busy");
    }
    {
        Ctx a(plain, d);
        ASSERT_EQ(a.st, SLUICE_OK);
        Ctx b(ex, d);
        EXPECT_EQ(b.st, SLUICE_E_BUSY) << "exclusive while another context has it open";
        std::printf("exclusive open while shared: %s\n", b.err().c_str());
    }
    Ctx again(ex, d);
    EXPECT_EQ(again.st, SLUICE_OK) << "released when the contexts closed";
    fs::remove_all(d);
}

TEST(OpenOptions, LockMemoryNamesTheLimit) {
    NEED_MODEL();
    struct rlimit old;
    ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &old), 0);
    struct rlimit zero = old;
    zero.rlim_cur = 0;  // the soft limit only: restored below
    ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &zero), 0);
    sluice_config cfg = base();
    cfg.lock_memory = 1;
    {
        Ctx c(cfg);
        EXPECT_EQ(c.st, SLUICE_E_NOMEM);
        EXPECT_NE(c.err().find("RLIMIT_MEMLOCK"), std::string::npos) << c.err();
        std::printf("lock_memory under a zero limit: %s\n", c.err().c_str());
    }
    ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &old), 0);
}

namespace {
void record(void *user, const char *stage, double) { static_cast<std::vector<std::string> *>(user)->push_back(stage); }
}  // namespace

TEST(OpenOptions, ProgressNamesTheStages) {
    NEED_MODEL();
    std::vector<std::string> stages;
    sluice_config cfg = base();
    cfg.progress = record;
    cfg.progress_user = &stages;
    Ctx c(cfg);
    ASSERT_EQ(c.st, SLUICE_OK);
    ASSERT_GE(stages.size(), 3u);
    EXPECT_EQ(stages.front(), "manifest");
    EXPECT_NE(std::find(stages.begin(), stages.end(), "trunk"), stages.end());
    EXPECT_EQ(stages.back(), "ready");
}

TEST(OpenOptions, AnOlderCallersStructTakesTheDefaults) {
    NEED_MODEL();
    sluice_config cfg = base();
    cfg.cpus = "not a list";  // beyond the old size: must be ignored
    cfg.metadata_only = 1;
    cfg.struct_size = offsetof(sluice_config, cpus);
    Ctx c(cfg);
    ASSERT_EQ(c.st, SLUICE_OK) << c.err();
    EXPECT_EQ(all_logits(c.c).size(), (size_t)sluice_n_vocab(c.c) * kPrompt.size()) << "a full open";
}
