// Reproducibility: the same bytes for any --jobs, and after a kill + rerun.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include "test_util.h"

using namespace sluice::convert;
using ctest::TempDir;

namespace {

// Every file of a directory, by name.
std::map<std::string, std::string> snapshot(const std::string& dir) {
    std::map<std::string, std::string> m;
    for (const auto& de : ctest::fs::directory_iterator(dir)) m[de.path().filename().string()] = ctest::slurp(de.path());
    return m;
}

// Compares two snapshots, printing the byte counts.
void expect_same(const std::map<std::string, std::string>& a, const std::map<std::string, std::string>& b,
                 const std::string& what) {
    int64_t bytes = 0, bad = 0;
    for (const auto& [n, x] : a) {
        auto it = b.find(n);
        if (it == b.end()) {
            ADD_FAILURE() << what << ": " << n << " missing";
            continue;
        }
        const std::string& y = it->second;
        bad += static_cast<int64_t>(std::max(x.size(), y.size()) - std::min(x.size(), y.size()));
        for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) bad += x[i] != y[i];
        bytes += static_cast<int64_t>(x.size());
        EXPECT_EQ(x, y) << what << ": " << n << " differs";
    }
    EXPECT_EQ(a.size(), b.size()) << what << ": file lists differ";
    std::printf("%s: %zu files, %lld bytes compared, %lld mismatching bytes\n", what.c_str(), a.size(),
                static_cast<long long>(bytes), static_cast<long long>(bad));
}

ConvertOptions fast(const std::string& out, int jobs) {
    auto o = ctest::recipe("default");
    o.output_dir = out;
    o.jobs = jobs;
    o.kmeans_iters = 6;  // enough to exercise every code path; quality is tested elsewhere
    return o;
}

// Kills the process (SIGKILL, no cleanup) at the n-th progress event of `phase`.
class KillSink : public ctest::QuietSink {
public:
    KillSink(std::string phase, std::string detail, int64_t at) : phase_(phase), detail_(detail), at_(at) {}
    void progress(const std::string& phase, int64_t done, int64_t, const std::string& detail) override {
        if (phase == phase_ && (detail_.empty() || detail == detail_) && done >= at_) ::raise(SIGKILL);
    }

private:
    std::string phase_, detail_;
    int64_t at_;
};

// Runs a conversion in a child process that gets killed at the given point.
void convert_and_kill(const ConvertOptions& o, const std::string& phase, const std::string& detail, int64_t at) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        KillSink sink(phase, detail, at);
        std::string err;
        run_convert(o, &err, &sink);
        ::_exit(0);  // the kill point was never reached
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child was not killed at " << phase;
}

}  // namespace

TEST(ConvertReproducible, SameBytesForAnyJobs) {
    if (!ctest::have_fixtures()) GTEST_SKIP() << "fixtures not found at " << ctest::fixtures();
    TempDir d;
    std::string err;
    ctest::QuietSink sink;
    ASSERT_EQ(run_convert(fast(d.sub("j1"), 1), &err, &sink), 0) << err;
    ASSERT_EQ(run_convert(fast(d.sub("j4"), 4), &err, &sink), 0) << err;
    ASSERT_EQ(run_convert(fast(d.sub("j3"), 3), &err, &sink), 0) << err;
    const auto a = snapshot(d.sub("j1"));
    expect_same(a, snapshot(d.sub("j4")), "--jobs 1 vs --jobs 4");
    expect_same(a, snapshot(d.sub("j3")), "--jobs 1 vs --jobs 3");
    EXPECT_EQ(a.count(".sluice-convert"), 0u);  // state file removed at commit
    EXPECT_EQ(a.count("codebooks-L1.bin"), 0u);
}

