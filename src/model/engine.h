// The forward pass of MODEL.md for Kimi-Linear, DeepSeek-V3/K2 and Kimi K3
// over an opened container, and the per-session decoding state.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "format/container.h"
#include "runtime/ops.h"
#include "model/weights.h"
#include "runtime/expert_store.h"
#include "runtime/memory_plan.h"
#include "runtime/pressure_watch.h"
#include "runtime/route_trace.h"
#include "vision/tower.h"

namespace sluice {

// Diagnostics for VQ4P's int8 table, which is a step function of its input
// (MODEL.md §2.3, §11): an entry within float noise of a rounding boundary
// can round differently in two correct engines. The engine can report the
// closest such entry and, for a margin-aware comparison, round one named
// entry the other way.
struct Vq4pEntry {
    int layer = -1, pos = -1, kind = -1, expert = -1;  // kind 0 gate, 1 up, 2 down
    int64_t index = -1;                                // flat table index
    double margin = 1e30;                              // distance to the .5 boundary, in code units
    float value = 0.0f;                                // f32(T * f32(127/M)) as formed here
    int q = 0;                                         // the code used (after any vq4p_flip)
};

struct EngineOptions {
    int n_threads = 1;
    sluice_backend backend = SLUICE_BACKEND_AUTO;
    bool verify_records = false;
    int prefill_chunk = 64;
    // Tokens per prefill wave (model/prefill.cpp): each layer runs for the
    // whole wave, so each routed record is read once per wave. 0 = the
    // memory plan's choice. Timing only: results are bit-identical.
    int prefill_wave = 0;
    int max_context = 4096;
    // Expert streaming (issue 5). Placement options change timing only.
    uint64_t budget = 0;         // RAM budget in bytes; 0 = choose (see memory_plan.h)
    bool use_cache = true;       // expert cache of budget - floor (+ the minimum)
    int io_depth = 8;            // reads in flight; 0 = synchronous reads only
    IoEngine io_engine = IoEngine::automatic;  // io_uring where the kernel allows it, else threads
    std::string cache_policy = "freq";
    bool readahead = true;       // request a layer's routed experts as soon as the router decides
    bool lookahead = true;       // guess the next layer's experts from the current hidden state
    bool direct_io = true;       // O_DIRECT with a buffered fallback
    std::string hotlist;         // usage file to pre-warm the cache from ("" = usage.waste if present)
    bool preload_hotlist = true;
    std::string cgroup_root = "/sys/fs/cgroup", proc_cgroup = "/proc/self/cgroup";
    // Memory pressure (runtime/pressure_watch.h): shrink the expert cache
    // when other processes take the memory, grow it back when they give it
    // back. Timing only.
    bool pressure_watch = true;
    uint64_t pressure_reserve = 0;  // 0 = default_pressure_reserve(RAM limit)
    int pressure_poll_ms = 0;       // 0 = 200
    std::function<bool(MemStatus *)> memory_source;  // empty = /proc and the cgroup (tests inject)
    bool vq4p_diag = false;   // record VQ4P rounding decisions near a boundary
    double vq4p_band = 1e-4;  // ... within this many code units of it
    Vq4pEntry vq4p_flip;      // round this entry the other way (layer >= 0)
    // Benchmark only: each MoE layer uses these experts (per token, per MoE
    // layer ordinal, cycling) instead of its router's choice. The logits
    // are meaningless; the access pattern is real. Empty = off.
    std::shared_ptr<const RouteTrace> route_replay;
    bool vision = false;      // load K3's vision tower (if the container has one) for image input
    std::vector<int> cpus;    // pin the pool's workers to these CPUs (empty: the OS places them)
    bool lock_memory = false; // mlock what is mapped once the trunk is loaded
    // Manifest, codebooks and side files only: no trunk, pool or store; the
    // forward pass refuses (info, tokenize and plan do not need it).
    bool metadata_only = false;
    // Start-up progress: stage, fraction in [0, 1] or -1 when unknown.
    std::function<void(const char *stage, double fraction)> progress;
    // Prompt reuse (checkpoints.cpp): the KDA state is kept every
    // checkpoint_interval positions (0: none at intervals) in a pool of
    // checkpoint_bytes (-1: kDefaultCheckpoints checkpoints; 0: none),
    // counted in the memory plan.
    int checkpoint_interval = kCheckpointInterval;
    int64_t checkpoint_bytes = -1;
    // Sessions kept aside (saved_session.cpp), counted in the memory plan;
    // kSessionBytesAuto: two sessions at max_context (auto_session_bytes).
    uint64_t session_bytes = 0;
    // Keep the KDA replay log beside the checkpoint pool (kReplayLogPositions
    // positions, in the plan's floor): for callers that reuse prompts.
    bool replay_log = false;
};

using TraceFn = std::function<void(int layer, const char *stage, int pos, const float *x, int hidden)>;

struct KdaState {
    std::vector<float> S;     // [H][D][D], rows = key dim
    std::vector<float> ring;  // [3][C][K-1], raw projections, oldest first
};
struct MlaState {
    std::vector<float> cache;  // [len][kv_lora + d_rope]: normalised latent ‖ rotated rope key
    int len = 0;
};
// The recurrent state of every KDA layer at one position (the MLA cache
// needs none: its first p rows are the state at p).
struct Checkpoint {
    int pos = 0;
    uint64_t seq = 0;            // creation order: the oldest is evicted first
    std::vector<KdaState> kda;   // per layer; empty for MLA layers
};
// Expert-major prefill, for the last eval of more than one token: per MoE
// layer, records read / distinct records its tokens were routed to (1.0 =
// each read once; lookahead guesses count).
struct PrefillStats {
    int64_t wave_tokens = 0;  // the largest wave (memory plan or option)
    uint64_t waves = 0;       // waves the last prompt took
    uint64_t tokens = 0;      // its tokens
    std::vector<double> layer_reads;  // per MoE layer, in order
};
// A session kept aside while others run (sluice_session_save): everything
// eval and rewind read, its MLA cache cut to its length.
struct SavedSession {
    int pos = 0;
    std::vector<int32_t> tokens;
    std::vector<KdaState> kda;
    std::vector<MlaState> mla;
    std::vector<Checkpoint> ckpts;
    uint64_t bytes = 0;  // what it holds (saved_session_bytes)
};
uint64_t saved_session_bytes(const SavedSession &s);

struct CheckpointStats {
    uint64_t held = 0, bytes = 0;  // in the pool now
    uint64_t capacity = 0;         // checkpoints the pool holds at most
    uint64_t restores = 0;         // rewinds that restored a checkpoint (or the zero state)
    uint64_t reevaluated = 0;      // tokens re-evaluated by rewinds, from a checkpoint to the target
    uint64_t replayed = 0;         // positions rewinds replayed from the log instead (KDA recurrences only)
    uint64_t log_positions = 0;    // the replay log's length (0: none)
};

class Engine {
public:
    Status open(const std::string &dir, const EngineOptions &opt);

