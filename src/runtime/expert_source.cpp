#include "runtime/expert_source.h"

#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older glibc headers lack the name
#endif

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
    // Fault the pages in off the open path and only as far as they are
    // used: a background thread runs MADV_POPULATE_WRITE a few slots ahead
    // of the highest slot take() has handed out (slots go out lowest
    // first). First touches cost the host a fault each on these VMs;
    // touching an 8 GB pool at open took 1.6-13.7 s, and populating a 3 GB
    // pool in the background that a tiny model never fills was 83 % of its
    // 512-token prefill (clear_page). Populating never changes a page's
    // contents, so it is safe on slots in use. Where the kernel lacks it
    // (before 5.14) pages fault in at first use instead.
    const size_t total = pool->slot_ * slots;
    pool->populate_ = std::thread([p = pool.get(), total] {
        const size_t ahead = std::max<size_t>(64u << 20, 8 * p->slot_);
        size_t done = 0;
        std::unique_lock<std::mutex> lk(p->mu_);
        while (!p->stop_populate_ && done < total) {
            const size_t want = std::min(total, p->high_water_ + ahead);
            if (done >= want) {
                p->cv_populate_.wait(lk);
                continue;
            }
            lk.unlock();
            const size_t n = std::min<size_t>(want - done, 32u << 20);
            const bool ok = ::madvise(p->base_ + done, n, MADV_POPULATE_WRITE) == 0;
            lk.lock();
            if (!ok) break;
            done += n;
            p->populated_ = done;
        }
    });
    pool->resident_ = slots;
    pool->free_.reserve(slots);
    for (size_t i = slots; i-- > 0;) pool->free_.push_back(pool->base_ + i * pool->slot_);
    return pool;
}

RecordPool::~RecordPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_populate_ = true;
    }
    cv_populate_.notify_all();
    if (populate_.joinable()) populate_.join();
    if (map_base_) ::munmap(map_base_, map_bytes_);
}

RecordBytes RecordPool::take() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        // Resident slots first; a released one (faulted in again on use)
        // rather than a mapping of its own, which would cost the same pages.
        std::vector<uint8_t *> &from = !free_.empty() ? free_ : released_;
        if (!from.empty()) {
            uint8_t *p = from.back();
            from.pop_back();
            if (&from == &released_) resident_++;
            const size_t top = (size_t)(p - base_) + slot_;
            if (top > high_water_) {
                high_water_ = top;
                cv_populate_.notify_one();
            }
            return RecordBytes(p, RecordFree{slot_, shared_from_this()});
        }
        fallbacks_++;
    }
    RecordBytes b = record_alloc(slot_);
    return b;
}

uint64_t RecordPool::release_locked(uint8_t *p) {
    // Pages past what was ever faulted in were never resident: not counted.
    const size_t off = (size_t)(p - base_), faulted = std::max(populated_, high_water_);
    ::madvise(p, slot_, MADV_DONTNEED);
    released_.push_back(p);
    resident_--;
    const uint64_t b = off < faulted ? (uint64_t)std::min(slot_, faulted - off) : 0;
    bytes_released_ += b;
    return b;
}

void RecordPool::give(uint8_t *p) {
    std::lock_guard<std::mutex> lk(mu_);
    if (resident_ > limit_) release_locked(p);
    else free_.push_back(p);
}

uint64_t RecordPool::set_resident_limit(size_t n) {
    bool stop = false;
    {
        std::lock_guard<std::mutex> lk(mu_);
        limit_ = n;
        stop = resident_ > limit_ && !stop_populate_;
        if (stop) stop_populate_ = true;
    }
    if (stop) {
        // The pre-faulter would fault released slots back in: from now on
        // slots fault in at first use. It is waited for, because a
        // MADV_POPULATE_WRITE already running (up to 32 MiB) re-faulted
        // slots released beside it and VmRSS did not drop (a unit test,
        // under a loaded machine).
        cv_populate_.notify_all();
        if (populate_.joinable()) populate_.join();
    }
    std::lock_guard<std::mutex> lk(mu_);
    uint64_t freed = 0;
    while (resident_ > limit_ && !free_.empty()) {
        uint8_t *p = free_.back();
        free_.pop_back();
        freed += release_locked(p);
    }
    return freed;
}

uint64_t RecordPool::bytes_released() const {
    std::lock_guard<std::mutex> lk(mu_);
    return bytes_released_;
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
