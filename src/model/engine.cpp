#include "model/engine.h"

#include "common/checked_file.h"

#include "runtime/hotlist.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

namespace sluice {

Status Engine::open(const std::string &dir, const EngineOptions &opt) {
    opt_ = opt;
    if (opt_.prefill_chunk < 1) opt_.prefill_chunk = 64;
    if (opt_.max_context < 1) opt_.max_context = 4096;
    const char *why = nullptr;
    auto progress = [&](const char *stage, double f) {
        if (opt_.progress) opt_.progress(stage, f);
    };
    if (!select_kernels(opt_.backend, &ops_.k, &why)) return arg_error(why);
    progress("manifest", -1);
    SLUICE_TRY(c_.open(dir));
    const ModelConfig &cfg = c_.config();
    moe_ordinal_.assign((size_t)cfg.n_layers, -1);
    for (int L = 0, m = 0; L < cfg.n_layers; L++)
        if (cfg.is_moe_layer(L)) moe_ordinal_[(size_t)L] = m++;
    if (opt_.metadata_only) return Status::ok();  // no trunk, pool or store: nothing can evaluate
    if (opt_.verify_records) {
        progress("verify", -1);
        SLUICE_TRY(c_.check_integrity());
    }
    if (cfg.n_experts > 0) {
        const int64_t stride = c_.manifest().banks.begin()->second.bytes / cfg.n_experts;
        const ExpertQuant &eq = c_.manifest().eq;
        SLUICE_TRY(geom_.init(cfg.moe_inter, cfg.expert_in(), eq.stages, eq.entries, eq.index_bits, stride));
    }
    // The tower is read only when images are asked for and the container
    // has one (VISION.md §1.4); its geometry is checked first.
    uint64_t vision_bytes = 0;
    const bool want_tower = opt_.vision && vision::has_tower(c_.manifest());
    if (want_tower) {
        SLUICE_TRY(vision::load_vision_config(c_.dir(), cfg, &vcfg_));
        SLUICE_TRY(vision::check_vision_config(vcfg_, cfg, c_.dir() + "/vision.json"));
        vision_bytes = vision::vision_plan_bytes(c_.manifest(), vcfg_);
    }
    // The plan refuses an under-floor budget before anything large is loaded.
    MemPaths paths;
    paths.cgroup_root = opt_.cgroup_root;
    paths.proc_cgroup = opt_.proc_cgroup;
    // Threads whose stacks the plan counts, as this engine starts them: the
    // caller and its n_threads - 1 pool workers, the read queue's (one
    // io_uring reaper, or io_depth readers; none for synchronous reads),
    // the cache's warming thread and the pressure watcher. On 2 cores with
    // io_uring that is 5; the plan once counted 13 (8 readers always).
    const int readers = opt_.io_depth > 0 ? read_queue_threads(opt_.io_engine, opt_.io_depth) : 0;
    const int threads = std::max(1, opt_.n_threads) + readers + 2;
    SLUICE_TRY(plan_memory(c_.manifest(), opt_.budget, opt_.max_context, opt_.prefill_chunk, paths, &plan_,
                           vision_bytes, threads, opt_.checkpoint_bytes, opt_.prefill_wave, opt_.session_bytes,
                           opt_.replay_log));
    wave_tokens_ = std::max<int64_t>(1, plan_.wave_tokens);
    if (const uint64_t one = checkpoint_bytes(cfg)) ckpt_capacity_ = (size_t)(plan_.checkpoints / one);
    if (plan_.replay_log > 0) {
        log_cap_ = kReplayLogPositions;
        kda_log_.assign((size_t)cfg.n_layers, {});
        const size_t each = (size_t)kReplayLogPositions * (size_t)replay_log_entry_floats(cfg);
        for (int L = 0; L < cfg.n_layers; L++)
            if (cfg.is_kda[(size_t)L]) kda_log_[(size_t)L].resize(each);
    }
    progress("trunk", -1);
    SLUICE_TRY(load_weights(c_, &w_));
    if (want_tower) {
        progress("vision", -1);
        auto t = std::make_unique<vision::VisionTower>();
        SLUICE_TRY(vision::load_tower(c_, vcfg_, t.get()));
        tower_ = std::move(t);
    }
    // Before the pool and the store exist: their stacks and buffers are not
    // the trunk, and the cache is allowed to be evicted.
    if (opt_.lock_memory) SLUICE_TRY(lock_memory());
    pool_ = std::make_unique<ThreadPool>(opt_.n_threads, opt_.cpus);
    ops_.pool = pool_.get();
    StoreOptions so;
    // The minimum cache of the floor (2 x top-k records) is shared: without
    // a cache it is the read-ahead allowance; with one, read-ahead lands in
    // the cache and the allowance is top-k records, or all of it once the
    // cache is at least as large: the allowance is where the next layer's
    // lookahead guesses wait, and with room for only one layer's reads
    // they never went out (585 guesses for 6,656 fetches in 32 tokens on
    // the 48B shape; with the room 5,826, 79 % used: LEARNED, 2026-12-05).
    const bool roomy = opt_.use_cache && plan_.cache >= 2 * plan_.min_cache;
    so.cache_bytes = opt_.use_cache ? plan_.cache - (roomy ? plan_.min_cache : plan_.min_cache / 2) : 0;
    // Never more cache than there are experts: a tiny model under a large
    // budget planned (and pre-faulted) gigabytes for kilobytes of records.
    uint64_t expert_total = 0;
    for (const auto &[L, b] : c_.manifest().banks) expert_total += (uint64_t)b.bytes;
    so.cache_bytes = std::min(so.cache_bytes, expert_total);
    so.prefetch_bytes = opt_.use_cache && !roomy ? plan_.min_cache / 2 : plan_.min_cache;
    so.io_depth = opt_.io_depth;
    so.io_engine = opt_.io_engine;
    so.policy = opt_.cache_policy;
    so.direct = opt_.direct_io;
    so.verify_crc = opt_.verify_records;
    experts_ = std::make_unique<ExpertStore>(c_, geom_, so);
    progress("cache", -1);
    SLUICE_TRY(experts_->init());
    if (opt_.use_cache && opt_.preload_hotlist && cfg.n_experts > 0) {
        std::string path = opt_.hotlist.empty() ? c_.dir() + "/usage.waste" : opt_.hotlist;
        std::vector<HotEntry> hot;
        progress("hotlist", -1);
        Status hs = load_hotlist(path, &hot);
        if (hs) {
            std::vector<std::pair<int, int>> order;
            std::vector<uint32_t> counts;
            for (const HotEntry &h : hot) {
                order.push_back({h.layer, h.expert});
                counts.push_back(h.hits);
            }
            SLUICE_TRY(experts_->preload(order, counts));
        } else if (!opt_.hotlist.empty()) {
            return hs;  // a named hotlist must load; the default one is optional
        }
    }
    if (opt_.pressure_watch && so.cache_bytes > 0 && geom_.stride > 0) {
        PressureOptions po;
        po.reserve = opt_.pressure_reserve;
        po.poll_ms = opt_.pressure_poll_ms;
        po.source = opt_.memory_source;
        po.paths = paths;
        watch_ = std::make_unique<PressureWatch>(experts_.get(), (uint64_t)geom_.stride, plan_.ram_limit, po);
    }
    init_rope();
    reset();
    progress("ready", 1.0);
    return Status::ok();
}

Status Engine::lock_memory() const {
    // mlockall locks what is mapped now: the trunk just loaded, plus the
    // code and data of the process. Checked against the limit first so the
    // refusal names the numbers instead of a bare EPERM / ENOMEM.
    struct rlimit rl;
    const uint64_t need = w_.resident_bytes;
    auto mib = [](uint64_t b) { return std::to_string(b / 1048576) + "." + std::to_string(b % 1048576 * 10 / 1048576); };
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (uint64_t)rl.rlim_cur < need)
        return Status(SLUICE_E_NOMEM, "mlock: the trunk needs " + mib(need) + " MiB locked but RLIMIT_MEMLOCK allows " +
                                          mib((uint64_t)rl.rlim_cur) +
                                          " MiB (raise it with `ulimit -l` or /etc/security/limits.conf, or run "
                                          "without mlock)");
    if (mlockall(MCL_CURRENT) != 0) {
        const int e = errno;
        return Status(SLUICE_E_NOMEM,
                      std::string("mlock: mlockall refused (") + std::strerror(e) + "): RLIMIT_MEMLOCK is " +
                          (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                               ? mib((uint64_t)rl.rlim_cur) + " MiB"
                               : std::string("unlimited")) +
                          " and the process maps more than that (raise it with `ulimit -l`, or run without mlock)");
    }
    return Status::ok();
}