    const ModelConfig &config() const { return c_.config(); }
    const Container &container() const { return c_; }
    const ModelWeights &weights() const { return w_; }
    const Kernels &kernels() const { return *ops_.k; }
    int n_threads() const { return pool_ ? pool_->size() : 0; }
    bool metadata_only() const { return opt_.metadata_only; }
    // Routing record for sluice_route_dump: while on, each successful eval
    // leaves every evaluated position's experts (per MoE layer ordinal, in
    // the router's order) for take_routes; a failed eval leaves none.
    void record_routes(bool on) {
        record_routes_ = on;
        routes_.clear();
    }
    std::vector<std::pair<int, std::vector<std::vector<int>>>> take_routes() {
        std::vector<std::pair<int, std::vector<std::vector<int>>>> v(routes_.begin(), routes_.end());
        routes_.clear();
        return v;
    }
    int n_past() const { return pos_ + (int)pending_.size(); }
    int max_context() const { return opt_.max_context; }
    ExpertStats expert_stats() const { return experts_->stats(); }
    StoreStats store_stats() const { return experts_->store_stats(); }
    const MemoryPlan &memory_plan() const { return plan_; }
    bool pressure_watching() const { return watch_ != nullptr; }
    PressureStats pressure_stats() const { return watch_ ? watch_->stats() : PressureStats{}; }
    // One reading and decision now (tests; the watcher thread polls anyway).
    void pressure_poll() {
        if (watch_) watch_->poll_once();
    }
    void set_route_replay(std::shared_ptr<const RouteTrace> tr) { opt_.route_replay = std::move(tr); }
    // Writes the learned hotlist (per-expert use counts) to path.
    Status save_usage(const std::string &path) const;
    // Entries within vq4p_band code units of a rounding boundary, closest
    // first (at most kVq4pMaxTies are kept).
    std::vector<Vq4pEntry> vq4p_near_ties() const;
    // Turns the recording on (band > 0) or off; clears what was recorded.
    // Changes no numbers.
    void set_vq4p_diag(double band) {
        opt_.vq4p_diag = band > 0.0;
        opt_.vq4p_band = band > 0.0 ? band : 1e-4;
        vq4p_near_.clear();
    }
    static constexpr size_t kVq4pMaxTies = 1u << 18;

