#include "runtime/expert_source.h"

#include <sys/mman.h>

namespace sluice {

void RecordFree::operator()(uint8_t *p) const {
    if (p) ::munmap(p, n);
}

RecordBytes record_alloc(size_t n) {
    void *p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) return RecordBytes(nullptr, RecordFree{0});
    return RecordBytes(static_cast<uint8_t *>(p), RecordFree{n});
}

Status SyncExpertSource::fetch(int layer, int expert, ExpertRef *out) {
    const Manifest &m = c_.manifest();
    auto it = m.banks.find(layer);
    if (it == m.banks.end()) return format_error("layer " + std::to_string(layer) + " has no expert bank");
    if (expert < 0 || expert >= it->second.experts)
        return arg_error("expert " + std::to_string(expert) + " out of range for layer " + std::to_string(layer));
    const File &f = c_.bank_file(layer);
    ExpertGeom g = geom_;
    g.stride = it->second.bytes / it->second.experts;
    auto buf = std::make_shared<ExpertBuffer>();
    buf->bytes = record_alloc((size_t)g.stride);
    if (!buf->bytes) return Status(SLUICE_E_NOMEM, "cannot allocate an expert record buffer");
    Status st = f.pread_all(buf->bytes.get(), (size_t)g.stride, (uint64_t)expert * (uint64_t)g.stride);
    if (!st)
        return io_error(f.path() + ": expert " + std::to_string(expert) + " of layer " + std::to_string(layer) +
                        ": " + st.message());
    SLUICE_TRY(check_expert_record(buf->bytes.get(), g, layer, expert, it->second.codebook_base, c_.n_books(),
                                   verify_, f.path(), &buf->view));
    buf->layer = layer;
    buf->expert = expert;
    stats_.reads++;
    stats_.bytes_read += (uint64_t)g.stride;
    *out = std::move(buf);
    return Status::ok();
}

}  // namespace sluice
