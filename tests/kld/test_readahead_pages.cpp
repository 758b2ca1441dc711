// The KLD operand reader (src/kld/io/readahead) under a forced 16 KiB page
// size: O_DIRECT offsets, lengths and buffers follow platform::io_align()
// instead of an assumed 4 KiB, and the bytes read are the file's.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kld/io/readahead.h"
#include "format/platform_io.h"

using namespace sluice::kld;
using sluice::Status;
namespace platform = sluice::platform;

TEST(KldReadAhead, SixteenKiBPagesReadTheExactBytes) {
    ASSERT_TRUE(platform::force_page_size_for_testing(16384));
    struct Restore {
        ~Restore() { platform::force_page_size_for_testing(0); }
    } restore;
    // A file that is not a whole number of pages, a range that starts and
    // ends mid-page, and chunks smaller than the alignment (raised to it).
    std::vector<uint8_t> bytes(7 * 16384 + 999);
    for (size_t i = 0; i < bytes.size(); i++) bytes[i] = (uint8_t)(i * 7 + (i >> 11));
    char name[] = "readahead_pages_XXXXXX";  // in the build tree: /tmp may be tmpfs (no O_DIRECT)
    const int fd = ::mkstemp(name);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), (ssize_t)bytes.size());
    ::close(fd);
    const uint64_t begin = 5000, end = bytes.size() - 17;
    for (IoMode mode : {IoMode::direct, IoMode::buffered}) {
        ReadAheadOptions o;
        o.mode = mode;
        o.chunk = 4096;
        ReadAhead ra;
        ASSERT_TRUE(ra.open(name, begin, end, o).is_ok());
        std::vector<uint8_t> got(end - begin);
        ASSERT_TRUE(ra.read(got.data(), got.size()).is_ok());
        ASSERT_TRUE(ra.finish().is_ok());
        const bool same = std::equal(got.begin(), got.end(), bytes.begin() + (ptrdiff_t)begin);
        std::printf("16 KiB pages, %s requested (%s used): %zu bytes from offset %llu %s\n",
                    mode == IoMode::direct ? "direct" : "buffered", ra.mode() == IoMode::direct ? "direct" : "buffered",
                    got.size(), (unsigned long long)begin, same ? "match the file" : "DIFFER");
        EXPECT_TRUE(same);
    }
    ::unlink(name);
}
