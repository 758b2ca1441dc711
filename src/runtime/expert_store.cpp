#include "runtime/expert_store.h"

#include "format/io_fault.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "common/steady_clock.h"

namespace sluice {
namespace {
std::string where(const File &f, int layer, int expert) {
    return f.path() + ": expert " + std::to_string(expert) + " of layer " + std::to_string(layer);
}
}  // namespace

ExpertStore::ExpertStore(const Container &c, const ExpertGeom &geom, const StoreOptions &opt)
    : c_(c), geom_(geom), opt_(opt) {}

ExpertStore::~ExpertStore() {
    queue_.reset();  // every read lands (or is cancelled) while the store is whole
}

Status ExpertStore::init() {
    st_.direct_io = opt_.direct;
    for (const auto &[L, b] : c_.manifest().banks) {
        Bank bank;
        const std::string path = c_.dir() + "/" + b.file;
        SLUICE_TRY(bank.buffered.open_read(path, false));
        // tmpfs and some FUSE filesystems refuse O_DIRECT at open (EINVAL):
        // reads go buffered and the stats say so.
        if (opt_.direct && !bank.direct.open_read(path, true)) st_.direct_io = false;
        if (b.experts <= 0) return format_error(path + ": bank of layer " + std::to_string(L) + " has no experts");
        bank.experts = b.experts;
        bank.stride = b.bytes / b.experts;
        bank.codebook_base = b.codebook_base;
        banks_.emplace(L, std::move(bank));
    }
    // Every record the store can hold at once: the cache, the read-ahead
    // allowance, and the one the forward pass is using outside both.
    // Whole records: set_cache_capacity rounds the same way, so a cache that
    // shrank and grew back returns to exactly its first capacity (a plan's
    // cache is not a multiple of the record once the wave and the expert
    // batch take their part of the room).
    if (geom_.stride > 0) {
        opt_.cache_bytes = opt_.cache_bytes / (uint64_t)geom_.stride * (uint64_t)geom_.stride;
        const uint64_t slots = (opt_.cache_bytes + opt_.prefetch_bytes) / (uint64_t)geom_.stride + 1;
        pool_ = RecordPool::create((size_t)geom_.stride, (size_t)slots);
        if (!pool_)
            return Status(SLUICE_E_NOMEM, "cannot map " + std::to_string(slots) + " expert record buffers of " +
                                              std::to_string(geom_.stride) + " bytes");
    }
    cap_bytes_ = opt_.cache_bytes;
    if (pool_) {
        // What the first prompt needs warm before it asks (issue 33), the
        // same at every budget: the read-ahead allowance and one layer's
        // records, which a prefill wave holds at once. Past that the cache
        // grows as it fills (insert_locked), on time the forward pass spends
        // waiting for reads.
        int64_t most = 0;
        for (const auto &[L, b] : banks_) most = std::max(most, b.experts);
        extra_slots_ = pool_->slots() - (size_t)(cap_bytes_ / (uint64_t)geom_.stride);
        pool_->warm_to(extra_slots_ + (size_t)most, true);
    }
    const size_t cap = geom_.stride > 0 ? (size_t)(opt_.cache_bytes / (uint64_t)geom_.stride) : 0;
    policy_ = make_cache_policy(opt_.policy, cap);
    if (!policy_)
        return arg_error("unknown cache policy \"" + opt_.policy + "\" (expected " + cache_policy_names() + ")");
    st_.policy = policy_->name();
    if (opt_.io_depth > 0) {
        queue_ = make_read_queue(opt_.io_engine, opt_.io_depth, &st_.io_note);
        st_.io_engine = queue_->name();
        st_.io_depth = queue_->depth();
        if (opt_.io_engine == IoEngine::uring && st_.io_engine != "io_uring")
            return unsupported("--io-engine uring: " + st_.io_note);
    } else {
        st_.io_engine = "synchronous";
    }
    return Status::ok();
}

void ExpertStore::note_guess_locked(bool used) {
    // An exponential average over about the last 64 guesses resolved (eight
    // layers' worth at top-k 8): used ones count 1, discarded ones 0.
    constexpr double kWeight = 1.0 / 64;
    guess_score_ = guess_score_ * (1 - kWeight) + (used ? kWeight : 0.0);
}

void ExpertStore::note_io_locked(int delta) {
    // read_seconds: wall time with at least one read in flight, so that
    // bytes / read_seconds is the rate the disk delivered to us.
    const double t = now_s();
    if (reads_running_ == 0 && delta > 0) busy_since_ = t;
    reads_running_ += delta;
    if (reads_running_ == 0 && delta < 0) st_.read_seconds += t - busy_since_;
}

Status ExpertStore::validate(int layer, int expert, RecordBytes bytes, ExpertRef *out) {
    const Bank &b = banks_.at(layer);
    ExpertGeom g = geom_;
    g.stride = b.stride;
    auto buf = std::make_shared<ExpertBuffer>();
    buf->bytes = std::move(bytes);
    SLUICE_TRY(check_expert_record(buf->bytes.get(), g, layer, expert, b.codebook_base, c_.n_books(), opt_.verify_crc,
                                   b.buffered.path(), &buf->view));
    buf->layer = layer;
    buf->expert = expert;
    *out = std::move(buf);
    return Status::ok();
}

Status ExpertStore::read_sync(int layer, int expert, ExpertRef *out) {
    const Bank &b = banks_.at(layer);
    RecordBytes bytes = pool_ && (size_t)b.stride <= pool_->slot_bytes() ? pool_->take() : record_alloc((size_t)b.stride);
    if (!bytes) return Status(SLUICE_E_NOMEM, "cannot allocate an expert record buffer");
    const uint64_t off = (uint64_t)expert * (uint64_t)b.stride;
    {
        std::lock_guard<std::mutex> lk(mu_);
        note_io_locked(+1);
    }
    Status s = b.direct.is_open() ? b.direct.pread_all(bytes.get(), (size_t)b.stride, off)
                                  : b.buffered.pread_all(bytes.get(), (size_t)b.stride, off);
    if (!s && b.direct.is_open()) {
        // Direct I/O accepted at open but refused on read (EINVAL on some
        // filesystems): the buffered descriptor reads the same bytes.
        s = b.buffered.pread_all(bytes.get(), (size_t)b.stride, off);
        if (s) {
            std::lock_guard<std::mutex> lk(mu_);
            st_.direct_io = false;
        }
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        note_io_locked(-1);
        if (s) {
            st_.reads++;
            layer_reads_[layer]++;
            st_.bytes_read += (uint64_t)b.stride;
        }
    }
    if (!s) return io_error(where(b.buffered, layer, expert) + ": " + s.message());
    return validate(layer, expert, std::move(bytes), out);
}

uint64_t ExpertStore::warm_cap_locked() const {
    if (!pool_ || geom_.stride <= 0 || cold_growth_) return cap_bytes_;
    const size_t res = pool_->resident_slots();
    const uint64_t warm = res > extra_slots_ ? (uint64_t)(res - extra_slots_) * (uint64_t)geom_.stride : 0;
    return std::min(cap_bytes_, warm);
}

void ExpertStore::insert_locked(Key k, const ExpertRef &ref) {
    const uint64_t stride = (uint64_t)geom_.stride;
    if (cache_.count(k)) return;
    // The cache grows only into memory already resident (issue 33): past it
    // a record evicts one as in a smaller cache, and the pool is asked to
    // warm more while reads are waited for. Growing into cold slots put
    // the first touch of every page (about 0.5 GB/s on these VMs) on the
    // reads' path: an 8G cache's first prompt took 1.2-1.3x as long as a
    // 3G one's, 10 s of system time against 1.5 s.
    const uint64_t cap = warm_cap_locked();
    if (cap < cap_bytes_ && used_bytes_ + stride > cap) pool_->warm_to(pool_->resident_slots() + kWarmStep, false);
    if (cap < stride) return;
    // A record somebody else holds is in use (pinned): never the victim.
    auto pinned = [&](Key q) {
        auto it = cache_.find(q);
        return it != cache_.end() && it->second.use_count() > 1;
    };
    while (used_bytes_ + stride > cap) {
        Key v;
        if (!policy_->victim(pinned, &v)) return;  // everything pinned
        if (!holding_ && !policy_->admit(k, v)) return;  // not worth its place
        policy_->erased(v);
        cache_.erase(v);
        used_bytes_ -= stride;
    }
    cache_.emplace(k, ref);
    policy_->inserted(k);
    used_bytes_ += stride;
}

Status ExpertStore::fetch(int layer, int expert, ExpertRef *out) {
    auto bank = banks_.find(layer);
    if (bank == banks_.end()) return format_error("layer " + std::to_string(layer) + " has no expert bank");
    if (expert < 0 || expert >= bank->second.experts)
        return arg_error("expert " + std::to_string(expert) + " out of range for layer " + std::to_string(layer));
    const Key k = cache_key(layer, expert);
    {
        std::unique_lock<std::mutex> lk(mu_);
        usage_[k]++;
        st_.fetches++;
        policy_->access(k);
        if (auto it = cache_.find(k); it != cache_.end()) {
            st_.demand_hits++;
            *out = it->second;
            return Status::ok();
        }
        if (auto it = inflight_.find(k); it != inflight_.end()) {
            std::shared_ptr<Inflight> wait = it->second;
            if (!wait->done) {
                const double t0 = now_s();
                if (pool_) pool_->note_waiting(+1);
                cv_done_.wait(lk, [&] { return wait->done; });
                if (pool_) pool_->note_waiting(-1);
                st_.io_wait_seconds += now_s() - t0;
            }
            if (auto again = inflight_.find(k); again != inflight_.end() && again->second == wait) inflight_.erase(again);
            release_locked(*wait);
            if (!wait->st) return wait->st;
            st_.readahead_hits++;
            if (wait->guess) {
                st_.guesses_used++;
                note_guess_locked(true);
            }
            *out = wait->ref;
            insert_locked(k, wait->ref);
            return Status::ok();
        }
        st_.sync_reads++;
    }
    const double t0 = now_s();
    ExpertRef ref;
    if (pool_) pool_->note_waiting(+1);
    Status s = read_sync(layer, expert, &ref);
    if (pool_) pool_->note_waiting(-1);
    std::lock_guard<std::mutex> lk(mu_);
    st_.io_wait_seconds += now_s() - t0;
    if (!s) return s;
    insert_locked(k, ref);
    *out = std::move(ref);
    return Status::ok();
}

void ExpertStore::release_locked(Inflight &inf) {
    if (inf.counted) {
        inflight_bytes_ -= (uint64_t)geom_.stride;
        inf.counted = false;
    }
}

void ExpertStore::landed(Key k, const std::shared_ptr<Inflight> &inf, RecordBytes bytes, ssize_t result) {
    const int layer = (int)(k >> 32), expert = (int)(uint32_t)k;
    const Bank &b = banks_.at(layer);
    Status s;
    ExpertRef ref;
    const bool cancelled = result == -ECANCELED;
    if (!cancelled) {
        if (result == -EINVAL && b.direct.is_open()) {
            // O_DIRECT refused on read: the buffered descriptor, here.
            s = b.buffered.pread_all(bytes.get(), (size_t)b.stride, (uint64_t)expert * (uint64_t)b.stride);
            if (s) {
                result = b.stride;
                std::lock_guard<std::mutex> lk(mu_);
                st_.direct_io = false;
            }
        }
        if (result < 0)
            s = io_error(where(b.buffered, layer, expert) + ": read failed: " + std::strerror((int)-result));
        else if (result < b.stride)
            s = io_error(where(b.buffered, layer, expert) + ": short read: wanted " + std::to_string(b.stride) +
                         " bytes at offset " + std::to_string((uint64_t)expert * (uint64_t)b.stride) + ", file has " +
                         std::to_string(b.buffered.size()));
        else
            s = validate(layer, expert, std::move(bytes), &ref);
    } else {
        s = io_error(where(b.buffered, layer, expert) + ": read cancelled");
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        note_io_locked(-1);
        if (!cancelled) {
            if (result >= b.stride) {
                st_.reads++;
                layer_reads_[(int)(k >> 32)]++;
                st_.bytes_read += (uint64_t)b.stride;
            }
        }
        inf->st = s;
        inf->ref = std::move(ref);
        inf->done = true;
        if (inf->orphan) {
            // Nobody will fetch it: its buffer goes back now, not at the
            // next layer's clean-up. (Its guess was scored when orphaned.)
            st_.prefetch_wasted++;
            release_locked(*inf);
            inf->ref.reset();
        }
    }
    cv_done_.notify_all();
}

void ExpertStore::prefetch(int layer, const std::vector<int> &experts, bool speculative) {
    // With a fault-injection hook installed (tests only), every read goes
    // through File's hooked path: the read queues call the kernel directly.
    if (!queue_ || io_fault_hook()) return;
    auto bank = banks_.find(layer);
    if (bank == banks_.end()) return;
    std::vector<std::unique_ptr<ReadJob>> cancelled;
    std::vector<std::unique_ptr<ReadJob>> jobs;
    {
        std::lock_guard<std::mutex> lk(mu_);
        // Landed read-ahead for layers already passed will never be used.
        for (auto it = inflight_.begin(); it != inflight_.end();) {
            const int l = (int)(it->first >> 32);
            if (it->second->done && l != layer && l != layer - 1) {
                st_.prefetch_wasted++;
                if (it->second->guess) note_guess_locked(false);
                release_locked(*it->second);
                it = inflight_.erase(it);
            } else {
                ++it;
            }
        }
        if (!speculative) {
            // The router has decided this layer: guesses it did not pick are
            // stale. Queued ones are withdrawn; ones in flight are orphaned
            // and free their buffer the moment they land. Nobody blocks.
            auto picked = [&](int e) { return std::find(experts.begin(), experts.end(), e) != experts.end(); };
            for (auto it = inflight_.begin(); it != inflight_.end();) {
                if ((int)(it->first >> 32) == layer && it->second->guess && !picked((int)(uint32_t)it->first)) {
                    note_guess_locked(false);
                    if (it->second->done) {
                        st_.prefetch_wasted++;
                        release_locked(*it->second);
                    } else {
                        it->second->orphan = true;
                    }
                    it = inflight_.erase(it);
                } else {
                    ++it;
                }
            }
        } else if (guess_score_ < 0.5 && reads_running_ > 0) {
            // Guesses that have lately been wrong more often than right
            // (a router that does not predict the next one, or route
            // replay) only use a disk that would otherwise idle: each
            // wrong one costs a record of bandwidth, and one in flight
            // cannot be recalled. The idle ones keep the score current.
            return;
        }
        const int64_t stride = bank->second.stride;
        for (int e : experts) {
            if (e < 0 || e >= bank->second.experts) continue;
            const Key k = cache_key(layer, e);
            if (cache_.count(k) || inflight_.count(k)) continue;
            if (inflight_bytes_ + (uint64_t)stride > opt_.prefetch_bytes) break;  // allowance spent
            RecordBytes bytes =
                pool_ && (size_t)stride <= pool_->slot_bytes() ? pool_->take() : record_alloc((size_t)stride);
            if (!bytes) break;
            auto inf = std::make_shared<Inflight>();
            inf->guess = speculative;
            inf->counted = true;
            inflight_bytes_ += (uint64_t)stride;
            inflight_.emplace(k, inf);
            st_.prefetched++;
            if (speculative) st_.guesses++;
            note_io_locked(+1);
            auto job = std::make_unique<ReadJob>();
            const Bank &b = bank->second;
            job->fd = b.direct.is_open() ? b.direct.fd() : b.buffered.fd();
            job->buf = bytes.get();
            job->len = (size_t)stride;
            job->off = (uint64_t)e * (uint64_t)stride;
            job->guess = speculative;
            job->tag = k;
            auto holder = std::make_shared<RecordBytes>(std::move(bytes));
            job->done = [this, k, inf, holder](ssize_t r) { landed(k, inf, std::move(*holder), r); };
            jobs.push_back(std::move(job));
        }
    }
    for (auto &j : jobs) queue_->push(std::move(j));
    if (!speculative) {
        // Queued guesses for this layer that the router did not pick.
        auto picked = [&](int e) { return std::find(experts.begin(), experts.end(), e) != experts.end(); };
        cancelled = queue_->cancel_guesses([&](const ReadJob &j) {
            return (int)(j.tag >> 32) == layer && !picked((int)(uint32_t)j.tag);
        });
    }
    if (!cancelled.empty()) {
        std::lock_guard<std::mutex> lk(mu_);
        st_.guesses_dropped += cancelled.size();
    }
    for (auto &j : cancelled) j->done(-ECANCELED);
}

Status ExpertStore::preload(const std::vector<std::pair<int, int>> &order, const std::vector<uint32_t> &counts) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        for (size_t i = 0; i < order.size() && i < counts.size(); i++)
            policy_->seed(cache_key(order[i].first, order[i].second), counts[i]);
    }
    // A hotlist asked for is loaded whole at open, into cold slots as need be.
    {
        std::lock_guard<std::mutex> lk(mu_);
        cold_growth_ = true;
    }
    struct Restore {
        ExpertStore *s;
        ~Restore() {
            std::lock_guard<std::mutex> lk(s->mu_);
            s->cold_growth_ = false;
        }
    } restore{this};
    for (const auto &[l, e] : order) {
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (used_bytes_ + (uint64_t)geom_.stride > cap_bytes_) break;
            if (cache_.count(cache_key(l, e))) continue;
        }
        auto b = banks_.find(l);
        if (b == banks_.end() || e < 0 || e >= b->second.experts) continue;  // unknown: skip
        ExpertRef ref;
        SLUICE_TRY(read_sync(l, e, &ref));
        std::lock_guard<std::mutex> lk(mu_);
        insert_locked(cache_key(l, e), ref);
    }
    return Status::ok();
}

