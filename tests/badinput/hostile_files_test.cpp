// Issue 32: the one checked open for inputs, the one checked write for
// outputs, outputs inside the model, checked size arithmetic and the one
// number / id-list parser. Each case must end at once: a FIFO that blocked
// would hang the test (ctest's timeout names it), never pass.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/checked_file.h"
#include "common/checked_math.h"
#include "common/parse_number.h"

namespace fs = std::filesystem;

namespace {

class HostileFiles : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("sluice-hostile-" + std::to_string(::getpid()) + "-" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::string p(const std::string &name) const { return (dir_ / name).string(); }
    static void put(const std::string &path, const std::string &text) { std::ofstream(path, std::ios::binary) << text; }
    static std::string get(const std::string &path) {
        std::ifstream f(path, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(f), {});
    }
    // Each special kind of file at PATH: FIFO, a symlink to a character
    // device, a symlink to a FIFO, a directory.
    std::vector<std::pair<std::string, std::string>> specials() {
        std::vector<std::pair<std::string, std::string>> v;
        const std::string fifo = p("fifo"), lfifo = p("link-to-fifo"), ldev = p("link-to-dev"), d = p("a-dir");
        EXPECT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
        fs::create_symlink(fifo, lfifo);
        fs::create_symlink("/dev/zero", ldev);
        fs::create_directory(d);
        v = {{"FIFO", fifo}, {"symlink to a FIFO", lfifo}, {"symlink to /dev/zero", ldev}, {"directory", d}};
        return v;
    }
    fs::path dir_;
};

using Clock = std::chrono::steady_clock;

TEST_F(HostileFiles, InputsRefuseEveryNonRegularFileAtOnce) {
    for (const auto &[what, path] : specials()) {
        const auto t0 = Clock::now();
        std::string out;
        sluice::Status st = sluice::read_input_file(path, 1 << 20, &out);
        int fd = -1;
        sluice::Status st2 = sluice::open_input_file(path, &fd);
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        std::printf("  %s: %s (%.3f s)\n", what.c_str(), st.message().c_str(), s);
        EXPECT_FALSE(st.is_ok()) << what;
        EXPECT_FALSE(st2.is_ok()) << what;
        EXPECT_EQ(fd, -1);
        EXPECT_NE(st.message().find(path), std::string::npos) << "the error names the file: " << st.message();
        EXPECT_LT(s, 2.0) << what << " took " << s << " s";
    }
    // A missing file and an oversized one are named errors too.
    std::string out;
    EXPECT_NE(sluice::read_input_file(p("absent"), 10, &out).message().find("cannot open"), std::string::npos);
    put(p("big"), std::string(100, 'x'));
    sluice::Status st = sluice::read_input_file(p("big"), 10, &out);
    EXPECT_NE(st.message().find("larger than"), std::string::npos) << st.message();
    ASSERT_TRUE(sluice::read_input_file(p("big"), 100, &out).is_ok());
    EXPECT_EQ(out.size(), 100u);
}

TEST_F(HostileFiles, OutputsRefuseFifosDevicesAndDirectories) {
    for (const auto &[what, path] : specials()) {
        const auto t0 = Clock::now();
        sluice::Status st = sluice::write_output_file(path, "data");
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        std::printf("  %s: %s (%.3f s)\n", what.c_str(), st.message().c_str(), s);
        EXPECT_FALSE(st.is_ok()) << what;
        EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
        EXPECT_LT(s, 2.0);
        EXPECT_FALSE(fs::exists(path + ".tmp")) << "no temporary left behind";
    }
}

// A symlink at the final name is replaced, its target never written; a
// FIFO or a symlink planted at the temporary name is refused (O_EXCL |
// O_NOFOLLOW), never opened or written through.
TEST_F(HostileFiles, OutputsNeverWriteThroughALink) {
    const std::string victim = p("victim"), out = p("out");
    put(victim, "precious");
    fs::create_symlink(victim, out);
    ASSERT_TRUE(sluice::write_output_file(out, "new").is_ok());
    EXPECT_EQ(get(victim), "precious");
    EXPECT_FALSE(fs::is_symlink(out));
    EXPECT_EQ(get(out), "new");

    const std::string out2 = p("out2");
    fs::create_symlink(victim, out2 + ".tmp");
    sluice::Status st = sluice::write_output_file(out2, "new");
    EXPECT_FALSE(st.is_ok());
    EXPECT_EQ(get(victim), "precious");
    fs::remove(out2 + ".tmp");
    ASSERT_EQ(::mkfifo((out2 + ".tmp").c_str(), 0600), 0);
    const auto t0 = Clock::now();
    st = sluice::write_output_file(out2, "new");
    EXPECT_FALSE(st.is_ok()) << "a FIFO at the temporary name";
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.0);

    // A stale regular temporary (a killed run) is replaced.
    const std::string out3 = p("out3");
    put(out3 + ".tmp", "stale");
    ASSERT_TRUE(sluice::write_output_file(out3, "fresh").is_ok());
    EXPECT_EQ(get(out3), "fresh");
    EXPECT_FALSE(fs::exists(out3 + ".tmp"));
}

