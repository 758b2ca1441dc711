#include "quant/qtensor.h"

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
    size_t sz = (n + align - 1) / align * align;
    if (sz == 0) sz = align;
    return AlignedBytes(static_cast<uint8_t *>(std::aligned_alloc(align, sz)));
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
