// The I/O path's platform layer (src/format/platform_io.h): page size and
// direct-I/O alignment from the system, never an assumed 4 KiB. The 16 KiB
// page of Apple silicon and some ARM Linux kernels is forced here, so that
// path runs on a 4 KiB machine too.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "format/file.h"
#include "format/platform_io.h"
#include "runtime/expert_source.h"

using namespace sluice;

namespace {

// Restores the system's page size when a test ends, whatever happens.
struct ForcedPage {
    explicit ForcedPage(size_t bytes) { ok = platform::force_page_size_for_testing(bytes); }
    ~ForcedPage() { platform::force_page_size_for_testing(0); }
    bool ok = false;
};

bool aligned(const void *p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

std::string temp_file_with(const std::vector<uint8_t> &bytes) {
    // The working directory (the build tree) rather than /tmp: /tmp is often
    // tmpfs, which refuses O_DIRECT.
    char name[] = "platform_io_test_XXXXXX";
    const int fd = ::mkstemp(name);
    if (fd < 0) return {};
    const bool ok = ::write(fd, bytes.data(), bytes.size()) == (ssize_t)bytes.size();
    ::close(fd);
    return ok ? std::string(name) : std::string();
}

}  // namespace

TEST(PlatformIo, PageSizeComesFromTheSystem) {
    const long sys = ::sysconf(_SC_PAGESIZE);
    ASSERT_GT(sys, 0);
    std::printf("system page size %ld, io alignment %zu, cache bypass %s\n", sys, platform::io_align(),
                platform::nocache_supported() ? "supported" : "not supported");
    EXPECT_EQ(platform::page_size(), (size_t)sys);
    EXPECT_EQ(platform::io_align(), std::max<size_t>(4096, (size_t)sys));
    EXPECT_EQ(platform::round_up_io(1), platform::io_align());
    EXPECT_EQ(platform::round_up_io(platform::io_align()), platform::io_align());
}

TEST(PlatformIo, ForcedPageSizeIsValidated) {
    EXPECT_FALSE(platform::force_page_size_for_testing(1000));   // below 4 KiB
    EXPECT_FALSE(platform::force_page_size_for_testing(12288));  // not a power of two
    EXPECT_EQ(platform::page_size(), (size_t)::sysconf(_SC_PAGESIZE));
}

TEST(PlatformIo, SixteenKiBPagesAlignBuffersAndRecordSlots) {
    ForcedPage force(16384);
    ASSERT_TRUE(force.ok);
    EXPECT_EQ(platform::page_size(), 16384u);
    EXPECT_EQ(platform::io_align(), 16384u);
    EXPECT_EQ(platform::round_up_io(4096), 16384u);
    EXPECT_EQ(platform::round_up_io(16385), 32768u);
    for (size_t n : {1, 4096, 16384, 100000}) {
        void *p = platform::alloc_io(n);
        ASSERT_NE(p, nullptr);
        EXPECT_TRUE(aligned(p, 16384)) << n << " bytes at " << p;
        std::memset(p, 0xA5, platform::round_up_io(n));  // the rounded size is usable
        std::free(p);
    }
    // Expert record slots: whole 16 KiB pages, so a 12 KiB record (three
    // 4 KiB blocks, FORMAT.md) takes one slot of 16 KiB, every slot aligned.
    auto pool = RecordPool::create(3 * 4096, 5);
    ASSERT_TRUE(pool);
    EXPECT_EQ(pool->slot_bytes(), 16384u);
    std::vector<RecordBytes> held;
    for (int i = 0; i < 5; i++) {
        held.push_back(pool->take());
        ASSERT_TRUE(held.back());
        EXPECT_TRUE(aligned(held.back().get(), 16384)) << "slot " << i;
    }
    std::printf("16 KiB pages: io_align %zu, record slot %zu bytes for a 12 KiB record, 5/5 slots aligned\n",
                platform::io_align(), pool->slot_bytes());
}

TEST(PlatformIo, SixteenKiBPagesDirectReadReturnsTheFileBytes) {
    ForcedPage force(16384);
    ASSERT_TRUE(force.ok);
    std::vector<uint8_t> bytes(5 * 16384 + 123);
    for (size_t i = 0; i < bytes.size(); i++) bytes[i] = (uint8_t)(i * 131 + (i >> 9));
    const std::string path = temp_file_with(bytes);
    ASSERT_FALSE(path.empty()) << "cannot write a temp file in the working directory";
    File f;
    Status s = f.open_read(path, true);
    const bool direct = s.is_ok();
    if (!direct) {
        std::printf("direct open refused here (%s): checking the buffered path\n", s.message().c_str());
        ASSERT_TRUE(f.open_read(path, false).is_ok()) << path;
    }
    // Aligned offsets and lengths in a 16 KiB-aligned buffer, as the record
    // reader issues them: offset 16 KiB, 3 x 16 KiB.
    uint8_t *buf = static_cast<uint8_t *>(platform::alloc_io(3 * 16384));
    ASSERT_NE(buf, nullptr);
    ASSERT_TRUE(f.pread_all(buf, 3 * 16384, 16384).is_ok());
    const bool same = std::memcmp(buf, bytes.data() + 16384, 3 * 16384) == 0;
    std::printf("16 KiB pages: %s read of 48 KiB at offset 16 KiB %s\n", direct ? "direct" : "buffered",
                same ? "matches the file" : "DIFFERS");
    EXPECT_TRUE(same);
    std::free(buf);
    ::unlink(path.c_str());
}
