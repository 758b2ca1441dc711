// The C API: a thin, exception-free shell over the engine.
#include "sluice/sluice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cerrno>

#include "api/ctx.h"
#include "api/fingerprint.h"
#include "common/checked_file.h"
#include "model/engine.h"
#include "runtime/cache_replay.h"
#include "runtime/disk_probe.h"
#include "runtime/memory_plan.h"
#include "synth/config_plan.h"
#include "common/cpu_list.h"
#include "runtime/route_trace.h"
#include "vision/config.h"

namespace {

using sluice::api::fail;
using sluice::api::need_open;

void copy_str(char *dst, size_t cap, const std::string &s) {
    size_t n = std::min(cap - 1, s.size());
    std::memcpy(dst, s.data(), n);
    dst[n] = '\0';
}

}  // namespace

extern "C" {

void sluice_config_default(sluice_config *cfg) {
    if (!cfg) return;
    std::memset(cfg, 0, sizeof(*cfg));
    cfg->struct_size = sizeof(sluice_config);
    cfg->n_threads = 0;
    cfg->backend = SLUICE_BACKEND_AUTO;
    cfg->verify_records = 0;
    cfg->prefill_chunk = 0;
    cfg->max_context = 0;
}

const char *sluice_status_name(sluice_status s) {
    switch (s) {
        case SLUICE_OK: return "ok";
        case SLUICE_E_ARG: return "invalid argument";
        case SLUICE_E_IO: return "I/O error";
        case SLUICE_E_FORMAT: return "malformed container";
        case SLUICE_E_UNSUPPORTED: return "unsupported configuration";
        case SLUICE_E_NOMEM: return "out of memory";
        case SLUICE_E_STATE: return "invalid state";
        case SLUICE_E_RANGE: return "out of range";
        case SLUICE_E_BUSY: return "busy";
    }
    return "unknown status";
}

// Takes the container's advisory lock: exclusive for exclusive_open, else
// shared, so an exclusive holder and everyone else exclude each other. A
// filesystem without flock only matters to exclusive_open.
static sluice_status take_lock(sluice_ctx *ctx, const std::string &dir, bool exclusive) {
    const std::string m = dir + "/manifest.json";
    // O_NONBLOCK: a FIFO in the manifest's place must not hang the open;
    // only a regular file is locked (the open that follows refuses the rest
    // and names what is wrong).
    const int fd = ::open(m.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return SLUICE_OK;
    struct stat sb;
    if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        ::close(fd);
        return SLUICE_OK;
    }
    if (::flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
        const int e = errno;
        ::close(fd);
        if (e == EWOULDBLOCK)
            return fail(ctx, SLUICE_E_BUSY,
                        dir + (exclusive ? ": the container is open in another process or context (exclusive open refused)"
                                         : ": another process or context holds the container exclusively (opened "
                                           "with exclusive open)"));
        if (exclusive)
            return fail(ctx, SLUICE_E_IO, dir + ": cannot lock " + m + " for an exclusive open: " + std::strerror(e));
        return SLUICE_OK;
    }
    ctx->lock_fd = fd;
    return SLUICE_OK;
}

sluice_status sluice_open(const char *path, const sluice_config *cfg_in, sluice_ctx **out) {
    if (!out) return SLUICE_E_ARG;
    *out = nullptr;
    sluice_ctx *ctx = new (std::nothrow) sluice_ctx();
    if (!ctx) return SLUICE_E_NOMEM;
    *out = ctx;
    if (!path || !*path) return fail(ctx, SLUICE_E_ARG, "sluice_open: path is empty");
    sluice_config cfg;
    sluice_config_default(&cfg);
    if (cfg_in) {
        if (cfg_in->struct_size < sizeof(uint32_t) || cfg_in->struct_size > sizeof(sluice_config))
            return fail(ctx, SLUICE_E_ARG, "sluice_open: config struct_size is not a known size");
        std::memcpy(&cfg, cfg_in, cfg_in->struct_size);
    }
    sluice::EngineOptions opt;
    if (cfg.n_threads < 0 || cfg.n_threads > 1024)
        return fail(ctx, SLUICE_E_ARG, "sluice_open: n_threads must be in [0, 1024]");
    opt.n_threads = cfg.n_threads > 0 ? cfg.n_threads : (int)std::max(1u, std::thread::hardware_concurrency());
    if (cfg.backend < SLUICE_BACKEND_AUTO || cfg.backend > SLUICE_BACKEND_NEON)
        return fail(ctx, SLUICE_E_ARG, "sluice_open: unknown backend");
    opt.backend = (sluice_backend)cfg.backend;
    opt.verify_records = cfg.verify_records != 0;
    if (cfg.prefill_chunk < 0 || cfg.prefill_chunk > 4096)
        return fail(ctx, SLUICE_E_ARG, "sluice_open: prefill_chunk must be in [0, 4096]");
    opt.prefill_chunk = cfg.prefill_chunk > 0 ? cfg.prefill_chunk : 64;
    if (cfg.max_context < 0 || cfg.max_context > (1 << 24))
        return fail(ctx, SLUICE_E_ARG, "sluice_open: max_context must be in [0, 2^24]");
    opt.max_context = cfg.max_context > 0 ? cfg.max_context : 4096;
    opt.budget = cfg.budget_bytes;
    opt.use_cache = cfg.no_cache == 0;
    if (cfg.io_threads < -1 || cfg.io_threads > 64)
        return fail(ctx, SLUICE_E_ARG, "sluice_open: io_threads must be in [-1, 64]");
    if (cfg.io_depth < 0 || cfg.io_depth > 256)
        return fail(ctx, SLUICE_E_ARG, "sluice_open: io_depth must be in [0, 256]");
    // -1 io_threads: synchronous reads. Otherwise reads in flight: io_depth,
    // else io_threads (its meaning before io_depth existed), else 8: the
    // depth at which random record-sized O_DIRECT reads reached the disk's
    // best rate here (bench/disk_probe, docs/PERF.md).
    opt.io_depth = cfg.io_threads < 0 ? 0 : cfg.io_depth > 0 ? cfg.io_depth : cfg.io_threads > 0 ? cfg.io_threads : 8;
    if (cfg.io_engine < SLUICE_IO_AUTO || cfg.io_engine > SLUICE_IO_THREADS)
        return fail(ctx, SLUICE_E_ARG, "sluice_open: unknown io_engine");
    opt.io_engine = cfg.io_engine == SLUICE_IO_URING     ? sluice::IoEngine::uring
                    : cfg.io_engine == SLUICE_IO_THREADS ? sluice::IoEngine::threads
                                                         : sluice::IoEngine::automatic;
    if (cfg.cache_policy) {
        if (!sluice::make_cache_policy(cfg.cache_policy, 1))
            return fail(ctx, SLUICE_E_ARG, std::string("sluice_open: unknown cache_policy \"") + cfg.cache_policy +
                                               "\" (expected " + sluice::cache_policy_names() + ")");
        opt.cache_policy = cfg.cache_policy;
    }
    opt.readahead = cfg.no_readahead == 0;
    opt.lookahead = cfg.no_lookahead == 0;
    opt.direct_io = cfg.no_direct_io == 0;
    opt.preload_hotlist = cfg.no_hotlist == 0;
    if (cfg.hotlist) opt.hotlist = cfg.hotlist;
    if (cfg.cgroup_root) opt.cgroup_root = cfg.cgroup_root;
    opt.vision = cfg.vision != 0;
    if (cfg.cpus && *cfg.cpus) {
        std::string why;
        if (!sluice::parse_cpu_list(cfg.cpus, &opt.cpus, &why) || !sluice::cpus_available(opt.cpus, &why))
            return fail(ctx, SLUICE_E_ARG, "sluice_open: cpus: " + why);
        if (cfg.n_threads == 0) opt.n_threads = (int)opt.cpus.size();  // one thread per CPU listed
    }
    opt.lock_memory = cfg.lock_memory != 0;
    if (cfg.prefill_wave < 0 || cfg.prefill_wave > (1 << 24))
        return fail(ctx, SLUICE_E_ARG, "sluice_open: prefill_wave must be in [0, 2^24]");
    opt.prefill_wave = cfg.prefill_wave;
    if (cfg.checkpoint_interval > (1 << 24))
        return fail(ctx, SLUICE_E_ARG, "sluice_open: checkpoint_interval must be at most 2^24");
    opt.checkpoint_interval = cfg.checkpoint_interval == 0 ? sluice::kCheckpointInterval
                              : cfg.checkpoint_interval < 0 ? 0
                                                            : cfg.checkpoint_interval;
    opt.checkpoint_bytes = cfg.checkpoint_bytes == 0 ? -1 : cfg.checkpoint_bytes < 0 ? 0 : cfg.checkpoint_bytes;
    if (cfg.session_bytes > (1ull << 50) && cfg.session_bytes != SLUICE_SESSION_BYTES_AUTO)
        return fail(ctx, SLUICE_E_ARG, "sluice_open: session_bytes must be at most 2^50 (or SLUICE_SESSION_BYTES_AUTO)");
    opt.session_bytes = cfg.session_bytes == SLUICE_SESSION_BYTES_AUTO ? sluice::kSessionBytesAuto : cfg.session_bytes;
    opt.replay_log = cfg.replay_log > 0;
    opt.metadata_only = cfg.metadata_only != 0;
    opt.pressure_watch = cfg.no_pressure_watch == 0;
    if (cfg.pressure_poll_ms < 0 || cfg.pressure_poll_ms > 60000)
        return fail(ctx, SLUICE_E_ARG, "sluice_open: pressure_poll_ms must be in [0, 60000]");
    opt.pressure_poll_ms = cfg.pressure_poll_ms;
    opt.pressure_reserve = cfg.pressure_reserve_bytes;
    if (cfg.memory_probe) {
        sluice_memory_probe_fn fn = cfg.memory_probe;
        void *user = cfg.memory_probe_user;
        opt.memory_source = [fn, user](sluice::MemStatus *s) {
            uint64_t avail = 0;
            if (!fn(user, &avail)) return false;
            *s = sluice::MemStatus{};
            s->have_meminfo = true;
            s->mem_available = avail;
            return true;
        };
    }
    if (cfg.progress) {
        sluice_progress_fn fn = cfg.progress;
        void *user = cfg.progress_user;
        opt.progress = [fn, user](const char *stage, double f) { fn(user, stage, f); };
    }
    if (sluice_status ls = take_lock(ctx, path, cfg.exclusive_open != 0)) return ls;
    sluice::Status st;
    try {
        st = ctx->engine.open(path, opt);
    } catch (const std::bad_alloc &) {
        return fail(ctx, SLUICE_E_NOMEM, std::string(path) + ": out of memory while loading");
    } catch (const std::exception &e) {
        return fail(ctx, SLUICE_E_IO, std::string(path) + ": " + e.what());
    }
    if (!st) return fail(ctx, st);
    ctx->opened = true;
    return SLUICE_OK;
}

void sluice_close(sluice_ctx *ctx) { delete ctx; }

const char *sluice_last_error(const sluice_ctx *ctx) {
    if (!ctx) return "no context (allocation failed)";
    return ctx->error.c_str();
}

// The forward pass, the store and the session need a full open.
static sluice_status need_model(sluice_ctx *ctx) {
    if (sluice_status s = need_open(ctx)) return s;
    if (ctx->engine.metadata_only())
        return fail(ctx, SLUICE_E_STATE, "the context was opened metadata-only (no trunk): it cannot evaluate");
    return SLUICE_OK;
}

int32_t sluice_n_vocab(const sluice_ctx *ctx) {
    return ctx && ctx->opened ? ctx->engine.config().vocab : 0;
}

int32_t sluice_n_past(const sluice_ctx *ctx) { return ctx && ctx->opened ? ctx->engine.n_past() : 0; }

sluice_status sluice_info_get(sluice_ctx *ctx, sluice_info *out) {
    if (sluice_status s = need_open(ctx)) return s;
    if (!out) return fail(ctx, SLUICE_E_ARG, "sluice_info_get: out is NULL");
    std::memset(out, 0, sizeof(*out));
    sluice::ModelSummary s = sluice::summarize(ctx->engine);
    copy_str(out->family, sizeof(out->family), s.family);
    copy_str(out->arch, sizeof(out->arch), s.arch);
    const sluice::ModelConfig &c = ctx->engine.config();
    out->n_layers = c.n_layers;
    out->n_kda_layers = s.n_kda;
    out->n_mla_layers = c.n_layers - s.n_kda;
    out->n_moe_layers = s.n_moe;
    out->n_experts = c.n_experts;
    out->top_k = c.top_k;
    out->n_shared_experts = c.n_shared;
    out->hidden = c.hidden;
    out->vocab = c.vocab;
    out->attn_res_block = c.attn_res_block;
    out->total_params = s.total_params;
    out->active_params = s.active_params;
    out->trunk_bytes = s.trunk_bytes;
    out->expert_bytes = s.expert_bytes;
    copy_str(out->trunk_formats, sizeof(out->trunk_formats), s.trunk_formats);
    copy_str(out->expert_format, sizeof(out->expert_format), s.expert_format);
    const sluice::ExpertQuant &eq = ctx->engine.container().manifest().eq;
    out->expert_stages = eq.stages;
    out->expert_entries = eq.entries;
    out->expert_index_bits = eq.index_bits;
    copy_str(out->backend, sizeof(out->backend), ctx->engine.kernels().name);
    out->n_threads = ctx->engine.n_threads();
    return SLUICE_OK;
}

static sluice_status eval_impl(sluice_ctx *ctx, const int32_t *tokens, size_t n, float *logits, bool all) {
    if (sluice_status s = need_model(ctx)) return s;
    if (ctx->broken)
        return fail(ctx, SLUICE_E_STATE, "an earlier evaluation failed part-way; call sluice_reset first");
    if (!tokens || n == 0) return fail(ctx, SLUICE_E_ARG, "sluice_eval: no tokens");
    if (n > (size_t)(1 << 24)) return fail(ctx, SLUICE_E_RANGE, "sluice_eval: too many tokens in one call");
    if (ctx->trace_fn) {
        sluice_trace_fn fn = ctx->trace_fn;
        void *user = ctx->trace_user;
        ctx->engine.set_trace([fn, user](int layer, const char *stage, int pos, const float *x, int hidden) {
            fn(user, layer, stage, pos, x, hidden);
        });
    } else {
        ctx->engine.set_trace(nullptr);
    }
    sluice::Status st;
    try {
        st = ctx->engine.eval(tokens, (int64_t)n, logits, all);
    } catch (const std::bad_alloc &) {
        st = sluice::Status(SLUICE_E_NOMEM, "out of memory during evaluation");
    } catch (const std::exception &e) {
        st = sluice::Status(SLUICE_E_IO, std::string("evaluation failed: ") + e.what());
    }
    if (!st) {
        // Engine::eval rolls the session back on any failure, so it stays
        // usable (the header's promise); nothing is left broken.
        ctx->broken = false;
        return fail(ctx, st);
    }
    if (ctx->route_file) {
        for (const auto &[pos, layers] : ctx->engine.take_routes())
            std::fprintf(ctx->route_file, "%s\n", sluice::route_trace_line(pos, layers).c_str());
        if (std::fflush(ctx->route_file) != 0)
            return fail(ctx, SLUICE_E_IO, "sluice_route_dump: cannot write " + ctx->route_path);
    }
    return SLUICE_OK;
}

sluice_status sluice_route_dump(sluice_ctx *ctx, const char *path) {
    if (sluice_status s = need_model(ctx)) return s;
    if (ctx->route_file) std::fclose(ctx->route_file);
    ctx->route_file = nullptr;
    ctx->engine.record_routes(false);
    if (!path) return SLUICE_OK;
    if (!*path) return fail(ctx, SLUICE_E_ARG, "sluice_route_dump: path is empty");
    // Never inside the model, never a FIFO or device (an open for writing
    // would block or worse), never through a symlink.
    if (std::string why = sluice::output_inside_reason(path, ctx->engine.container().dir(), "the model"); !why.empty())
        return fail(ctx, SLUICE_E_IO, "sluice_route_dump: " + why);
    int fd = -1;
    if (sluice::Status cs = sluice::create_output_in_place(path, &fd); !cs)
        return fail(ctx, SLUICE_E_IO, "sluice_route_dump: " + cs.message());
    ctx->route_file = ::fdopen(fd, "w");
    if (!ctx->route_file) {
        ::close(fd);
        return fail(ctx, SLUICE_E_IO, std::string("sluice_route_dump: cannot create ") + path + ": " + std::strerror(errno));
    }
    ctx->route_path = path;
    ctx->engine.record_routes(true);
    return SLUICE_OK;
}

sluice_status sluice_eval(sluice_ctx *ctx, const int32_t *tokens, size_t n, float *logits_out) {
    return eval_impl(ctx, tokens, n, logits_out, false);
}

sluice_status sluice_eval_all(sluice_ctx *ctx, const int32_t *tokens, size_t n, float *logits_out) {
    return eval_impl(ctx, tokens, n, logits_out, true);
}

sluice_status sluice_reset(sluice_ctx *ctx) {
    if (sluice_status s = need_model(ctx)) return s;
    ctx->engine.reset();
    ctx->broken = false;
    return SLUICE_OK;
}

sluice_status sluice_session_tokens(sluice_ctx *ctx, int32_t *out, size_t cap, size_t *n_out) {
    if (sluice_status s = need_model(ctx)) return s;
    if (!n_out) return fail(ctx, SLUICE_E_ARG, "sluice_session_tokens: n_out is NULL");
    const std::vector<int32_t> &t = ctx->engine.session_tokens();
    *n_out = t.size();
    if (t.size() > cap) return fail(ctx, SLUICE_E_RANGE, "sluice_session_tokens: buffer too small");
    if (!t.empty() && !out) return fail(ctx, SLUICE_E_ARG, "sluice_session_tokens: out is NULL");
    std::copy(t.begin(), t.end(), out);
    return SLUICE_OK;
}

sluice_status sluice_rewind(sluice_ctx *ctx, int32_t n_keep) {
    if (sluice_status s = need_model(ctx)) return s;
    if (ctx->broken)
        return fail(ctx, SLUICE_E_STATE, "an earlier evaluation failed part-way; call sluice_reset first");
    sluice::Status st;
    try {
        st = ctx->engine.rewind(n_keep);
    } catch (const std::bad_alloc &) {
        st = sluice::Status(SLUICE_E_NOMEM, "out of memory while rewinding");
    } catch (const std::exception &e) {
        st = sluice::Status(SLUICE_E_IO, std::string("rewind failed: ") + e.what());
    }
    return st ? SLUICE_OK : fail(ctx, st);
}

sluice_status sluice_checkpoint(sluice_ctx *ctx) {
    if (sluice_status s = need_model(ctx)) return s;
    return sluice_checkpoint_at(ctx, ctx->engine.n_past());
}

sluice_status sluice_checkpoint_at(sluice_ctx *ctx, int32_t pos) {
    if (sluice_status s = need_model(ctx)) return s;
    sluice::Status st;
    try {
        st = ctx->engine.checkpoint_at(pos);
    } catch (const std::bad_alloc &) {
        return fail(ctx, SLUICE_E_NOMEM, "out of memory while keeping a checkpoint");
    }
    return st ? SLUICE_OK : fail(ctx, st);
}

sluice_status sluice_set_trace(sluice_ctx *ctx, sluice_trace_fn fn, void *user) {
    if (sluice_status s = need_open(ctx)) return s;
    ctx->trace_fn = fn;
    ctx->trace_user = user;
    return SLUICE_OK;
}

sluice_status sluice_state_save(sluice_ctx *ctx, const char *path) {
    if (sluice_status s = need_model(ctx)) return s;
    if (!path || !*path) return fail(ctx, SLUICE_E_ARG, "sluice_state_save: path is empty");
    if (ctx->broken) return fail(ctx, SLUICE_E_STATE, "the session is broken by an earlier error; reset it first");
    sluice::Status st;
    try {
        st = ctx->engine.save_state(path);  // evaluates what a rewind left first
    } catch (const std::bad_alloc &) {
        st = sluice::Status(SLUICE_E_NOMEM, "out of memory while saving the state");
    } catch (const std::exception &e) {
        st = sluice::Status(SLUICE_E_IO, std::string("saving the state failed: ") + e.what());
    }
    return st ? SLUICE_OK : fail(ctx, st);
}

sluice_status sluice_state_load(sluice_ctx *ctx, const char *path) {
    if (sluice_status s = need_model(ctx)) return s;
    if (!path || !*path) return fail(ctx, SLUICE_E_ARG, "sluice_state_load: path is empty");
    sluice::Status st = ctx->engine.load_state(path);
    if (!st) return fail(ctx, st);
    ctx->broken = false;
    return SLUICE_OK;
}

sluice_status sluice_stats_get(sluice_ctx *ctx, sluice_stats *out) {
    if (sluice_status s = need_model(ctx)) return s;
    if (!out) return fail(ctx, SLUICE_E_ARG, "sluice_stats_get: out is NULL");
    std::memset(out, 0, sizeof(*out));
    const sluice::ExpertStats es = ctx->engine.expert_stats();
    out->tokens_evaluated = ctx->engine.tokens_evaluated();
    out->expert_reads = es.reads;
    out->expert_bytes_read = es.bytes_read;
    out->expert_cache_hits = es.cache_hits;
    out->expert_cache_misses = es.cache_misses;
    out->seconds_eval = ctx->engine.seconds_eval();
    const sluice::StoreStats ss = ctx->engine.store_stats();
    out->seconds_io_wait = ss.io_wait_seconds;
    out->seconds_read = ss.read_seconds;
    out->experts_prefetched = ss.prefetched;
    out->experts_prefetch_used = ss.readahead_hits;
    out->expert_fetches = ss.fetches;
    out->expert_readahead_hits = ss.readahead_hits;
    out->expert_sync_reads = ss.sync_reads;
    out->lookahead_guesses = ss.guesses;
    out->lookahead_guesses_used = ss.guesses_used;
    out->lookahead_guesses_dropped = ss.guesses_dropped;
    out->io_depth = ss.io_depth;
    std::snprintf(out->io_engine, sizeof out->io_engine, "%s", ss.io_engine.c_str());
    std::snprintf(out->cache_policy, sizeof out->cache_policy, "%s", ss.policy.c_str());
    out->cache_bytes = ctx->engine.memory_plan().cache;
    out->cache_bytes_used = ss.cache_bytes_used;
    out->direct_io = ss.direct_io ? 1 : 0;
    out->pool_fallbacks = ss.pool_fallbacks;
    out->seconds_vision = ctx->engine.seconds_vision();
    out->images_encoded = ctx->engine.images_encoded();
    out->pressure_watch = ctx->engine.pressure_watching() ? 1 : 0;
    out->cache_capacity_bytes = ss.cache_capacity;
    const sluice::PressureStats ps = ctx->engine.pressure_stats();
    out->cache_shrinks = ps.shrinks;
    out->cache_grows = ps.grows;
    out->cache_bytes_released = ss.bytes_released;
    out->memory_warmed_bytes = ss.warmed_bytes;
    out->seconds_memory_warm = ss.warm_seconds;
    out->records_into_cold_memory = ss.cold_takes;
    out->memory_available = ps.last_available;
    out->pressure_reserve = ps.reserve;
    const sluice::CheckpointStats cs = ctx->engine.checkpoint_stats();
    out->checkpoints_held = cs.held;
    out->checkpoint_bytes = cs.bytes;
    out->checkpoint_capacity = cs.capacity;
    out->rewind_restores = cs.restores;
    out->rewind_tokens_reevaluated = cs.reevaluated;
    out->rewind_tokens_replayed = cs.replayed;
    out->replay_log_positions = cs.log_positions;
    const sluice::PrefillStats pf = ctx->engine.prefill_stats();
    out->prefill_wave_tokens = (int32_t)std::min<int64_t>(pf.wave_tokens, INT32_MAX);
    out->prefill_waves = pf.waves;
    out->prefill_tokens = pf.tokens;
    out->prefill_moe_layers = (int32_t)pf.layer_reads.size();
    for (double r : pf.layer_reads) {
        out->prefill_reads_per_record_mean += r / (double)pf.layer_reads.size();
        out->prefill_reads_per_record_max = std::max(out->prefill_reads_per_record_max, r);
    }
    return SLUICE_OK;
}

int32_t sluice_prefill_layer_reads(sluice_ctx *ctx, double *out, int32_t cap) {
    if (!ctx || !ctx->opened || ctx->engine.metadata_only()) return 0;
    const sluice::PrefillStats pf = ctx->engine.prefill_stats();
    for (int32_t i = 0; out && i < cap && i < (int32_t)pf.layer_reads.size(); i++) out[i] = pf.layer_reads[(size_t)i];
    return (int32_t)pf.layer_reads.size();
}

sluice_status sluice_save_usage(sluice_ctx *ctx, const char *path) {
    if (sluice_status s = need_model(ctx)) return s;
    if (!path || !*path) return fail(ctx, SLUICE_E_ARG, "sluice_save_usage: path is empty");
    sluice::Status st = ctx->engine.save_usage(path);
    return st ? SLUICE_OK : fail(ctx, st);
}

sluice_status sluice_vq4p_ties_record(sluice_ctx *ctx, double band) {
    if (sluice_status s = need_model(ctx)) return s;
    if (!(band >= 0.0 && band <= 0.5))
        return fail(ctx, SLUICE_E_ARG, "sluice_vq4p_ties_record: band must be in [0, 0.5]");
    ctx->engine.set_vq4p_diag(band);
    return SLUICE_OK;
}

sluice_status sluice_vq4p_ties_get(sluice_ctx *ctx, sluice_vq4p_tie *out, size_t cap, size_t *n_out) {
    if (sluice_status s = need_model(ctx)) return s;
    if (!n_out) return fail(ctx, SLUICE_E_ARG, "sluice_vq4p_ties_get: n_out is NULL");
    const std::vector<sluice::Vq4pEntry> v = ctx->engine.vq4p_near_ties();
    *n_out = v.size();
    if (v.size() > cap) return fail(ctx, SLUICE_E_RANGE, "sluice_vq4p_ties_get: buffer too small");
    if (!v.empty() && !out) return fail(ctx, SLUICE_E_ARG, "sluice_vq4p_ties_get: out is NULL");
    for (size_t i = 0; i < v.size(); i++) {
        const sluice::Vq4pEntry &e = v[i];
        out[i] = sluice_vq4p_tie{e.layer, e.pos, e.kind, e.expert, e.index, e.value, e.q};
    }
    return SLUICE_OK;
}

static void fill_plan(const sluice::MemoryPlan &p, int32_t context, sluice_memory_plan *out) {
    std::memset(out, 0, sizeof(*out));
    out->trunk = p.trunk;
    out->kda_state = p.kda_state;
    out->mla_kv = p.mla_kv;
    out->scratch = p.scratch;
    out->min_cache = p.min_cache;
    out->vision = p.vision;
    out->floor = p.floor;
    out->record_bytes = p.record;
    out->working_set = p.working_set;
    out->ram_limit = p.ram_limit;
    out->budget = p.budget;
    out->cache = p.cache;
    out->context = context;
    out->runtime = p.runtime;
    out->allocator_slack = p.allocator_slack;
    out->thread_stacks = p.thread_stacks;
    out->page_tables = p.page_tables;
    out->wave_tokens = (int32_t)std::min<int64_t>(p.wave_tokens, INT32_MAX);
    out->wave = p.wave;
    out->batch_tokens = (int32_t)std::min<int64_t>(p.batch_tokens, INT32_MAX);
    out->batch = p.batch;
    out->threads = p.threads;
    out->available = p.available;
    out->reserve = p.reserve;
    out->max_useful = p.max_useful;
    out->checkpoints = p.checkpoints;
    out->replay_log = p.replay_log;
    out->sessions = p.sessions;
    copy_str(out->ram_source, sizeof(out->ram_source), p.ram_source);
    copy_str(out->choice, sizeof(out->choice), p.choice);
}

sluice_status sluice_plan_model(const char *path, uint64_t budget, int32_t context, const char *cgroup_root,
                                sluice_memory_plan *out, char *err, size_t err_cap) {
    auto set_err = [&](const std::string &m) {
        if (err && err_cap) copy_str(err, err_cap, m);
    };
    if (!path || !out) {
        set_err("sluice_plan_model: path and out are required");
        return SLUICE_E_ARG;
    }
    if (context <= 0) context = 4096;
    std::string text;
    const std::string mpath = std::string(path) + "/manifest.json";
    sluice::Status st = sluice::read_whole_file(mpath, (size_t)256 << 20, &text);
    sluice::Manifest m;
    if (st) st = sluice::parse_manifest(text, mpath, &m);
    sluice::MemoryPlan p;
    if (st) {
        sluice::MemPaths paths;
        if (cgroup_root) paths.cgroup_root = cgroup_root;
        st = sluice::plan_memory(m, budget, context, 64, paths, &p);
    }
    if (!st) {
        set_err(st.message());
        return st.code();
    }
    fill_plan(p, context, out);
    // The tower's share, reported beside a floor without it: it joins the
    // floor only in a context opened with vision (VISION.md §2.4).
    if (sluice::vision::has_tower(m)) {
        sluice::vision::VisionConfig vc;
        if (sluice::vision::load_vision_config(path, m.cfg, &vc)) out->vision = sluice::vision::vision_plan_bytes(m, vc);
    }
    return SLUICE_OK;
}

sluice_status sluice_probe_disk(const char *dir, uint64_t record_bytes, uint64_t file_bytes, double max_seconds,
                               int32_t depth, double *gbps, int32_t *direct, char *err, size_t err_cap) {
    if (!dir || !*dir || !gbps) {
        if (err && err_cap) copy_str(err, err_cap, "sluice_probe_disk: dir and gbps are required");
        return SLUICE_E_ARG;
    }
    sluice::DiskProbeResult r;
    const sluice::Status st = sluice::probe_disk(dir, record_bytes, file_bytes, max_seconds, depth, &r);
    if (!st) {
        if (err && err_cap) copy_str(err, err_cap, st.message());
        return st.code();
    }
    *gbps = r.gbps;
    if (direct) *direct = r.direct ? 1 : 0;
    return SLUICE_OK;
}

sluice_status sluice_plan_config(const char *config_json_path, uint64_t ram_bytes, int32_t context,
                                 const char *trace_path, const char *policy, double disk_gbps,
                                 sluice_config_plan *out, char *err, size_t err_cap) {
    auto set_err = [&](const std::string &m) {
        if (err && err_cap) copy_str(err, err_cap, m);
    };
    if (!config_json_path || !out || ram_bytes == 0 || !(disk_gbps >= 0)) {
        set_err("sluice_plan_config: config path, out and ram_bytes are required; disk_gbps >= 0");
        return SLUICE_E_ARG;
    }
    if (context <= 0) context = 4096;
    *out = sluice_config_plan{};
    std::string text, family;
    sluice::Status st = sluice::read_whole_file(config_json_path, (size_t)16 << 20, &text);
    sluice::SynthOptions o;
    if (st) st = sluice::shape_from_hf_config(text, config_json_path, &o, &family);
    sluice::Manifest m;
    // The manifest the config converts to, planned by the engine's own rules.
    if (st) st = sluice::parse_manifest(sluice::synth_manifest(o), std::string(config_json_path) + " (as converted)", &m);
    sluice::MemoryPlan p;
    if (st) st = sluice::plan_memory_for_ram(m, 0, context, 64, ram_bytes, "as given", &p);
    if (!st) {
        set_err(st.message());
        return st.code();
    }
    const sluice::SynthSizes z = sluice::synth_sizes(o);
    copy_str(out->family, sizeof out->family, family);
    out->container_bytes = z.total;
    out->trunk_file_bytes = z.trunk_bytes;
    out->expert_bytes = z.expert_bytes;
    out->moe_layers = z.moe_layers;
    out->experts = o.experts;
    out->top_k = o.top_k;
    fill_plan(p, context, &out->plan);
    out->fits = p.floor <= ram_bytes / 4 * 3;
    const double all_records = (double)z.moe_layers * (double)o.experts;
    const double cache_records = p.record ? (double)(p.cache / p.record) : 0.0;
    out->cache_fraction = all_records > 0 ? std::min(1.0, cache_records / all_records) : 0.0;
    out->hit_rate = -1;
    if (trace_path && *trace_path) {
        sluice::RouteTrace tr;
        if (sluice::Status ts = sluice::load_route_trace(trace_path, &tr); !ts) {
            set_err(ts.message());
            return ts.code();
        }
        // The trace's own expert set, scaled to the same cache fraction:
        // the projection carries the trace's reuse, not its model's size.
        const size_t trace_set = (size_t)tr.moe_layers * (size_t)(tr.max_expert + 1);
        const size_t cap = (size_t)std::llround(out->cache_fraction * (double)trace_set);
        auto pol = sluice::make_cache_policy(policy && *policy ? policy : "freq", cap);
        if (!pol) {
            set_err(std::string("sluice_plan_config: unknown cache policy '") + policy + "' (" +
                    sluice::cache_policy_names() + ")");
            return SLUICE_E_ARG;
        }
        out->hit_rate = sluice::replay_policy(tr, *pol, cap).hit_rate();
    }
    const double ws = (double)p.working_set;
    out->read_bytes_per_token = ws * (out->hit_rate >= 0 ? 1.0 - out->hit_rate : 1.0);
    out->tok_per_s = disk_gbps > 0 && out->read_bytes_per_token > 0 ? disk_gbps * 1e9 / out->read_bytes_per_token : 0.0;
    return SLUICE_OK;
}

sluice_status sluice_memory_plan_get(sluice_ctx *ctx, sluice_memory_plan *out) {
    if (sluice_status s = need_model(ctx)) return s;
    if (!out) return fail(ctx, SLUICE_E_ARG, "sluice_memory_plan_get: out is NULL");
    fill_plan(ctx->engine.memory_plan(), ctx->engine.max_context(), out);
    return SLUICE_OK;
}

size_t sluice_fingerprint(sluice_ctx *ctx, char *buf, size_t cap) {
    if (need_open(ctx) != SLUICE_OK) return 0;
    std::string err;
    std::string fp = sluice::fingerprint_json(ctx->engine, &err);
    if (fp.empty()) {
        ctx->error = err;
        return 0;
    }
    if (buf && cap > 0) copy_str(buf, cap, fp);
    return fp.size() + 1;
}

}  // extern "C"

sluice_status sluice_bench_route_replay(sluice_ctx *ctx, const char *trace_path, const char *ack) {
    if (sluice_status s = need_model(ctx)) return s;
    if (!ack || std::strcmp(ack, "meaningless-logits") != 0)
        return fail(ctx, SLUICE_E_ARG,
                    "sluice_bench_route_replay: benchmark only; pass ack \"meaningless-logits\" to accept that the "
                    "logits become meaningless");
    if (ctx->engine.n_past() != 0)
        return fail(ctx, SLUICE_E_STATE, "sluice_bench_route_replay: call it on a fresh session (n_past 0)");
    if (!trace_path) {
        ctx->engine.set_route_replay(nullptr);
        return SLUICE_OK;
    }
    auto tr = std::make_shared<sluice::RouteTrace>();
    sluice::Status st = sluice::load_route_trace(trace_path, tr.get());
    if (!st) return fail(ctx, st);
    ctx->engine.set_route_replay(tr);
    return SLUICE_OK;
}