Status Engine::save_usage(const std::string &path) const {
    // Never over the container's own files; its hotlist (usage.waste,
    // FORMAT.md section 10) is the one file a run may write there.
    if (std::string why = output_inside_reason(path, c_.dir(), "the model", "usage.waste"); !why.empty())
        return io_error(why + " (only its hotlist, usage.waste, may be written there)");
    std::vector<HotEntry> v;
    for (const auto &[le, n] : experts_->usage()) v.push_back({le.first, le.second, n, 0});
    return save_hotlist(path, tokens_evaluated_, v);
}

void Engine::init_rope() {
    const ModelConfig &cfg = c_.config();
    const RopeConfig &rc = cfg.rope;
    mla_scale_ = 1.0f / std::sqrt((float)(cfg.d_nope + cfg.d_rope));
    if (!rc.enabled || cfg.d_rope == 0) return;
    const int half = cfg.d_rope / 2;
    rope_freq_.resize((size_t)half);
    // Frequencies in double, stored as f32 (MODEL.md §5.3).
    double lo = 0, hi = 0;
    if (rc.yarn) {
        auto corr = [&](double b) {
            return cfg.d_rope * std::log(rc.original_max_pos / (2 * M_PI * b)) / (2 * std::log(rc.theta));
        };
        lo = std::max(std::floor(corr(rc.beta_fast)), 0.0);
        hi = std::min(std::ceil(corr(rc.beta_slow)), (double)(cfg.d_rope - 1));
        if (lo == hi) hi += 0.001;
    }
    for (int j = 0; j < half; j++) {
        double f = std::pow(rc.theta, -2.0 * j / cfg.d_rope);
        if (rc.yarn) {
            double ramp = std::clamp((j - lo) / (hi - lo), 0.0, 1.0);
            f = f * ramp / rc.factor + f * (1 - ramp);
        }
        rope_freq_[(size_t)j] = (float)f;
    }
    if (rc.yarn && rc.mscale_all_dim != 0) {
        float m = (float)(0.1 * rc.mscale_all_dim * std::log(rc.factor) + 1.0);
        mla_scale_ *= m * m;
    }
}

