// libFuzzer harness: manifest.json bytes -> parse_manifest, then the memory
// plan on whatever parsed (the arithmetic that used to divide by zero and
// overflow on hostile values). Built by scripts/fuzz.sh with ASan/UBSan.
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/manifest.h"
#include "runtime/memory_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    sluice::Manifest m;
    const std::string text(reinterpret_cast<const char *>(data), size);
    if (!sluice::parse_manifest(text, "fuzz/manifest.json", &m)) return 0;
    sluice::MemoryPlan p;
    (void)sluice::plan_memory(m, 0, 4096, 64, "/nonexistent", "/nonexistent", &p);
    (void)sluice::plan_memory(m, 1ull << 40, 1 << 20, 1024, "/nonexistent", "/nonexistent", &p);
    return 0;
}