    void reset();
    // Prompt reuse (checkpoints.cpp). The tokens the session evaluated, one
    // per position; -1 where the token cannot be matched again (an image
    // row took its place, or the state was loaded from a file).
    std::vector<int32_t> session_tokens() const;
    // Keeps the first n positions: the MLA cache is cut at n; the KDA state
    // is restored from the newest checkpoint at or before n (the zero state
    // at 0) and the tokens from there to n are left to evaluate again, with
    // a checkpoint at n. They go through the model with the next eval's
    // tokens, in the same wave: a separate pass would read every routed
    // record once more (a turn's own tokens route to most experts), which
    // was half of an agent's second turn. Bit-identical to having evaluated
    // the n tokens fresh. SLUICE_E_RANGE for n outside [0, n_past];
    // SLUICE_E_STATE (nothing changed) when a token to re-evaluate is unknown.
    Status rewind(int n);
    // Keeps a checkpoint of the KDA state at position pos, n_past <= pos:
    // now at n_past (tokens a rewind left included), else as the next evals
    // pass pos, inside their wave (a prompt evaluated up to its last token,
    // a checkpoint, then the last token alone read every record twice).
    // No-op without KDA layers, at position 0, or with an empty pool.
    Status checkpoint_at(int pos);
    void checkpoint() { (void)checkpoint_at(n_past()); }
    // Evaluates the tokens a rewind left (settle) on their own: for what
    // must see the whole state now (saving it).
    Status settle();
    // Prompt reuse across conversations (saved_session.cpp): the live
    // session copied out with its newest checkpoint, and a copy made live
    // again (a rewind inside it restores from that checkpoint, or from 0). Restoring refuses, with
    // the session unchanged, a copy whose shapes are not this model's.
    Status save_session(SavedSession *out);
    Status restore_session(const SavedSession &in);
    CheckpointStats checkpoint_stats() const;
    PrefillStats prefill_stats() const;
    // Evaluates n tokens from the current position. logits: n x V if all,
    // else V (last position); may be null. On failure the session is
    // restored to where it was.
    Status eval(const int32_t *tokens, int64_t n, float *logits, bool all);
    void set_trace(TraceFn fn) { trace_ = std::move(fn); }
    Status save_state(const std::string &path);
    Status load_state(const std::string &path);
    uint64_t tokens_evaluated() const { return tokens_evaluated_; }
    double seconds_eval() const { return seconds_eval_; }

