// Issue 14's cache cliff, the arithmetic and the mechanism without a model:
// the default budget for given MemAvailable / cgroup values, the kernel's
// numbers read from a fake /proc and cgroup tree, the pressure watcher's
// decisions, and a shrunken record pool really returning its memory (VmRSS
// drops).
#include <gtest/gtest.h>

#include "proc_status.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/disk_probe.h"
#include "runtime/expert_source.h"
#include "runtime/mem_status.h"
#include "runtime/memory_plan.h"
#include "runtime/pressure_watch.h"

namespace fs = std::filesystem;
using namespace sluice;

namespace {

constexpr uint64_t GiB = 1ull << 30, MiB = 1ull << 20;

using sluice_test::vm_rss_kb;

TEST(DefaultBudget, AvailableMinusReserveBetweenFloorAndAllExperts) {
    std::string why;
    // The machine: 24 GiB, 17.6 GiB available. Reserve max(1 GiB,
    // 10 %) = 2.4 GiB; a 48B-shaped model (floor 1.5 GiB, all experts 18 GiB).
    const uint64_t ram = 24 * GiB, avail = (uint64_t)(17.6 * GiB), floor = (uint64_t)(1.5 * GiB);
    EXPECT_EQ(budget_reserve(ram), ram / 10);
    uint64_t b = default_budget(floor, 20 * GiB, ram, avail, &why);
    std::printf("24 GiB, 17.6 available: %.2f GiB (%s)\n", b / (double)GiB, why.c_str());
    EXPECT_EQ(b, avail - ram / 10);
    EXPECT_NE(why.find("available"), std::string::npos);
    // A model that cannot use that much: every expert record, no more.
    b = default_budget(floor, 5 * GiB, ram, avail, &why);
    EXPECT_EQ(b, 5 * GiB);
    EXPECT_NE(why.find("every expert record"), std::string::npos) << why;
    // Little available: the floor, said so.
    b = default_budget(floor, 20 * GiB, ram, 2 * GiB, &why);
    EXPECT_EQ(b, floor);
    EXPECT_NE(why.find("floor"), std::string::npos) << why;
    // Small machines keep at least 1 GiB back.
    EXPECT_EQ(budget_reserve(4 * GiB), GiB);
    EXPECT_EQ(default_budget(MiB, 100 * GiB, 4 * GiB, 3 * GiB, &why), 2 * GiB);
    // Not measured (a machine planned before it exists): 3/4 of its RAM.
    EXPECT_EQ(default_budget(floor, 100 * GiB, 64 * GiB, 0, &why), 48 * GiB);
    // max_useful under the floor cannot push the budget under it.
    EXPECT_EQ(default_budget(floor, floor / 2, ram, avail, &why), floor);
}

struct FakeTree {
    fs::path root = fs::temp_directory_path() / ("sluice-mem-" + std::to_string(::getpid()));
    MemPaths paths;
    FakeTree() {
        fs::create_directories(root / "cg" / "app");
        paths.meminfo = (root / "meminfo").string();
        paths.psi = (root / "psi").string();
        paths.cgroup_root = (root / "cg").string();
        paths.proc_cgroup = (root / "self-cgroup").string();
    }
    ~FakeTree() { fs::remove_all(root); }
    void write(const fs::path &p, const std::string &s) { std::ofstream(root / p) << s; }
};

TEST(MemStatus, MeminfoPsiAndTheCgroupsRoom) {
    FakeTree t;
    t.write("meminfo", "MemTotal:       24683756 kB\nMemFree:  1 kB\nMemAvailable:   18000000 kB\n");
    t.write("psi", "some avg10=12.50 avg60=3.00 avg300=1.00 total=5\nfull avg10=1.00 avg60=0 avg300=0 total=1\n");
    t.write("self-cgroup", "0::/app\n");
    MemStatus s = read_mem_status(t.paths);
    EXPECT_TRUE(s.have_meminfo);
    EXPECT_EQ(s.mem_available, 18000000ull * 1024);
    EXPECT_EQ(s.mem_total, 24683756ull * 1024);
    EXPECT_TRUE(s.have_psi);
    EXPECT_DOUBLE_EQ(s.psi_some_avg10, 12.5);
    EXPECT_FALSE(s.have_cgroup) << "no limit anywhere: no cgroup cap";
    EXPECT_EQ(s.available(), 18000000ull * 1024);
    // A 10 GiB memory.max with 7 GiB charged, 1 GiB of it inactive page
    // cache: 4 GiB of room, under MemAvailable.
    t.write("cg/app/memory.max", std::to_string(10 * GiB) + "\n");
    t.write("cg/app/memory.current", std::to_string(7 * GiB) + "\n");
    t.write("cg/app/memory.stat", "anon 100\nfile 200\ninactive_file " + std::to_string(GiB) + "\nactive_file 5\n");
    t.write("cg/app/memory.events", "low 0\nhigh 3\nmax 2\noom 0\noom_kill 0\n");
    s = read_mem_status(t.paths);
    ASSERT_TRUE(s.have_cgroup);
    EXPECT_EQ(s.cg_limit, 10 * GiB);
    EXPECT_EQ(s.cg_events, 5u);
    EXPECT_EQ(s.available(), 4 * GiB);
    // A tighter memory.high on the parent binds instead.
    t.write("cg/memory.high", std::to_string(8 * GiB) + "\n");
    t.write("cg/memory.current", std::to_string(7 * GiB) + "\n");
    s = read_mem_status(t.paths);
    EXPECT_EQ(s.cg_limit, 8 * GiB);
    EXPECT_EQ(s.available(), GiB);
    // No files at all: nothing claimed.
    MemPaths none;
    none.meminfo = none.psi = none.proc_cgroup = (t.root / "absent").string();
    s = read_mem_status(none);
    EXPECT_FALSE(s.have_meminfo || s.have_psi || s.have_cgroup);
    EXPECT_EQ(s.available(), 0u);
}

MemStatus avail(uint64_t a, double psi = -1) {
    MemStatus s;
    s.have_meminfo = true;
    s.mem_available = a;
    if (psi >= 0) {
        s.have_psi = true;
        s.psi_some_avg10 = psi;
    }
    return s;
}

TEST(PressureTarget, ShrinksByWhatIsMissingAndGrowsBackAboveTheBand) {
    const uint64_t rec = 4 * MiB, conf = 2 * GiB, reserve = GiB, step = reserve / 8;  // 128 MiB
    bool shrink = false;
    // Plenty available: nothing changes.
    EXPECT_EQ(pressure_target(conf, conf, conf, rec, reserve, avail(8 * GiB), false, &shrink), conf);
    EXPECT_FALSE(shrink);
    // 300 MiB under the reserve: give back that plus one step, from what is held.
    const uint64_t t = pressure_target(conf, conf, conf, rec, reserve, avail(reserve - 300 * MiB), false, &shrink);
    EXPECT_TRUE(shrink);
    EXPECT_EQ(t, conf - 300 * MiB - step);
    EXPECT_EQ(t % rec, 0u);
    // A capacity not yet filled: the shrink starts from the bytes held.
    EXPECT_EQ(pressure_target(conf, GiB, conf, rec, reserve, avail(reserve - 300 * MiB), false, &shrink),
              GiB - 300 * MiB - step);
    // More missing (reserve + step = 1152 MiB) than the cache holds (1 GiB): empty.
    EXPECT_EQ(pressure_target(GiB, GiB, conf, rec, reserve, avail(0), false, &shrink), 0u);
    EXPECT_TRUE(shrink);
    // Inside the band [reserve, reserve + 2 step]: hold still either way.
    EXPECT_EQ(pressure_target(t, t, conf, rec, reserve, avail(reserve + step), false, &shrink), t);
    EXPECT_FALSE(shrink);
    // Above it: grow by what is left above reserve + step, never past the configured size.
    EXPECT_EQ(pressure_target(t, t, conf, rec, reserve, avail(reserve + 3 * step), false, &shrink), t + 2 * step);
    EXPECT_EQ(pressure_target(t, t, conf, rec, reserve, avail(64 * GiB), false, &shrink), conf);
    // PSI stalls with memory inside the band shrink; with plenty free they do not.
    EXPECT_LT(pressure_target(conf, conf, conf, rec, reserve, avail(reserve + step, 25.0), false, &shrink), conf);
    EXPECT_TRUE(shrink);
    EXPECT_EQ(pressure_target(conf, conf, conf, rec, reserve, avail(8 * GiB, 25.0), false, &shrink), conf);
    // ... and stalls hold back growth.
    EXPECT_EQ(pressure_target(t, t, conf, rec, reserve, avail(8 * GiB, 5.0), false, &shrink), t);
    // The cgroup's limit biting (memory.events grew) shrinks by a step.
    EXPECT_EQ(pressure_target(conf, conf, conf, rec, reserve, avail(8 * GiB), true, &shrink), conf - step);
    EXPECT_EQ(default_pressure_reserve(4 * GiB), 512 * MiB);
    EXPECT_EQ(default_pressure_reserve(64 * GiB), 64 * GiB / 20);
}

TEST(RecordPool, ALoweredLimitReturnsTheMemoryVmRssDrops) {
    const long before_kb = vm_rss_kb();
    if (before_kb < 0) GTEST_SKIP() << "no VmRSS in /proc/self/status on this system";
    const size_t slot = 1 << 20, n = 64;
    auto pool = RecordPool::create(slot, n);
    ASSERT_TRUE(pool);
    {
        std::vector<RecordBytes> held;
        for (size_t i = 0; i < n; i++) {
            held.push_back(pool->take());
            ASSERT_TRUE(held.back());
            std::memset(held.back().get(), 0x5a, slot);  // resident for certain
        }
    }  // all given back: free, still resident
    EXPECT_EQ(pool->fallbacks(), 0u);
    const long full_kb = vm_rss_kb();
    const uint64_t freed = pool->set_resident_limit(8);
    const long after_kb = vm_rss_kb();
    std::printf("VmRSS %ld kB at start, %ld kB with 64 x 1 MiB slots touched, %ld kB after limiting the pool to 8 "
                "(released %.1f MiB)\n",
                before_kb, full_kb, after_kb, freed / (double)MiB);
    EXPECT_EQ(freed, 56 * slot);
    EXPECT_EQ(pool->bytes_released(), 56 * slot);
    EXPECT_GE(full_kb - after_kb, 48 * 1024) << "56 MiB returned: VmRSS must drop by most of it";
    // Released slots are still handed out (faulted in again), never a fallback.
    std::vector<RecordBytes> again;
    for (size_t i = 0; i < n; i++) again.push_back(pool->take());
    EXPECT_EQ(pool->fallbacks(), 0u);
    std::memset(again.back().get(), 1, slot);
    again.clear();  // past the limit: returned as they come back
    EXPECT_LE(vm_rss_kb(), full_kb - 40 * 1024);
    // Lifting the limit keeps memory out until used.
    EXPECT_EQ(pool->set_resident_limit(n), 0u);
}

// Issue 33: the pool makes slots resident on its own thread, only as far as
// asked, and lazy targets only while the forward pass waits for a read.
// Polls with a deadline: the warming thread runs on its own schedule.
template <class F>
bool eventually(F done, double seconds = 20.0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!done()) {
        if (std::chrono::steady_clock::now() > until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

TEST(RecordPool, WarmsOnlyWhatIsAskedForAndReadsFindItWarm) {
    const size_t slot = 1 << 20, n = 32;
    auto pool = RecordPool::create(slot, n);
    ASSERT_TRUE(pool);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(pool->stats().warmed_bytes, 0u) << "nothing asked for: nothing made resident";
    EXPECT_EQ(pool->resident_slots(), 0u);
    pool->warm_to(8, true);
    ASSERT_TRUE(eventually([&] { return pool->stats().warmed_bytes == 8 * slot; }))
        << "warmed " << pool->stats().warmed_bytes;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(pool->stats().warmed_bytes, 8 * slot) << "the target is 8 slots: no more";
    std::vector<RecordBytes> held;
    for (int i = 0; i < 8; i++) held.push_back(pool->take());
    EXPECT_EQ(pool->stats().cold_takes, 0u) << "8 warm slots for 8 reads";
    held.push_back(pool->take());
    const RecordPool::Stats st = pool->stats();
    EXPECT_EQ(st.cold_takes, 1u) << "the ninth read found no warm slot";
    // ... and the warming thread was asked to get ahead of the next reads.
    ASSERT_TRUE(eventually([&] { return pool->stats().warmed_bytes >= 16 * slot; }));
    for (int i = 0; i < 8; i++) held.push_back(pool->take());
    std::printf("32 x 1 MiB slots: warmed %.0f MiB in %.4f s, %llu cold reads of 17\n",
                pool->stats().warmed_bytes / (double)MiB, pool->stats().warm_seconds,
                (unsigned long long)pool->stats().cold_takes);
    EXPECT_EQ(pool->stats().cold_takes, 1u) << "warmed ahead after the first cold read";
    // Every slot handed out, the one being warmed included: never a fallback.
    for (size_t i = held.size(); i < n; i++) held.push_back(pool->take());
    EXPECT_EQ(pool->stats().fallbacks, 0u);
    for (const RecordBytes &b : held) {
        ASSERT_TRUE(b);
        std::memset(b.get(), 0x33, slot);  // writable, whole
    }
}

TEST(RecordPool, LazyTargetsWarmOnlyWhileAReadIsWaitedFor) {
    const size_t slot = 1 << 20, n = 16;
    auto pool = RecordPool::create(slot, n);
    ASSERT_TRUE(pool);
    pool->warm_to(12, false);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(pool->stats().warmed_bytes, 0u) << "nobody waits for a read: no warming";
    pool->note_waiting(+1);
    ASSERT_TRUE(eventually([&] { return pool->stats().warmed_bytes == 12 * slot; }));
    pool->note_waiting(-1);
    EXPECT_EQ(pool->resident_slots(), 12u);
    // A resident limit holds against every target.
    pool->set_resident_limit(13);
    pool->warm_to(16, true);
    ASSERT_TRUE(eventually([&] { return pool->resident_slots() == 13; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(pool->resident_slots(), 13u);
    EXPECT_EQ(pool->stats().warmed_bytes, 13 * slot);
}

TEST(DiskProbe, MeasuresARateAndLeavesNoFileBehind) {
    const fs::path d = fs::temp_directory_path() / ("sluice-probe-" + std::to_string(::getpid()));
    fs::create_directories(d);
    DiskProbeResult r;
    // Small on purpose (a unit test must not load the disk): 4 MiB, 64 KiB reads, 0.2 s.
    const Status st = probe_disk(d.string(), 64 * 1024, 4 * MiB, 0.2, 2, &r);
    ASSERT_TRUE(st) << st.message();
    std::printf("probe of %s: %.3f GB/s, %llu reads of 64 KiB in %.3f s (%s)\n", d.c_str(), r.gbps,
                (unsigned long long)r.reads, r.seconds, r.direct ? "O_DIRECT" : "buffered");
    EXPECT_GT(r.gbps, 0.0);
    EXPECT_GE(r.reads, 8u);
    EXPECT_EQ(r.bytes, r.reads * 64 * 1024);
    EXPECT_EQ(r.file_bytes, 4 * MiB);
    EXPECT_TRUE(fs::is_empty(d)) << "the probe file must be removed";
    // A directory that does not exist: an I/O error naming it.
    const Status bad = probe_disk((d / "absent").string(), 64 * 1024, 4 * MiB, 0.1, 1, &r);
    EXPECT_EQ(bad.code(), SLUICE_E_IO);
    EXPECT_NE(bad.message().find("absent"), std::string::npos) << bad.message();
    fs::remove_all(d);
}

}  // namespace
