// Fault injection at the I/O layer (src/format/io_fault.h, issue 16): EIO,
// short reads, a record that changes between reads, ENOSPC on writes. Each
// gives an error naming the file (and record), never a crash, and a failed
// sluice_eval leaves the session exactly as it was: the evaluation after it
// gives logits bit-identical to a context that never saw the fault.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "fixtures_util.h"
#include "format/io_fault.h"
#include "sluice/sluice.h"

using namespace sluice_test;
namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string &s, const std::string &t) {
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// A hook that fails reads of files whose name ends with `file`.
struct Faults : sluice::IoFaultHook {
    enum Kind { none, eio, short_read, changing, enospc } kind = none;
    std::string file;
    std::mutex mu;
    std::map<uint64_t, int> seen;  // offset -> reads (changing)
    std::atomic<int> hits{0};
    ssize_t pread(int fd, const std::string &path, void *buf, size_t n, uint64_t off) override {
        if (kind == none || !ends_with(path, file)) return IoFaultHook::pread(fd, path, buf, n, off);
        hits++;
        if (kind == eio) {
            errno = EIO;
            return -1;
        }
        if (kind == short_read) {
            // The first half, then end of file: as a truncated or racing file would read.
            if (off % 4096 != 0 || n < 2) return 0;
            return IoFaultHook::pread(fd, path, buf, n / 2, off);
        }
        ssize_t r = IoFaultHook::pread(fd, path, buf, n, off);
        if (kind == changing && r > 200) {
            std::lock_guard<std::mutex> lk(mu);
            if (seen[off]++ > 0) static_cast<uint8_t *>(buf)[100] ^= 0x5A;  // changed since the last read
        }
        return r;
    }
    int write_error(const std::string &path) override {
        return kind == enospc && ends_with(path, file + ".tmp") ? ENOSPC : 0;
    }
};

class Fault : public ::testing::Test {
public:
    static sluice_config cfg(bool verify = false) {
        sluice_config c;
        sluice_config_default(&c);
        c.no_cache = 1;  // every expert use is a read, so the fault is met
        c.io_threads = -1;
        c.verify_records = verify;
        return c;
    }

protected:
    void SetUp() override {
        if (!have_fixtures()) GTEST_SKIP() << "no fixtures at " << warp_dir();
        sluice::set_io_fault_hook(&f_);
    }
    void TearDown() override { sluice::set_io_fault_hook(nullptr); }
    Faults f_;
};

TEST_F(Fault, EioOnTheTrunkNamesTheFile) {
    f_.kind = Faults::eio;
    f_.file = "trunk.bin";
    sluice_config c = cfg();
    sluice_ctx *ctx = nullptr;
    EXPECT_EQ(sluice_open(container_path("kimi-linear-tiny").c_str(), &c, &ctx), SLUICE_E_IO);
    const std::string msg = sluice_last_error(ctx);
    std::printf("  open -> %s\n", msg.c_str());
    EXPECT_NE(msg.find("trunk.bin"), std::string::npos);
    EXPECT_NE(msg.find(std::strerror(EIO)), std::string::npos);
    sluice_close(ctx);
}

// The heart of it: each read fault during an eval, then the same context
// continues and must match a clean context bit for bit.
void fault_mid_session(Faults &f, Faults::Kind kind, const char *file, bool verify,
                       std::vector<std::string> needles) {
    const auto ids = fixture_cases("kimi-linear-tiny")[2].ids;
    const size_t half = ids.size() / 2;
    sluice_config c = Fault::cfg(verify);
    sluice_ctx *ref = nullptr, *ctx = nullptr;
    f.kind = Faults::none;
    ASSERT_EQ(sluice_open(container_path("kimi-linear-tiny").c_str(), &c, &ref), SLUICE_OK);
    ASSERT_EQ(sluice_open(container_path("kimi-linear-tiny").c_str(), &c, &ctx), SLUICE_OK);
    const size_t V = (size_t)sluice_n_vocab(ctx);
    std::vector<float> a(V), b(V);
    ASSERT_EQ(sluice_eval(ref, ids.data(), half, a.data()), SLUICE_OK);
    if (kind == Faults::changing) {  // the prefix reads each record the first time: clean
        f.file = file;
        f.kind = kind;
    }
    ASSERT_EQ(sluice_eval(ctx, ids.data(), half, b.data()), SLUICE_OK) << sluice_last_error(ctx);
    f.file = file;
    f.kind = kind;
    const sluice_status st = sluice_eval(ctx, ids.data() + half, ids.size() - half, b.data());
    const std::string msg = sluice_last_error(ctx);
    f.kind = Faults::none;
    std::printf("  fault %d on %s: eval -> %s: %s (%d faulty reads)\n", (int)kind, file, sluice_status_name(st),
                msg.c_str(), f.hits.load());
    EXPECT_EQ(st, SLUICE_E_IO);
    for (auto &n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    EXPECT_EQ(sluice_n_past(ctx), (int32_t)half);
    // Unchanged session: the same tokens now give the clean context's logits.
    ASSERT_EQ(sluice_eval(ref, ids.data() + half, ids.size() - half, a.data()), SLUICE_OK);
    ASSERT_EQ(sluice_eval(ctx, ids.data() + half, ids.size() - half, b.data()), SLUICE_OK) << sluice_last_error(ctx);
    size_t diff = 0;
    for (size_t i = 0; i < V; i++) diff += std::memcmp(&a[i], &b[i], 4) != 0;
    std::printf("  after the failed eval: %zu of %zu logits differ from a clean context\n", diff, V);
    EXPECT_EQ(diff, 0u);
    sluice_close(ref);
    sluice_close(ctx);
}

TEST_F(Fault, EioOnAnExpertRecord) {
    fault_mid_session(f_, Faults::eio, "experts-L2.bin", false, {"experts-L2.bin", "layer 2", std::strerror(EIO)});
}

TEST_F(Fault, ShortReadOfAnExpertRecord) {
    fault_mid_session(f_, Faults::short_read, "experts-L3.bin", false, {"experts-L3.bin", "layer 3", "short read"});
}

TEST_F(Fault, RecordChangingBetweenReads) {
    // First read of each record is clean (the prefix), later ones differ: the
    // crc under --verify catches it and names the record.
    fault_mid_session(f_, Faults::changing, "experts-L1.bin", true, {"experts-L1.bin", "of layer 1", "checksum mismatch"});
}

TEST_F(Fault, EnospcOnStateAndHotlistWrites) {
    sluice_config c = cfg();
    sluice_ctx *ctx = nullptr;
    ASSERT_EQ(sluice_open(container_path("kimi-linear-tiny").c_str(), &c, &ctx), SLUICE_OK);
    int32_t t = 5;
    std::vector<float> lg((size_t)sluice_n_vocab(ctx));
    ASSERT_EQ(sluice_eval(ctx, &t, 1, lg.data()), SLUICE_OK);
    const fs::path dir = fs::temp_directory_path() / ("sluice-fault-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    for (const char *name : {"state.bin", "usage.waste"}) {
        const std::string p = (dir / name).string();
        f_.kind = Faults::enospc;
        f_.file = name;
        const sluice_status st = name[0] == 's' ? sluice_state_save(ctx, p.c_str()) : sluice_save_usage(ctx, p.c_str());
        const std::string msg = sluice_last_error(ctx);
        std::printf("  %s -> %s: %s\n", name, sluice_status_name(st), msg.c_str());
        EXPECT_EQ(st, SLUICE_E_IO);
        EXPECT_NE(msg.find(p), std::string::npos);
        EXPECT_NE(msg.find(std::strerror(ENOSPC)), std::string::npos);
        EXPECT_FALSE(fs::exists(p));           // nothing that looks complete
        EXPECT_FALSE(fs::exists(p + ".tmp"));  // and no debris
        f_.kind = Faults::none;
        EXPECT_EQ(name[0] == 's' ? sluice_state_save(ctx, p.c_str()) : sluice_save_usage(ctx, p.c_str()), SLUICE_OK);
    }
    fs::remove_all(dir);
    sluice_close(ctx);
}

}  // namespace