    // Images (VISION.md §6-7; images.cpp). A queue of image embeddings
    // that the next eval splices in place of the pad token, one row per
    // pad position, in order. Every failed call leaves the queue as it was.
    bool has_vision() const { return tower_ != nullptr; }
    const vision::VisionConfig &vision_config() const { return vcfg_; }
    // Decodes, preprocesses and encodes one image now, and queues its rows.
    Status image_add(const uint8_t *data, size_t len, const std::string &name, int *n_tokens);
    // Encodes a given patch tensor (tests, tools): pixels [gh·gw][588].
    Status image_encode_pixels(const float *pixels, vision::Grid g, std::vector<float> *emb);
    // Queues given embeddings as one image (tests: warp's own rows).
    Status image_queue_rows(const float *rows, int n_tokens);
    // Expands each pad token of `in` to its image's run (one pad per queued image).
    Status image_expand(const int32_t *in, size_t n, std::vector<int32_t> *out) const;
    void image_clear() {
        img_rows_.clear();
        img_tokens_.clear();
    }
    size_t images_queued() const { return img_tokens_.size(); }
    const std::vector<float> &image_rows() const { return img_rows_; }
    double seconds_vision() const { return seconds_vision_; }
    uint64_t images_encoded() const { return images_encoded_; }

private:
    // One wave: every layer for its n tokens, the attention in chunks;
    // marks are the positions whose KDA state goes into checkpoints made
    // for them before the wave (checkpoint_slot).
    Status eval_wave(const int32_t *tokens, int64_t n, float *logits, bool all, const std::vector<int> &marks);
    // The routed experts of n tokens whose routes are decided (sel, wt),
    // from token position pos0; held: the wave's records kept across calls
    // (indexed by expert; null: fetch, use and release).
    Status moe_routed(int L, const float *Hn, int64_t n, int pos0, const int *sel, const float *wt, float *out,
                      std::vector<ExpertRef> *held);
    Status embed(const int32_t *tokens, int64_t n, float *X);
    void kda_block(int L, const float *Hn, int64_t n, int pos0, float *out);
    // One position of KDA layer L from its raw projections (q, k, v: C
    // floats each, overwritten by their convolutions; z: C; bt: H): the conv
    // ring and S advance; ot (C floats; null: the state only) receives the
    // gated read-out under gate gt.
    void kda_step(int L, float *q, float *k, float *v, const float *z, const float *bt, const float *gt, float *ot);
    // Position p of layer L again, from the replay log (the state only).
    void kda_replay(int L, int p);
    void mla_block(int L, const float *Hn, int64_t n, int pos0, float *out);
    Status ffn_block(int L, const float *Hn, int64_t n, float *out);
    void dense_ffn(const DenseWeights &w, const float *Hn, int64_t n, float *out);
    Status moe_ffn(int L, const float *Hn, int64_t n, float *out);
    void route(const MoeWeights &mw, const float *logits, int64_t n, int *sel, float *wt) const;
    void replay_routes(int L, int64_t n, int *sel) const;
    void act(float *a, const float *b, int64_t n) const;  // a <- act(a, b)
    void attn_res(const std::vector<const float *> &vs, const float *norm, const float *proj, float *out) const;
    void init_rope();
    void quantize_table(const float *T, int64_t nv, int8_t *Tq, float *lam, int L, int pos, int kind, int expert);

    Container c_;
    ModelWeights w_;
    EngineOptions opt_;
    std::unique_ptr<ThreadPool> pool_;
    Ops ops_;
    std::unique_ptr<ExpertStore> experts_;
    std::unique_ptr<PressureWatch> watch_;  // after experts_: stopped before the store goes
    MemoryPlan plan_;
    ExpertGeom geom_;
    std::vector<float> rope_freq_;
    float mla_scale_ = 1.0f;
    std::vector<Vq4pEntry> vq4p_near_;
    struct MoeScratch {
        RawFloats tg, tu;          // gate/up tables per token
        std::vector<float> yexp;   // expert outputs
        std::vector<float> sh_a, sh_b, xl, yr, yd;  // shared expert, latent input, routed sums
        // Per pool worker, for the shared-code product (vq_gemm_u8_tokens):
        // gate/up outputs and down tables of up to kVqTokensMax users, and
        // the kernel's scratch. Grown once: fresh buffers per expert were
        // megabytes of page faults each.
        struct Tokens {
            std::vector<float> a, b, td, scratch;
        };
        std::vector<Tokens> tokens;
    } moe_scratch_;
    std::vector<float> mla_wuk_;  // W_UK as floats for a prompt chunk (model/mla.cpp)
    // The attention blocks' projections of a chunk (kda.cpp, mla.cpp), grown
    // once: fresh vectors of about a megabyte each were mapped, faulted in
    // and zeroed per chunk and layer (11 % of a 512-token prompt on a cut of
    // the 48B shape, perf). Only what a product writes whole lives here.
    struct AttnScratch {
        std::vector<float> q, k, v, fa, z, b, g, ga, o, kva;
    } attn_scratch_;
    std::mutex vq4p_mu_;  // quantize_table runs on pool threads (expert-parallel MoE)