ExpertStats ExpertStore::stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    ExpertStats s;
    s.reads = st_.reads;
    s.bytes_read = st_.bytes_read;
    s.cache_hits = st_.demand_hits;
    s.cache_misses = st_.fetches - st_.demand_hits;
    return s;
}

StoreStats ExpertStore::store_stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    StoreStats s = st_;
    s.cache_bytes_used = used_bytes_;
    s.cache_entries = cache_.size();
    s.cache_capacity = cap_bytes_;
    if (pool_) {
        const RecordPool::Stats ps = pool_->stats();
        s.pool_fallbacks = ps.fallbacks;
        s.bytes_released = ps.bytes_released;
        s.cold_takes = ps.cold_takes;
        s.warmed_bytes = ps.warmed_bytes;
        s.warm_seconds = ps.warm_seconds;
    }
    if (reads_running_ > 0) s.read_seconds += now_s() - busy_since_;
    return s;
}

uint64_t ExpertStore::set_cache_capacity(uint64_t bytes) {
    const uint64_t stride = (uint64_t)geom_.stride;
    if (stride == 0) return 0;
    bytes = std::min(bytes, opt_.cache_bytes) / stride * stride;
    // Evicted records are dropped after the lock: their buffers go back to
    // the pool, which returns the memory (madvise) outside the store's lock.
    std::vector<ExpertRef> evicted;
    uint64_t freed = 0;
    {
        std::lock_guard<std::mutex> lk(mu_);
        cap_bytes_ = bytes;
        // Slots that keep their memory: the cache, the read-ahead allowance
        // and the record in use outside both (as at init).
        if (pool_) freed += pool_->set_resident_limit((size_t)((bytes + opt_.prefetch_bytes) / stride + 1));
        auto pinned = [&](Key q) {
            auto it = cache_.find(q);
            return it != cache_.end() && it->second.use_count() > 1;
        };
        while (used_bytes_ > cap_bytes_) {
            Key v;
            if (!policy_->victim(pinned, &v)) break;  // the rest is in use: it goes at the next insert or call
            policy_->erased(v);
            auto it = cache_.find(v);
            evicted.push_back(std::move(it->second));
            cache_.erase(it);
            used_bytes_ -= stride;
        }
    }
    if (pool_) {
        const uint64_t before = pool_->bytes_released();
        evicted.clear();
        freed += pool_->bytes_released() - before;
    }
    return freed;
}

int64_t ExpertStore::hold_capacity() const {
    std::lock_guard<std::mutex> lk(mu_);
    // Held records are pinned in the cache; records read ahead wait outside
    // it, in their own allowance, until fetched. So a layer whose records
    // all fit beside each other can be held whole: each insert still finds
    // an unpinned victim (another layer's record).
    return geom_.stride > 0 ? (int64_t)(cap_bytes_ / (uint64_t)geom_.stride) : 0;
}

void ExpertStore::set_holding(bool on) {
    std::lock_guard<std::mutex> lk(mu_);
    holding_ = on;
}

uint64_t ExpertStore::layer_reads(int layer) const {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = layer_reads_.find(layer);
    return it == layer_reads_.end() ? 0 : it->second;
}

uint64_t ExpertStore::cache_capacity() const {
    std::lock_guard<std::mutex> lk(mu_);
    return cap_bytes_;
}

std::vector<std::pair<std::pair<int, int>, uint32_t>> ExpertStore::usage() const {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<std::pair<std::pair<int, int>, uint32_t>> v;
    for (const auto &[k, n] : usage_) v.push_back({{(int)(k >> 32), (int)(uint32_t)k}, n});
    return v;
}

}  // namespace sluice
