#include "runtime/expert_source.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
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
    pool->warmer_ = std::thread([p = pool.get()] { p->warm_loop(); });
    return pool;
}

RecordPool::~RecordPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_warm_.notify_all();
    cv_warmed_.notify_all();
    if (warmer_.joinable()) warmer_.join();
    if (map_base_) ::munmap(map_base_, map_bytes_);
}

void RecordPool::warm_loop() {
    // The first touch of a page is what costs on these VMs: the host backs
    // it then, at about 0.3-0.5 GB/s, and a vCPU stalled in the host cannot
    // be given to another thread, whatever this one's priority. An 8G cache
    // warmed as fast as it could go took 10 s of system time in a 16-token
    // run and slowed decode 1.35x. So past the urgent target (what the first
    // prompt needs, warmed from open, and what reads ask for when no warm
    // slot is free) slots are warmed only while the forward
    // pass waits for a read (note_waiting), 2 MiB at a time: the cache grows
    // on time nothing else could use, fastest when the disk is slowest,
    // which is when a hit saves most. A slot is claimed, touched from user
    // space and only then handed out; touching rather than
    // MADV_POPULATE_WRITE keeps this thread off the process's mmap lock (a
    // fault takes the mapping's own), so it can stop mid-slot harmlessly.
    constexpr size_t kStep = 2u << 20;
    std::unique_lock<std::mutex> lk(mu_);
    size_t done = 0;  // bytes of warming_ touched
    for (;;) {
        cv_warm_.wait(lk, [&] {
            if (stop_) return true;
            if (warming_ && hurry_) return true;
            const bool more = warming_ || (next_cold_ < slots_ && resident_ < limit_);
            const size_t next = warming_ ? index_of(warming_) : next_cold_;
            return more && (next < urgent_ || (next < lazy_ && waiting_ > 0));
        });
        if (stop_) return;
        const bool urgent = hurry_ || (warming_ ? index_of(warming_) : next_cold_) < urgent_;
        if (!warming_) {
            warming_ = base_ + next_cold_ * slot_;
            next_cold_++;
            resident_++;
            done = 0;
        }
        uint8_t *slot = warming_;
        lk.unlock();
        const auto t0 = std::chrono::steady_clock::now();
        const size_t end = urgent ? slot_ : std::min(slot_, done + kStep);
        volatile uint8_t *v = slot;
        for (; done < end; done += 4096) v[done] = 0;
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        lk.lock();
        warm_seconds_ += dt;
        if (done < slot_) continue;
        warmed_bytes_ += slot_;
        if (resident_ > limit_) release_locked(slot);
        else free_.push_back(slot);
        warming_ = nullptr;
        hurry_ = false;
        cv_warmed_.notify_all();
    }
}

void RecordPool::note_waiting(int delta) {
    std::lock_guard<std::mutex> lk(mu_);
    waiting_ += delta;
    if (waiting_ > 0 && lazy_ > next_cold_) cv_warm_.notify_one();
}

void RecordPool::warm_to(size_t n, bool urgent) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        size_t &target = urgent ? urgent_ : lazy_;
        if (n <= target) return;
        target = std::min(n, slots_);
    }
    cv_warm_.notify_one();
}

RecordBytes RecordPool::take() {
    {
        std::unique_lock<std::mutex> lk(mu_);
        // The slot being warmed is the last one not handed out: wait for it
        // (the warming thread finishes it at once) rather than map a buffer
        // outside the pool.
        while (free_.empty() && next_cold_ >= slots_ && released_.empty() && warming_ && !stop_) {
            hurry_ = true;
            cv_warm_.notify_all();
            cv_warmed_.wait(lk);
        }
        uint8_t *p = nullptr;
        if (!free_.empty()) {
            // Warm: resident already, the read never faults.
            p = free_.back();
            free_.pop_back();
        } else if (next_cold_ < slots_) {
            // Nothing warm free: this read faults its slot in (counted), and
            // the warming thread is asked to get ahead of the next ones.
            p = base_ + next_cold_ * slot_;
            next_cold_++;
            resident_++;
            cold_takes_++;
            if (urgent_ < next_cold_ + kUrgentStep) {
                urgent_ = std::min(slots_, next_cold_ + kUrgentStep);
                cv_warm_.notify_one();
            }
        } else if (!released_.empty()) {
            // A slot returned to the OS: faulted in again on use, rather
            // than a mapping of its own, which would cost the same pages.
            p = released_.back();
            released_.pop_back();
            resident_++;
            cold_takes_++;
        }
        if (p) return RecordBytes(p, RecordFree{slot_, shared_from_this()});
        fallbacks_++;
    }
    RecordBytes b = record_alloc(slot_);
    return b;
}

uint64_t RecordPool::release_locked(uint8_t *p) {
    ::madvise(p, slot_, MADV_DONTNEED);
    released_.push_back(p);
    resident_--;
    bytes_released_ += slot_;
    return slot_;
}

void RecordPool::give(uint8_t *p) {
    std::lock_guard<std::mutex> lk(mu_);
    if (resident_ > limit_) release_locked(p);
    else free_.push_back(p);
}

uint64_t RecordPool::set_resident_limit(size_t n) {
    std::lock_guard<std::mutex> lk(mu_);
    limit_ = n;
    uint64_t freed = 0;
    while (resident_ > limit_ && !free_.empty()) {
        uint8_t *p = free_.back();
        free_.pop_back();
        freed += release_locked(p);
    }
    if (resident_ < limit_) cv_warm_.notify_one();  // a lifted limit lets warming go on
    return freed;
}

size_t RecordPool::resident_slots() const {
    std::lock_guard<std::mutex> lk(mu_);
    return resident_;
}

RecordPool::Stats RecordPool::stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    Stats s;
    s.fallbacks = fallbacks_;
    s.cold_takes = cold_takes_;
    s.warmed_bytes = warmed_bytes_;
    s.warm_seconds = warm_seconds_;
    s.bytes_released = bytes_released_;
    return s;
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