TEST(ConvertReproducible, KillAndResumeGivesSameBytes) {
    if (!ctest::have_fixtures()) GTEST_SKIP() << "fixtures not found at " << ctest::fixtures();
    TempDir d;
    std::string err;
    ctest::QuietSink ref_sink;
    ASSERT_EQ(run_convert(fast(d.sub("ref"), 2), &err, &ref_sink), 0) << err;
    const auto ref = snapshot(d.sub("ref"));

    struct Point { const char* phase; const char* detail; int64_t at; const char* what; };
    const Point points[] = {
        {"layer", "layer 2 experts", 5, "killed inside layer 2 (layer 1 finished)"},
        {"layer", "layer 1 experts", 1, "killed inside the first layer"},
        {"trunk", "", 1, "killed while writing the trunk"},
    };
    for (const Point& p : points) {
        const std::string out = d.sub(std::string("k") + std::to_string(&p - points));
        convert_and_kill(fast(out, 2), p.phase, p.detail, p.at);
        EXPECT_FALSE(ctest::fs::exists(out + "/manifest.json")) << p.what << ": a killed run must not look complete";
        size_t partial = 0;
        for (const auto& de : ctest::fs::directory_iterator(out)) partial += de.path().extension() == ".tmp";
        std::printf("%s: %zu .tmp files left behind\n", p.what, partial);
        ctest::QuietSink sink;
        ASSERT_EQ(run_convert(fast(out, 3), &err, &sink), 0) << p.what << ": " << err;  // other --jobs on purpose
        std::printf("%s: rerun said:\n%s", p.what, sink.lines.c_str());
        auto got = snapshot(out);
        for (auto it = got.begin(); it != got.end();) it = it->first.size() > 4 && it->first.ends_with(".tmp") ? got.erase(it) : ++it;
        expect_same(ref, got, std::string("resume after ") + p.what);
        if (std::string(p.detail) == "layer 2 experts") {
            EXPECT_NE(sink.lines.find("layer 1: already converted"), std::string::npos);
        }
    }
}

TEST(ConvertReproducible, RerunAndForce) {
    if (!ctest::have_fixtures()) GTEST_SKIP() << "fixtures not found at " << ctest::fixtures();
    TempDir d;
    std::string err;
    ctest::QuietSink sink;
    auto o = fast(d.sub("o"), 2);
    ASSERT_EQ(run_convert(o, &err, &sink), 0) << err;
    const auto first = snapshot(o.output_dir);
    ASSERT_EQ(run_convert(o, &err, &sink), 0) << err;  // complete: no-op
    EXPECT_NE(sink.lines.find("already complete"), std::string::npos);
    expect_same(first, snapshot(o.output_dir), "rerun of a finished conversion");
    auto o2 = o;
    o2.trunk_bits = 3;
    EXPECT_NE(run_convert(o2, &err, &sink), 0);  // other settings: refused without --force
    std::printf("other settings without --force -> %s\n", err.c_str());
    EXPECT_NE(err.find("--force"), std::string::npos);
    o2.force = true;
    ASSERT_EQ(run_convert(o2, &err, &sink), 0) << err;
    EXPECT_NE(ctest::slurp(o.output_dir + "/trunk.bin"), first.at("trunk.bin"));
    // Bad options are refused before anything is touched.
    auto bad = o;
    bad.index_bits = 6;
    EXPECT_EQ(run_convert(bad, &err, &sink), 1);
    std::printf("--index-bits 6 with 3 stages -> %s\n", err.c_str());
}

// CI's kill -9 run hit this: a kill between the state file's temporary and
// its rename left only ".sluice-convert.tmp", and the rerun refused the
// directory as "not empty". That temporary is the converter's own; a stranger's
// file beside it still makes the directory refused.
TEST(ConvertReproducible, KillBeforeTheStateFileIsNamed) {
    if (!ctest::have_fixtures()) GTEST_SKIP() << "fixtures not found at " << ctest::fixtures();
    TempDir d;
    std::string err;
    ctest::QuietSink sink;
    ASSERT_EQ(run_convert(fast(d.sub("ref"), 2), &err, &sink), 0) << err;
    const auto ref = snapshot(d.sub("ref"));

    const std::string out = d.sub("k");
    ctest::fs::create_directories(out);
    { std::ofstream(out + "/.sluice-convert.tmp") << "partial fingerp"; }
    ASSERT_EQ(run_convert(fast(out, 2), &err, &sink), 0) << "rerun after a kill before the state file's rename: " << err;
    expect_same(ref, snapshot(out), "rerun after a kill before the state file's rename");

    const std::string other = d.sub("other");
    ctest::fs::create_directories(other);
    { std::ofstream(other + "/.sluice-convert.tmp") << "x"; }
    { std::ofstream(other + "/notes.txt") << "a user's file"; }
    EXPECT_NE(run_convert(fast(other, 2), &err, &sink), 0) << "a directory with a stranger's file was taken";
    std::printf("state temporary beside a user's file -> %s\n", err.c_str());
    EXPECT_NE(err.find("not empty"), std::string::npos) << err;
    EXPECT_EQ(ctest::slurp(other + "/notes.txt"), "a user's file");
}
