// libFuzzer harness: a usage file (hotlist, FORMAT.md) read back by
// load_hotlist, which pre-warms the expert cache from untrusted bytes.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/hotlist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    static const std::string path = "/tmp/sluice-fuzz-hotlist-" + std::to_string(::getpid());
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f) return 0;
    std::fwrite(data, 1, size, f);
    std::fclose(f);
    std::vector<sluice::HotEntry> v;
    (void)sluice::load_hotlist(path, &v);
    return 0;
}