void Engine::reset() {
    const ModelConfig &cfg = c_.config();
    pos_ = 0;
    tokens_.clear();
    pending_.clear();
    due_.clear();
    log_lo_ = log_hi_ = 0;
    drop_checkpoints_after(0);
    kda_.assign((size_t)cfg.n_layers, {});
    mla_.assign((size_t)cfg.n_layers, {});
    kda_before_.assign((size_t)cfg.n_layers, {});
    for (int L = 0; L < cfg.n_layers; L++) {
        if (cfg.is_kda[(size_t)L]) {
            const size_t H = (size_t)cfg.kda_heads, D = (size_t)cfg.kda_dim, K = (size_t)cfg.conv_kernel;
            kda_[(size_t)L].S.assign(H * D * D, 0.0f);
            kda_[(size_t)L].ring.assign(3 * H * D * (K - 1), 0.0f);
            kda_before_[(size_t)L] = kda_[(size_t)L];
        } else {
            mla_[(size_t)L].len = 0;
            mla_[(size_t)L].cache.clear();
        }
    }
}

Status Engine::embed(const int32_t *tokens, int64_t n, float *X) {
    const int64_t d = c_.config().hidden;
    const int64_t rows = (int64_t)img_rows_.size() / d;
    for (int64_t t = 0; t < n; t++) {
        // The splice (VISION.md §6.3): a pad token takes the next queued
        // image row verbatim while rows remain; otherwise the table row.
        if (tower_ && !no_splice_ && tokens[t] == vcfg_.pad && splice_cursor_ < rows) {
            std::copy_n(img_rows_.data() + splice_cursor_ * d, d, X + t * d);
            splice_cursor_++;
            tokens_.push_back(-1);  // an image row: the id alone cannot reproduce it
            continue;
        }
        SLUICE_TRY(c_.read_row_f32(w_.embed, tokens[t], X + t * d));
        tokens_.push_back(tokens[t]);
    }
    return Status::ok();
}

void Engine::attn_res(const std::vector<const float *> &vs, const float *norm, const float *proj, float *out) const {
    // AR(v; n, π) = Σ_i softmax(score)_i · v_i (MODEL.md §8.1). The
    // candidates and the result are f32; the norms, scores, softmax and the
    // weighted sum are carried in double and rounded once. A score is a
    // d-term sum whose f32 error moves the mix by the same amount, relative:
    // in f32 this block was, with RMSNorm, the largest share of the engine's
    // distance to the float64 oracle on K3 shapes (docs/LEARNED.md,
    // 2026-12-02). O(m·d) per token, far off the hot path.
    const int64_t d = c_.config().hidden;
    const double eps = c_.config().eps;
    std::vector<double> score(vs.size());
    for (size_t i = 0; i < vs.size(); i++) {
        const float *v = vs[i];
        double ss = 0.0;
        for (int64_t j = 0; j < d; j++) ss += (double)v[j] * (double)v[j];
        const double r = 1.0 / std::sqrt(ss / (double)d + eps);
        double s = 0.0;
        for (int64_t j = 0; j < d; j++) s += (((double)v[j] * r) * (double)norm[j]) * (double)proj[j];
        score[i] = s;
    }
    const double mx = *std::max_element(score.begin(), score.end());
    double sum = 0.0;
    for (auto &s : score) sum += (s = std::exp(s - mx));
    for (auto &s : score) s /= sum;
    for (int64_t j = 0; j < d; j++) {
        double acc = 0.0;
        for (size_t i = 0; i < vs.size(); i++) acc += score[i] * (double)vs[i][j];
        out[j] = (float)acc;
    }
}