    bool record_routes_ = false;
    std::map<int, std::vector<std::vector<int>>> routes_;  // position -> experts per MoE ordinal
    std::vector<int> moe_ordinal_;                         // per layer; -1 for a dense layer
    Status lock_memory() const;

    // Session state.
    int pos_ = 0;
    std::vector<int32_t> tokens_;  // per evaluated position (session_tokens)
    // Positions pos_.. that a rewind left to evaluate again (known tokens,
    // never image rows), and positions to checkpoint as evals pass them;
    // both go into the next eval's waves.
    std::vector<int32_t> pending_;
    std::vector<int> due_;
    // The replay log (checkpoints.cpp): per KDA layer, the recurrence's
    // inputs (raw q/k/v projections, gate input z, beta logits: 4C + H
    // floats) of the last log_cap_ positions, in slots p % log_cap_; valid
    // for positions [log_lo_, log_hi_). A rewind whose checkpoint lies in
    // it replays the KDA recurrences to its target instead of evaluating
    // the tokens through the model (trunk and experts): about 1 ms a token
    // against 100 on the 48B shape. Exact: the same step on the same inputs.
    int log_cap_ = 0;
    int log_lo_ = 0, log_hi_ = 0;
    std::vector<std::vector<float>> kda_log_;
    uint64_t ckpt_replayed_ = 0;
    // eval without the tokens a rewind left: the position, context and
    // roll-back logic.
    Status eval_here(const int32_t *tokens, int64_t n, float *logits, bool all);
    // The tokens a rewind left, then n more (none: settle), in one eval; on
    // failure the rewind's tokens are left to come, as before the call.
    Status eval_pending(const int32_t *tokens, int64_t n, float *logits);
    // Prompt reuse: the checkpoint pool, oldest first; spare buffers of
    // evicted checkpoints are reused so a full pool never allocates.
    std::vector<Checkpoint> ckpts_;
    std::vector<Checkpoint> ckpt_spare_;
    uint64_t ckpt_seq_ = 0, ckpt_restores_ = 0, ckpt_reevaluated_ = 0;
    size_t ckpt_capacity_ = 0;  // checkpoints the pool holds (plan_.checkpoints / one checkpoint)
    bool no_splice_ = false;     // rewind's re-evaluation: a pad token is text, never an image row
    void drop_checkpoints_after(int pos);
    // The pool's entry for pos (made, evicting the oldest, or refreshed);
    // its KDA buffers are sized but not filled.
    Checkpoint &checkpoint_slot(int pos);
    // Prefill read accounting for the eval in progress (PrefillStats).
    struct PromptReads {
        std::vector<uint64_t> reads0;             // per layer: store reads at the eval's start
        std::vector<std::vector<char>> routed;    // per layer: experts routed in the eval
        uint64_t waves = 0;
    } prompt_;
    PrefillStats prefill_;
    int64_t wave_tokens_ = 0;
    std::vector<KdaState> kda_;
    // The KDA states as they were before the current eval: restored when it
    // fails part-way, so a failed sluice_eval leaves the session as it was
    // (include/sluice/sluice.h). Sized at reset, so copying never allocates.
    std::vector<KdaState> kda_before_;
    Status eval_chunks(const int32_t *tokens, int64_t n, float *logits, bool all);
    std::vector<MlaState> mla_;
    TraceFn trace_;
    uint64_t tokens_evaluated_ = 0;
    double seconds_eval_ = 0;

    // Vision: the tower (null when not requested or absent) and the queue.
    vision::VisionConfig vcfg_;
    std::unique_ptr<vision::VisionTower> tower_;
    std::vector<float> img_rows_;   // queued embeddings, [rows][hidden]
    std::vector<int> img_tokens_;   // rows per queued image
    int64_t splice_cursor_ = 0;     // next unused row during one eval
    double seconds_vision_ = 0;
    uint64_t images_encoded_ = 0;
};

}  // namespace sluice
