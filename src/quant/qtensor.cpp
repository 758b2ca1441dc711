#include "quant/qtensor.h"

#include <sys/mman.h>

namespace sluice {

const char *qfmt_name(QFmt f) {
    switch (f) {
        case QFmt::F32: return "F32";
        case QFmt::Q8G: return "Q8G";
        case QFmt::Q4G: return "Q4G";
        case QFmt::Q3G: return "Q3G";
    }
    return "?";
}

AlignedBytes aligned_alloc_bytes(size_t n, size_t align) {
    // Large tensors (the trunk's matrices, up to 377 MB for an lm_head) go on
    // transparent huge pages where the kernel allows: loading 1.35 GB of
    // trunk into 4 KiB pages took ~330k first-touch faults at open, and
    // streaming them every token walks 512x more page-table entries.
    constexpr size_t kHuge = 2u << 20;
    const bool huge = n >= 2 * kHuge;
    if (huge && align < kHuge) align = kHuge;
    size_t sz = (n + align - 1) / align * align;
    if (sz == 0) sz = align;
    auto *p = static_cast<uint8_t *>(std::aligned_alloc(align, sz));
#ifdef MADV_HUGEPAGE
    if (p && huge) ::madvise(p, sz, MADV_HUGEPAGE);  // advisory; 4 KiB pages still work
#endif
    return AlignedBytes(p);
}

bool qtensor_geometry(QFmt fmt, int64_t cols, int group, int64_t *ng, int64_t *rowbytes) {
    if (cols <= 0 || group <= 0) return false;
    *ng = (cols + group - 1) / group;
    int64_t n = *ng * group;
    switch (fmt) {
        case QFmt::F32: *ng = 0; *rowbytes = 4 * cols; return true;
        case QFmt::Q8G: *rowbytes = n; return true;
        case QFmt::Q4G: *rowbytes = (n + 1) / 2; return true;
        case QFmt::Q3G: *rowbytes = (3 * n + 7) / 8 + 1; return true;  // +1 guard byte per row
    }
    return false;
}

}  // namespace sluice
