#include "runtime/expert_source.h"

#include <sys/mman.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "format/platform_io.h"

namespace sluice {

namespace {
// Pre-fault at mmap where the kernel can (Linux); elsewhere the first read
// faults the pages in.
#ifdef MAP_POPULATE
constexpr int kPopulate = MAP_POPULATE;
#else
constexpr int kPopulate = 0;
#endif
}  // namespace

void RecordFree::operator()(uint8_t *p) const {
    if (!p) return;
    if (pool && pool->owns(p)) pool->give(p);
    else ::munmap(p, n);
}

RecordBytes record_alloc(size_t n) {
    void *p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | kPopulate, -1, 0);
    if (p == MAP_FAILED) return RecordBytes(nullptr, RecordFree{0, nullptr});
    return RecordBytes(static_cast<uint8_t *>(p), RecordFree{n, nullptr});
}

std::shared_ptr<RecordPool> RecordPool::create(size_t slot_bytes, size_t slots) {
    constexpr size_t kHuge = 2u << 20;
    std::shared_ptr<RecordPool> pool(new RecordPool());
    pool->slot_ = platform::round_up_io(slot_bytes);  // whole pages, for direct reads
    pool->slots_ = slots;
    if (slots == 0 || pool->slot_ == 0) return pool;
    // Map 2 MiB more than needed so the slots can start on a huge-page
    // boundary; the slack is never touched, so it never becomes resident.
    pool->map_bytes_ = pool->slot_ * slots + kHuge;
    void *m = ::mmap(nullptr, pool->map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    uint8_t *base = static_cast<uint8_t *>(m);
    pool->map_base_ = base;
    pool->base_ = reinterpret_cast<uint8_t *>(((uintptr_t)base + kHuge - 1) & ~(uintptr_t)(kHuge - 1));
#ifdef MADV_HUGEPAGE
    ::madvise(pool->base_, pool->slot_ * slots, MADV_HUGEPAGE);  // advisory: 4 KiB pages still work
#endif
    // Fault every page in now, once, instead of in the read path. First
    // touches cost the host a fault each on these VMs (an 8 GB budget's
    // pool took 1.6-13.7 s to open), so every core touches its own share.
    const size_t total = pool->slot_ * slots, step = platform::page_size();
    const unsigned nt = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
    auto touch = [base = pool->base_, total, step, nt](unsigned i) {
        const size_t pages = (total + step - 1) / step;
        for (size_t pg = pages * i / nt; pg < pages * (i + 1) / nt; pg++) base[pg * step] = 0;
    };
    std::vector<std::thread> ts;
    for (unsigned i = 1; i < nt && total >= (64u << 20); i++) ts.emplace_back(touch, i);
    if (ts.empty()) {
        for (size_t off = 0; off < total; off += step) pool->base_[off] = 0;
    } else {
        touch(0);
        for (auto &t : ts) t.join();
    }
    pool->free_.reserve(slots);
    for (size_t i = slots; i-- > 0;) pool->free_.push_back(pool->base_ + i * pool->slot_);
    return pool;
}

RecordPool::~RecordPool() {
    if (map_base_) ::munmap(map_base_, map_bytes_);
}

RecordBytes RecordPool::take() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (!free_.empty()) {
            uint8_t *p = free_.back();
            free_.pop_back();
            return RecordBytes(p, RecordFree{slot_, shared_from_this()});
        }
        fallbacks_++;
    }
    RecordBytes b = record_alloc(slot_);
    return b;
}

void RecordPool::give(uint8_t *p) {
    std::lock_guard<std::mutex> lk(mu_);
    free_.push_back(p);
}

size_t RecordPool::fallbacks() const {
    std::lock_guard<std::mutex> lk(mu_);
    return fallbacks_;
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