Status Engine::eval(const int32_t *tokens, int64_t n, float *logits, bool all) {
    const ModelConfig &cfg = c_.config();
    if (n <= 0) return arg_error("no tokens to evaluate");
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= cfg.vocab)
            return Status(SLUICE_E_RANGE, "token " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                                              " is outside the vocabulary [0, " + std::to_string(cfg.vocab) + ")");
    if ((int64_t)n_past() + n > opt_.max_context)
        return Status(SLUICE_E_RANGE, "context full: " + std::to_string(n_past()) + " + " + std::to_string(n) +
                                          " tokens exceed max_context " + std::to_string(opt_.max_context));
    if (pending_.empty()) return eval_here(tokens, n, logits, all);
    // Every row's logits, or queued images (a pending pad token is text, a
    // new one may take an image row): the rewind's tokens first, alone.
    if (all || !img_tokens_.empty()) {
        SLUICE_TRY(settle());
        return eval_here(tokens, n, logits, all);
    }
    // One wave for the rewind's tokens and these: each routed record read
    // once for both. The same numbers: a wave computes what single steps do.
    return eval_pending(tokens, n, logits);
}

Status Engine::settle() { return pending_.empty() ? Status::ok() : eval_pending(nullptr, 0, nullptr); }

Status Engine::eval_pending(const int32_t *tokens, int64_t n, float *logits) {
    std::vector<int32_t> again;
    again.swap(pending_);
    std::vector<int32_t> joined = again;
    joined.insert(joined.end(), tokens, tokens + n);
    const int from = pos_;
    // A pad token among them is text; no image is queued when more tokens
    // follow (eval), so nothing else changes.
    no_splice_ = true;
    Status st;
    try {
        st = eval_here(joined.data(), (int64_t)joined.size(), logits, false);
    } catch (...) {
        no_splice_ = false;
        again.swap(pending_);
        throw;
    }
    no_splice_ = false;
    if (!st) {
        again.swap(pending_);  // rolled back to before this call, the rewind's tokens still to come
        return st;
    }
    // These positions were reported when first evaluated.
    if (record_routes_) routes_.erase(routes_.lower_bound(from), routes_.lower_bound(from + (int)again.size()));
    return st;
}

Status Engine::eval_here(const int32_t *tokens, int64_t n, float *logits, bool all) {
    const ModelConfig &cfg = c_.config();
    // Snapshot what a part-way failure (an expert read error, a NaN, an
    // allocation) would leave changed: the KDA states (copied into buffers
    // sized at reset), the MLA cache lengths (append-only: truncating
    // restores them) and the position.
    const int pos0 = pos_;
    const std::vector<int> due0 = due_;
    std::vector<int> mla_len0(mla_.size());
    for (size_t L = 0; L < mla_.size(); L++) mla_len0[L] = mla_[L].len;
    for (size_t L = 0; L < kda_.size(); L++) {
        std::copy(kda_[L].S.begin(), kda_[L].S.end(), kda_before_[L].S.begin());
        std::copy(kda_[L].ring.begin(), kda_[L].ring.end(), kda_before_[L].ring.begin());
    }
    auto roll_back = [&] {
        pos_ = pos0;
        due_ = due0;
        // Slots of earlier positions may hold this call's: none is trusted.
        log_lo_ = log_hi_ = pos0;
        tokens_.resize((size_t)pos0);
        drop_checkpoints_after(pos0);
        const int64_t row = (int64_t)cfg.kv_lora + cfg.d_rope;
        for (size_t L = 0; L < mla_.size(); L++) {
            mla_[L].len = mla_len0[L];
            mla_[L].cache.resize((size_t)(mla_len0[L] * row));
        }
        for (size_t L = 0; L < kda_.size(); L++) {
            std::copy(kda_before_[L].S.begin(), kda_before_[L].S.end(), kda_[L].S.begin());
            std::copy(kda_before_[L].ring.begin(), kda_before_[L].ring.end(), kda_[L].ring.begin());
        }
    };
    Status st;
    try {
        st = eval_chunks(tokens, n, logits, all);
    } catch (...) {
        roll_back();
        throw;
    }
    if (!st) {
        roll_back();
        routes_.clear();
    }
    return st;
}

}  // namespace sluice