// A failed piecewise write leaves neither the final name nor the temporary.
TEST_F(HostileFiles, AnUncommittedOutputLeavesNothing) {
    const std::string out = p("partial");
    {
        sluice::OutputFile f;
        ASSERT_TRUE(f.create(out).is_ok());
        ASSERT_TRUE(f.write("half", 4).is_ok());
    }
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(out + ".tmp"));
    // In place (a log written as a run goes): a FIFO is refused at once, a
    // symlink replaced by a regular file, its target untouched.
    int fd = -1;
    ASSERT_EQ(::mkfifo(p("fifo2").c_str(), 0600), 0);
    EXPECT_FALSE(sluice::create_output_in_place(p("fifo2"), &fd).is_ok());
    EXPECT_EQ(fd, -1);
    put(p("victim"), "precious");
    fs::create_symlink(p("victim"), p("log"));
    ASSERT_TRUE(sluice::create_output_in_place(p("log"), &fd).is_ok());
    ASSERT_EQ(::write(fd, "x", 1), 1);
    ::close(fd);
    EXPECT_EQ(get(p("victim")), "precious");
    EXPECT_EQ(get(p("log")), "x");
}

TEST_F(HostileFiles, AnOutputInsideTheModelIsNamed) {
    const std::string model = p("model.waste");
    fs::create_directories(model + "/sub");
    put(model + "/trunk.bin", "t");
    fs::create_symlink(model, p("alias"));
    for (const std::string &out : {model + "/trunk.bin", model + "/manifest.json", model + "/sub/x/y.bin", model,
                                   model + "/", p("alias") + "/trunk.bin", model + "/sub/../trunk.bin",
                                   p("alias") + "/new/deeper/file"}) {
        const std::string why = sluice::output_inside_reason(out, model, "the model");
        EXPECT_NE(why.find("lies inside the model " + model), std::string::npos) << out << ": '" << why << "'";
    }
    for (const std::string &out : {p("elsewhere.bin"), p("model.waste2/x"), p("alias2")})
        EXPECT_EQ(sluice::output_inside_reason(out, model, "the model"), "") << out;
    // The container's own hotlist is the one name allowed.
    EXPECT_EQ(sluice::output_inside_reason(model + "/usage.waste", model, "the model", "usage.waste"), "");
    EXPECT_NE(sluice::output_inside_reason(model + "/sub/usage.waste", model, "the model", "usage.waste"), "");
    EXPECT_NE(sluice::output_inside_reason(model + "/manifest.json", model, "the model", "usage.waste"), "");
}

TEST(CheckedMath, ProductsAndSumsReportOverflow) {
    int64_t r = 0;
    EXPECT_FALSE(sluice::checked_mul<int64_t>(int64_t(1) << 40, int64_t(1) << 26, &r));
    EXPECT_TRUE(sluice::checked_mul<int64_t>(int64_t(1) << 36, int64_t(1) << 26, &r));
    EXPECT_EQ(r, int64_t(1) << 62);
    uint64_t u = 0;
    EXPECT_FALSE(sluice::checked_add<uint64_t>(UINT64_MAX, 1, &u));
    const std::vector<int64_t> dims{1 << 20, 1 << 20, 1 << 26};
    EXPECT_FALSE(sluice::checked_product<int64_t>(dims.begin(), dims.end(), INT64_MAX, &r));
    EXPECT_FALSE(sluice::checked_product<int64_t>({1 << 20, 1 << 21}, int64_t(1) << 40, &r));
    EXPECT_FALSE(sluice::checked_product<int64_t>({4, -1}, INT64_MAX, &r));
    ASSERT_TRUE(sluice::checked_product<int64_t>({1 << 20, 1 << 20}, int64_t(1) << 40, &r));
    EXPECT_EQ(r, int64_t(1) << 40);
}

TEST(OneParser, NumbersAndIdListsGetOneAnswer) {
    uint64_t v = 0;
    std::string err;
    EXPECT_TRUE(sluice::parse_u64("18446744073709551615", &v, &err));
    EXPECT_EQ(v, UINT64_MAX);
    EXPECT_FALSE(sluice::parse_u64("18446744073709551616", &v, &err));
    EXPECT_NE(err.find("larger than"), std::string::npos) << err;
    for (const char *bad : {"", "-1", "+1", " 1", "1x", "0x10", "1e3"}) EXPECT_FALSE(sluice::parse_u64(bad, &v, &err)) << bad;

    std::vector<int32_t> ids;
    ASSERT_TRUE(sluice::parse_id_list("1,2, 3\n4 5", &ids, &err)) << err;
    EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 3, 4, 5}));
    for (const char *bad : {"1,,2", "1, ,2", ",1", "1,", "", " ", "1,x", "2147483648", "-5", "1;2"}) {
        ids.clear();
        EXPECT_FALSE(sluice::parse_id_list(bad, &ids, &err)) << "'" << bad << "' accepted";
    }
    ids.clear();
    ASSERT_TRUE(sluice::parse_id_list("2147483647", &ids, &err));
    EXPECT_EQ(ids.back(), 2147483647);
}

}  // namespace
