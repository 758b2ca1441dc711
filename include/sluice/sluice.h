/*
 * sluice: run large mixture-of-experts models from a WASTE v0 container.
 *
 * This header is the whole public surface. The CLI and the server are
 * clients of it. Rules that hold for every function:
 *   - a context is opaque and owns all state; there is no global state;
 *   - errors are returned as sluice_status and described by
 *     sluice_last_error(ctx); nothing is printed and nothing exits;
 *   - a context is not thread-safe: use one per thread, or serialise.
 */
#ifndef SLUICE_SLUICE_H
#define SLUICE_SLUICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_VERSION_STRING "0.1.0"

/* Every public function carries SLUICE_API: the shared library is built
 * with -fvisibility=hidden, so nothing else leaves it. */
#if defined(_WIN32)
#define SLUICE_API
#elif defined(__GNUC__)
#define SLUICE_API __attribute__((visibility("default")))
#else
#define SLUICE_API
#endif

typedef enum sluice_status {
    SLUICE_OK = 0,
    SLUICE_E_ARG = 1,         /* a bad argument from the caller */
    SLUICE_E_IO = 2,          /* a file is missing, unreadable, short or damaged */
    SLUICE_E_FORMAT = 3,      /* a container violates FORMAT.md */
    SLUICE_E_UNSUPPORTED = 4, /* a valid configuration this engine does not implement */
    SLUICE_E_NOMEM = 5,       /* allocation failed, or a RAM budget was exceeded */
    SLUICE_E_STATE = 6,       /* the call is not valid in the context's state */
    SLUICE_E_RANGE = 7,       /* a token id or length out of range */
    SLUICE_E_BUSY = 8         /* the container is held by another process (exclusive_open) */
} sluice_status;

/* Start-up progress (sluice_config.progress): stage names what is being
 * done ("manifest", "trunk", "cache", "hotlist", "ready"); fraction is in
 * [0, 1], or -1 when unknown. Called on the opening thread. */
typedef void (*sluice_progress_fn)(void *user, const char *stage, double fraction);

typedef enum sluice_backend {
    SLUICE_BACKEND_AUTO = 0,   /* best SIMD path the CPU supports; SLUICE_BACKEND env overrides */
    SLUICE_BACKEND_SCALAR = 1, /* portable scalar kernels */
    SLUICE_BACKEND_AVX2 = 2,
    SLUICE_BACKEND_AVX512 = 3,
    SLUICE_BACKEND_NEON = 4    /* AArch64 Advanced SIMD */
} sluice_backend;

/* Available memory in bytes, as a caller measures it (sluice_config's
 * memory_probe): return non-zero with *available_bytes set, or 0 for "no
 * reading this time". Called from the watcher thread. */
typedef int32_t (*sluice_memory_probe_fn)(void *user, uint64_t *available_bytes);

typedef struct sluice_config {
    uint32_t struct_size;   /* sizeof(sluice_config): lets the struct grow */
    int32_t n_threads;      /* worker threads for kernels; 0 = number of CPUs */
    int32_t backend;        /* sluice_backend */
    int32_t verify_records; /* non-zero: check the CRC32 of every expert record read */
    int32_t prefill_chunk;  /* tokens per prefill chunk; 1 = token at a time; 0 = default (64) */
    int32_t max_context;    /* positions a session may hold; 0 = default (4096) */
    /* Expert streaming. None of these changes results, only timing. */
    uint64_t budget_bytes;  /* hard RAM budget; 0 = choose (see sluice_plan_model) */
    int32_t no_cache;       /* non-zero: no expert cache beyond the records in use */
    int32_t io_threads;     /* background readers; 0 = default (2); -1 = synchronous reads */
    int32_t no_readahead;   /* non-zero: read a layer's experts only when needed */
    int32_t no_lookahead;   /* non-zero: no next-layer router guesses */
    int32_t no_direct_io;   /* non-zero: buffered reads instead of O_DIRECT */
    int32_t no_hotlist;     /* non-zero: do not pre-warm the cache from a usage file */
    const char *hotlist;    /* usage file to pre-warm from; NULL = MODEL/usage.waste if present */
    const char *cgroup_root; /* NULL = /sys/fs/cgroup (tests point it at a fake tree) */
    int32_t io_depth;       /* expert reads in flight; 0 = io_threads if set, else 8 */
    int32_t io_engine;      /* sluice_io_engine */
    const char *cache_policy; /* "freq" (NULL: default), "pred", "lfru" or "lru" */
    int32_t vision;         /* non-zero: load K3's vision tower, if the container has one, for
                               the sluice_image_* functions; its bytes join the memory floor */
    /* Fields below were added after 0.1.0's first layout: struct_size tells
     * an older caller's struct apart, and missing fields take the defaults. */
    const char *cpus;       /* pin the compute pool to these CPUs: "0-5", "0-2,6-8"; NULL or ""
                               = leave placement to the OS. With n_threads 0, one thread per
                               CPU listed. Timing only: results are bit-identical. */
    int32_t exclusive_open; /* non-zero: hold an exclusive advisory lock (flock) on the
                               container's manifest; SLUICE_E_BUSY while another process
                               has it open. Every open takes at least a shared lock. */
    int32_t lock_memory;    /* non-zero: mlock the trunk (everything mapped at open) so it is
                               never paged out; SLUICE_E_NOMEM naming RLIMIT_MEMLOCK when the
                               limit forbids it */
    int32_t metadata_only;  /* non-zero: read the manifest, codebooks, tokenizer and chat
                               format only, not the trunk: info, tokenize, detokenize, chat
                               rendering and the fingerprint work; evaluation returns
                               SLUICE_E_STATE */
    sluice_progress_fn progress; /* start-up progress; NULL = none */
    void *progress_user;
    /* Memory pressure: a watcher thread shrinks the expert cache (evicting
     * and returning its memory to the OS) when available memory, read from
     * /proc/meminfo, PSI and the cgroup, falls under a reserve because other
     * processes took it, and grows it back to the budget's size when they
     * give it back. Timing only: results are bit-identical. sluice_stats
     * reports what it did. */
    int32_t no_pressure_watch;       /* non-zero: never resize the cache */
    int32_t pressure_poll_ms;        /* 0 = 200 */
    uint64_t pressure_reserve_bytes; /* available memory kept for others; 0 = max(512 MiB, 5 % of RAM) */
    sluice_memory_probe_fn memory_probe; /* NULL = the kernel's numbers; otherwise asked instead (tests,
                                            embedders with their own accounting) */
    void *memory_probe_user;
    /* Prompt reuse (see sluice_rewind): the KDA state is kept as checkpoints
     * in a pool counted in the memory plan (sluice_memory_plan.checkpoints).
     * Neither changes results, only how many tokens a rewind re-evaluates. */
    int64_t checkpoint_bytes;    /* the pool's bytes, rounded down to whole checkpoints; 0 = default
                                    (4 checkpoints); < 0 = no pool (a rewind re-evaluates from 0) */
    int32_t checkpoint_interval; /* positions between checkpoints; 0 = default (64); < 0 = none at
                                    intervals (end-of-prompt and rewind-target ones are still kept) */
    /* Expert-major prefill: a prompt runs through each layer in waves of up
     * to this many tokens, and each routed record is read once per wave
     * (the attention still runs prefill_chunk tokens at a time). 0 = the
     * memory plan's choice (sluice_memory_plan.wave_tokens: up to
     * max_context, within a quarter of the budget's room above the floor);
     * 1 = token at a time. A given wave is part of the floor. Timing only:
     * results are bit-identical. */
    int32_t prefill_wave;
    /* Sessions kept aside (sluice_session_save) may hold at most this many
     * bytes together; counted in the memory plan (sluice_memory_plan.sessions,
     * part of the floor). 0 = none may be kept; SLUICE_SESSION_BYTES_AUTO =
     * room for two sessions of this model at max_context. */
    uint64_t session_bytes;
    /* Prompt reuse: 1 keeps a replay log beside the checkpoint pool (the KDA
     * recurrences' inputs of the last 128 positions: 168 MB at
     * Kimi-Linear-48B's shape, part of the floor), so a rewind whose
     * checkpoint it reaches replays the recurrences instead of evaluating
     * tokens again (see sluice_rewind). 0 (default) = none: one-shot callers
     * keep the memory for the expert cache. sluice serve turns it on. */
    int32_t replay_log;
} sluice_config;

typedef enum sluice_io_engine {
    SLUICE_IO_AUTO = 0,    /* io_uring where the kernel allows it, else threads */
    SLUICE_IO_URING = 1,   /* io_uring or fail to open */
    SLUICE_IO_THREADS = 2  /* io_depth threads doing pread */
} sluice_io_engine;

typedef struct sluice_ctx sluice_ctx;

/* sluice_config.session_bytes: room for two saved sessions at max_context. */
#define SLUICE_SESSION_BYTES_AUTO UINT64_MAX

typedef struct sluice_info {
    char family[32];        /* "kimi-linear", "kimi-k3" or "deepseek-v3" */
    char arch[96];          /* the release's architecture name, if recorded */
    int32_t n_layers;
    int32_t n_kda_layers;
    int32_t n_mla_layers;
    int32_t n_moe_layers;
    int32_t n_experts;      /* routed experts per MoE layer */
    int32_t top_k;
    int32_t n_shared_experts;
    int32_t hidden;
    int32_t vocab;
    int32_t attn_res_block;
    uint64_t total_params;  /* every parameter the text model uses */
    uint64_t active_params; /* parameters touched per token */
    uint64_t trunk_bytes;   /* bytes of trunk tensors the text model uses */
    uint64_t expert_bytes;  /* bytes of all expert banks */
    char trunk_formats[32]; /* e.g. "Q4G/Q8G/F32": distinct formats, largest share first */
    char expert_format[8];  /* "VQ3R", "VQ2R", "VQ4P" */
    int32_t expert_stages;
    int32_t expert_entries;
    int32_t expert_index_bits;
    char backend[16];       /* kernel path in use: "scalar", "avx2", "avx512", "neon" */
    int32_t n_threads;
} sluice_info;

/* Fills *cfg with defaults. */
SLUICE_API void sluice_config_default(sluice_config *cfg);

/*
 * Opens the container directory at path. cfg may be NULL for defaults.
 * Like sqlite3_open, *out receives a context even on failure (unless memory
 * runs out), so sluice_last_error(*out) can explain; close it either way.
 */
SLUICE_API sluice_status sluice_open(const char *path, const sluice_config *cfg, sluice_ctx **out);
SLUICE_API void sluice_close(sluice_ctx *ctx);

/* The detail of the last error: names the file, tensor or record. Never NULL. */
SLUICE_API const char *sluice_last_error(const sluice_ctx *ctx);
/* A short fixed name for a status code. */
SLUICE_API const char *sluice_status_name(sluice_status s);

SLUICE_API sluice_status sluice_info_get(sluice_ctx *ctx, sluice_info *out);

/* Number of logits per position (the vocabulary size). */
SLUICE_API int32_t sluice_n_vocab(const sluice_ctx *ctx);
/* Position of the next token in the session. */
SLUICE_API int32_t sluice_n_past(const sluice_ctx *ctx);

/*
 * Feeds n tokens at the session's current position and advances it.
 * logits_out, if not NULL, receives the vocab logits of the last position.
 * On error the session is left as it was before the call.
 */
SLUICE_API sluice_status sluice_eval(sluice_ctx *ctx, const int32_t *tokens, size_t n, float *logits_out);
/* As sluice_eval, but logits_out receives n x vocab logits, one row per position. */
SLUICE_API sluice_status sluice_eval_all(sluice_ctx *ctx, const int32_t *tokens, size_t n, float *logits_out);
/* Forgets the session: position 0, all state zero. */
SLUICE_API sluice_status sluice_reset(sluice_ctx *ctx);

/*
 * Prompt reuse. A session keeps the tokens it evaluated; a new prompt that
 * shares a prefix with them rewinds to the prefix and evaluates only the
 * rest, with logits bit-identical to evaluating the whole prompt fresh.
 *
 * MLA layers' cache is cut at the target. KDA layers' recurrent state
 * cannot be cut: it is restored from the newest checkpoint at or before
 * the target (the zero state at 0) and taken from there to the target:
 * replayed from the replay log when the log reaches back to the checkpoint
 * (the recurrences' inputs of the last 128 positions, kept beside a
 * non-empty pool: no trunk or expert work), else by evaluating the tokens
 * again. Checkpoints are kept every checkpoint_interval positions (64)
 * inside multi-token evaluations (a one-token decode step takes none),
 * where sluice_checkpoint is called (the end of a prompt), and at each
 * rewind target, in a pool of checkpoint_bytes (4 checkpoints by default)
 * that evicts the least recently made or used first.
 */
/* Copies the session's tokens, one per position (sluice_n_past of them):
 * -1 marks a position no prompt can match (an image row took it, or the
 * state came from sluice_state_load). Buffer rules as in the text
 * functions. */
SLUICE_API sluice_status sluice_session_tokens(sluice_ctx *ctx, int32_t *out, size_t cap, size_t *n_out);
/* Keeps the first n_keep positions of the session (see above).
 * SLUICE_E_RANGE for n_keep outside [0, sluice_n_past]; SLUICE_E_STATE,
 * with nothing changed, when a token to re-evaluate is unknown (-1 in
 * sluice_session_tokens: reset and evaluate instead). The tokens from the
 * restored checkpoint to n_keep are evaluated with the next sluice_eval's,
 * in one pass (each routed expert read once for both); sluice_n_past and
 * sluice_session_tokens count them already. Where that cannot be (the next
 * call is sluice_eval_all, images are queued, or the state is saved) they
 * are evaluated first, alone. If that evaluation fails, the call returns
 * its error and the session is as it was after the rewind. */
SLUICE_API sluice_status sluice_rewind(sluice_ctx *ctx, int32_t n_keep);
/* Keeps a checkpoint of the KDA state at the current position, so a later
 * rewind to here evaluates nothing again: call it after a prompt (a
 * conversation's next turn usually shares it). No-op without KDA layers,
 * at position 0, or with no pool. */
SLUICE_API sluice_status sluice_checkpoint(sluice_ctx *ctx);
/* As sluice_checkpoint, at position pos >= sluice_n_past: taken as the
 * coming evaluations pass pos, inside their pass. A prompt's state before
 * its last token (where the next turn, re-rendering the reply, diverges)
 * then costs no second pass for the last token alone. SLUICE_E_RANGE for
 * pos < sluice_n_past; forgotten by sluice_rewind before pos and by
 * sluice_reset. */
SLUICE_API sluice_status sluice_checkpoint_at(sluice_ctx *ctx, int32_t pos);

/*
 * Sessions kept aside, for a caller that alternates between conversations
 * (a server with several clients, an agent and its sub-agents): the live
 * session (tokens, MLA cache, KDA state, and the newest of its checkpoints:
 * where its last prompt ended) is copied into a sluice_session, and a
 * saved one is copied back into the live session later, so that
 * conversation's next prompt rewinds into its own prefix instead of
 * evaluating it again (from that checkpoint; a rewind to before it, from
 * 0). Logits after a restore are bit-identical to never having left. Saved
 * sessions hold at most sluice_config.session_bytes together (counted in
 * the memory plan); a save past that fails with SLUICE_E_NOMEM and nothing
 * kept (free one first). A saved session may be restored into any context
 * of the same model and freed at any time, before or after its context is
 * closed.
 */
typedef struct sluice_session sluice_session;
SLUICE_API sluice_status sluice_session_save(sluice_ctx *ctx, sluice_session **out);
/* Makes a copy of *s the live session (s stays valid). SLUICE_E_ARG, with
 * the live session unchanged, when s was saved from another model. */
SLUICE_API sluice_status sluice_session_restore(sluice_ctx *ctx, const sluice_session *s);
/* Its bytes (what counts against session_bytes) and its tokens (buffer
 * rules as in sluice_session_tokens; -1 marks an unmatched position). */
SLUICE_API uint64_t sluice_session_bytes(const sluice_session *s);
SLUICE_API sluice_status sluice_session_saved_tokens(const sluice_session *s, int32_t *out, size_t cap,
                                                     size_t *n_out);
SLUICE_API void sluice_session_free(sluice_session *s);

/*
 * Trace hook: called during sluice_eval once per position for each stage of
 * each layer. stage is "embed", "attn" (residual stream after the mixer),
 * "ffn" (after the FFN) or "final" (after the output aggregation, before the
 * final norm); layer is -1 for "embed" and "final"; data holds hidden floats.
 * Pass NULL to turn tracing off. Tracing does not change the path taken.
 */
typedef void (*sluice_trace_fn)(void *user, int32_t layer, const char *stage, int32_t pos,
                                const float *data, int32_t hidden);
SLUICE_API sluice_status sluice_set_trace(sluice_ctx *ctx, sluice_trace_fn fn, void *user);

/*
 * Writes the container fingerprint as JSON into buf: family, tensor_prefix,
 * trunk formats (overall and per tensor class), expert quantization, the
 * sha256 of manifest.json, codebooks.bin and trunk.bin, and the converter's
 * provenance block if the manifest has one. Returns the bytes needed
 * including the NUL, or 0 on error (see sluice_last_error). Hashes the
 * trunk: slow on large models.
 */
SLUICE_API size_t sluice_fingerprint(sluice_ctx *ctx, char *buf, size_t cap);


/* ------------------------------------------------------------------------
 * Text: tokenizer, chat rendering, detokenization (needs tokenizer.model in
 * the container; SLUICE_E_UNSUPPORTED otherwise).
 *
 * Buffers: functions that fill an array take its capacity and write the
 * count they need to *n_out; if the capacity is too small they return
 * SLUICE_E_RANGE without writing, so the caller can grow and retry.
 * Text outputs are bytes, not NUL-terminated. The tokenizer is loaded from
 * the container on first use.
 * ------------------------------------------------------------------------ */

/* Content: never yields a control token, whatever the text says. */
SLUICE_API sluice_status sluice_tokenize(sluice_ctx *ctx, const char *text, size_t len, int32_t *out, size_t cap,
                              size_t *n_out);
/* Markup: special-token strings become their ids; the rest is content. */
SLUICE_API sluice_status sluice_tokenize_markup(sluice_ctx *ctx, const char *text, size_t len, int32_t *out, size_t cap,
                                     size_t *n_out);
/* Bytes of the tokens, concatenated (may end inside a UTF-8 sequence). */
SLUICE_API sluice_status sluice_detokenize(sluice_ctx *ctx, const int32_t *ids, size_t n, char *out, size_t cap, size_t *n_out);
/* BOS = n_ranks, EOS = n_ranks + 2 or config eos_token_id (FORMAT.md §7.2);
 * -1 without a tokenizer. */
SLUICE_API int32_t sluice_token_bos(const sluice_ctx *ctx);
SLUICE_API int32_t sluice_token_eos(const sluice_ctx *ctx);
/* Non-zero for control tokens (specials). */
SLUICE_API int32_t sluice_token_is_control(const sluice_ctx *ctx, int32_t id);

/* Streaming detokenizer: holds back an incomplete UTF-8 sequence; its output
 * is always valid UTF-8. It uses ctx's tokenizer: free it before closing
 * ctx. NULL on error (see sluice_last_error(ctx)). */
typedef struct sluice_detok sluice_detok;
SLUICE_API sluice_detok *sluice_detok_new(sluice_ctx *ctx);
/* Appends id; writes the text that is now complete. A refused call
 * (SLUICE_E_RANGE for a small buffer or an id without text) consumes
 * nothing. */
SLUICE_API sluice_status sluice_detok_push(sluice_detok *d, int32_t id, char *out, size_t cap, size_t *n_out);
/* Writes whatever is held back (invalid trailing bytes become U+FFFD). */
SLUICE_API sluice_status sluice_detok_flush(sluice_detok *d, char *out, size_t cap, size_t *n_out);
SLUICE_API void sluice_detok_free(sluice_detok *d);

typedef struct sluice_chat_message {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* tokenized as content: can never forge a control token */
} sluice_chat_message;

/* Renders a conversation with the container's chat.json, or the family's
 * built-in template, and appends the assistant opening if add_open. */
SLUICE_API sluice_status sluice_chat_render(sluice_ctx *ctx, const sluice_chat_message *msgs, size_t n_msgs, int add_open,
                                 int32_t *out, size_t cap, size_t *n_out);
/* The string that ends an assistant turn (empty if none); NUL-terminated. */
SLUICE_API const char *sluice_chat_stop(sluice_ctx *ctx);
/* The control token that ends an assistant turn: the last special token of
 * the stop string (<|im_end|>, K3's <|end_of_msg|>); -1 if it has none (or
 * on error, see sluice_last_error). */
SLUICE_API int32_t sluice_chat_stop_token(sluice_ctx *ctx);
/* The most bytes one sluice_detok_push or sluice_detok_flush writes: with a
 * buffer this large they never refuse for lack of room. */
SLUICE_API size_t sluice_detok_max_chunk(const sluice_detok *d);

/* ------------------------------------------------------------------------
 * Sampling
 * ------------------------------------------------------------------------ */
typedef struct sluice_sampling {
    uint32_t struct_size;
    float temperature;     /* 0 = greedy */
    int32_t top_k;         /* 0 = off */
    float top_p;           /* 1 = off */
    float min_p;           /* 0 = off */
    float repeat_penalty;  /* 1 = off */
    int32_t repeat_last_n; /* tokens of history the penalty looks at */
    uint64_t seed;         /* same seed, same logits -> same choices */
} sluice_sampling;

SLUICE_API void sluice_sampling_default(sluice_sampling *p);
typedef struct sluice_sampler sluice_sampler;
/* NULL if p is NULL or invalid (struct_size unknown, temperature < 0,
 * top_p outside (0, 1], min_p outside [0, 1], repeat_penalty <= 0,
 * repeat_last_n < -1; -1 = the whole history) or memory runs out. */
SLUICE_API sluice_sampler *sluice_sampler_new(const sluice_sampling *p);
/* Picks a token from logits (n_vocab values) given the token history.
 * Order: repetition penalty, top-k, top-p, min-p, temperature, then a draw
 * from the seeded generator (xoshiro256**; the same on every machine).
 * Returns -1 for bad arguments. */
SLUICE_API int32_t sluice_sampler_sample(sluice_sampler *s, const float *logits, int32_t n_vocab, const int32_t *history,
                              size_t n_history);
SLUICE_API void sluice_sampler_free(sluice_sampler *s);

/* Constrained decoding: from now on s draws only tokens that keep its
 * output a prefix of a JSON value valid under a JSON Schema, and then one
 * of the end tokens. schema: the schema's JSON text (NULL or len 0: any
 * JSON object, as response_format json_object). Supported: type (also a
 * list), properties (all written, in order), required, items, enum,
 * const, anyOf, maxLength (a cap in bytes), minItems, maxItems, and the
 * annotations (description, title, ...); other keywords are refused with
 * SLUICE_E_ARG and the schema path in sluice_last_error(ctx). No
 * whitespace is generated. Without maxLength / maxItems a string takes at
 * most 256 bytes and a list 32 items, so every output is finite.
 * end_tokens (n_end 0: ctx's EOS) may only follow a complete value. ctx
 * supplies the vocabulary (its token bytes are indexed once per context)
 * and must outlive nothing: s keeps its own copy. */
SLUICE_API sluice_status sluice_sampler_set_json_schema(sluice_sampler *s, sluice_ctx *ctx, const char *schema, size_t len,
                                             const int32_t *end_tokens, size_t n_end);
/* Checks that a JSON schema compiles for constrained decoding, without a
 * context: SLUICE_OK, or SLUICE_E_ARG with the reason (the schema path and
 * what is wrong) in err (NUL-terminated, truncated to err_cap). */
SLUICE_API sluice_status sluice_json_schema_check(const char *schema, size_t len, char *err, size_t err_cap);
/* -1: no constraint; 0: the output is not a complete value yet; 1: it is
 * (an end token may follow); 2: an end token was drawn. */
SLUICE_API int32_t sluice_sampler_constraint_state(const sluice_sampler *s);
/* Finish-now for a constrained sampler: the value and its end token must
 * fit in `draws` more draws, the next one included; tokens that would leave
 * no complete value reachable in time are refused, so as draws run short
 * the output steers to the shortest valid completion (string closed, items
 * and properties finished with their shortest values). The bound is counted
 * in bytes, which is a bound in tokens when every byte value is a token (as
 * in byte-level BPE vocabularies). draws < 0: no limit (the default). Set it
 * before each draw. SLUICE_E_ARG if s is NULL; no effect without a
 * constraint. */
SLUICE_API sluice_status sluice_sampler_set_draw_limit(sluice_sampler *s, int32_t draws);
/* The fewest draws that end a constrained output from here, its end token
 * included (0 once an end token was drawn); -1 without a constraint. */
SLUICE_API int32_t sluice_sampler_draws_to_finish(const sluice_sampler *s);

/* ------------------------------------------------------------------------
 * Session state: save and restore the decoding state (KDA state, conv
 * rings, MLA cache, position). The file records every shape it depends on
 * and is refused, with a named reason, for a different model.
 * ------------------------------------------------------------------------ */
SLUICE_API sluice_status sluice_state_save(sluice_ctx *ctx, const char *path);
SLUICE_API sluice_status sluice_state_load(sluice_ctx *ctx, const char *path);

/* ------------------------------------------------------------------------
 * Statistics
 * ------------------------------------------------------------------------ */
typedef struct sluice_stats {
    uint64_t tokens_evaluated;
    uint64_t expert_reads;      /* records read from disk */
    uint64_t expert_bytes_read;
    uint64_t expert_cache_hits;
    uint64_t expert_cache_misses;
    double seconds_eval;        /* wall time inside sluice_eval */
    double seconds_io_wait;     /* part of it spent waiting for expert reads */
    double seconds_read;        /* time inside reads, summed over I/O threads */
    uint64_t experts_prefetched; /* read-ahead and lookahead requests issued */
    uint64_t experts_prefetch_used;
    uint64_t cache_bytes;       /* cache capacity */
    uint64_t cache_bytes_used;
    int32_t direct_io;          /* 1 if reads use O_DIRECT, 0 if the filesystem refused it */
    uint64_t pool_fallbacks;    /* reads that found every pre-faulted record buffer taken and
                                   mapped a fresh one (memory beyond the plan while it lives) */
    /* Where each expert the forward pass fetched came from. expert_cache_hits
       (above) counts only records the cache held when asked for; records
       read ahead count here, never as cache hits. */
    uint64_t expert_fetches;
    uint64_t expert_readahead_hits; /* in flight or landed from read-ahead / lookahead */
    uint64_t expert_sync_reads;     /* read while the forward pass waited, unannounced */
    uint64_t lookahead_guesses, lookahead_guesses_used, lookahead_guesses_dropped;
    int32_t io_depth;
    char io_engine[16];         /* "io_uring", "threads" or "synchronous" */
    char cache_policy[8];
    double seconds_vision;      /* wall time decoding and encoding images (sluice_image_add) */
    uint64_t images_encoded;
    /* Memory pressure (sluice_config.no_pressure_watch). cache_bytes above
       is the planned capacity; this is the capacity now. */
    int32_t pressure_watch;         /* 1 while the watcher runs */
    uint64_t cache_capacity_bytes;  /* expert cache capacity now: planned, or less after a shrink */
    uint64_t cache_shrinks, cache_grows;
    uint64_t cache_bytes_released;  /* record buffer memory returned to the OS by shrinks */
    uint64_t memory_available;      /* the watcher's last reading */
    uint64_t pressure_reserve;      /* what it keeps available for others */
    /* Prompt reuse (sluice_rewind). */
    uint64_t checkpoints_held;      /* checkpoints in the pool now */
    uint64_t checkpoint_bytes;      /* their bytes */
    uint64_t checkpoint_capacity;   /* checkpoints the pool holds at most */
    uint64_t rewind_restores;       /* rewinds that restored KDA state (a checkpoint or the zero state) */
    uint64_t rewind_tokens_reevaluated; /* tokens rewinds evaluated again, checkpoint to target */
    /* Expert-major prefill, for the last eval of more than one token. */
    int32_t prefill_wave_tokens;    /* the largest wave */
    uint64_t prefill_waves;         /* waves it took */
    uint64_t prefill_tokens;        /* its tokens */
    int32_t prefill_moe_layers;     /* MoE layers in the two numbers below */
    double prefill_reads_per_record_mean; /* per MoE layer: records read / distinct records routed to */
    double prefill_reads_per_record_max;  /* (1.0 = each read once; lookahead guesses count) */
    /* Making the expert cache's memory resident: the first touch of a page
       is costly on many VMs, so a thread of its own touches record buffers
       ahead of use and the cache grows only into them. */
    uint64_t memory_warmed_bytes;     /* record buffer memory made resident ahead of use */
    double seconds_memory_warm;       /* the time that took, off the reads' path */
    uint64_t records_into_cold_memory; /* reads whose buffer was not resident yet (each faulted it in) */
    /* Prompt reuse: positions rewinds took by replaying the KDA recurrences
       from the replay log (no trunk or expert work), and the log's length. */
    uint64_t rewind_tokens_replayed;
    uint64_t replay_log_positions;
} sluice_stats;
/* Per MoE layer, in layer order, of the last eval of more than one token:
 * records read / distinct records its tokens were routed to. Writes at most
 * cap values and returns how many layers there are (0 before any prompt). */
SLUICE_API int32_t sluice_prefill_layer_reads(sluice_ctx *ctx, double *out, int32_t cap);
SLUICE_API sluice_status sluice_stats_get(sluice_ctx *ctx, sluice_stats *out);

/*
 * BENCHMARK ONLY. Every MoE layer then uses the experts a routing trace
 * (JSONL, the layout of ../shared/traces) recorded for the position, instead
 * of its router's choice, so a synthetic container sees a real model's
 * access pattern. The logits become meaningless. `ack` must be the string
 * "meaningless-logits"; call it on a fresh session (n_past 0). NULL path
 * turns it off.
 */
SLUICE_API sluice_status sluice_bench_route_replay(sluice_ctx *ctx, const char *trace_path, const char *ack);

/* Writes the experts every MoE layer's router picks, one JSON line per
 * evaluated position, to path (the JSONL layout of ../shared/traces:
 * {"tok": position, "layers": [[expert ids] per MoE layer]}), appending
 * after each successful sluice_eval; a failed eval writes nothing. The file
 * is created (truncated) now. NULL path stops. Changes no results. */
SLUICE_API sluice_status sluice_route_dump(sluice_ctx *ctx, const char *path);

/* Writes per-expert use counts (the learned hotlist, usage.waste format) to
 * path; the next open with this file as its hotlist pre-warms the cache. */
SLUICE_API sluice_status sluice_save_usage(sluice_ctx *ctx, const char *path);

/* ------------------------------------------------------------------------
 * Memory plan
 * ------------------------------------------------------------------------ */
typedef struct sluice_memory_plan {
    uint64_t trunk, kda_state, mla_kv, scratch, min_cache, floor;
    uint64_t record_bytes, working_set; /* one expert record; one token's records */
    uint64_t ram_limit;                 /* RAM this process may use */
    uint64_t budget, cache;             /* chosen or given budget; expert cache it leaves */
    int32_t context;
    char ram_source[160];
    char choice[320];
    /* K3 vision tower: weights plus activations for max_patches patches and
     * the embedding queue (VISION.md §2.4). Part of `floor` only in a context
     * opened with sluice_config.vision; sluice_plan_model reports it beside
     * a floor without it (floor + vision is the floor with images). */
    uint64_t vision;
    /* Resident beyond the data (part of floor; page_tables also covers the
     * cache's pages, which come out of the cache's share of the budget). */
    uint64_t runtime;          /* code, libraries, static data: measured in this process (their mappings
                                  and its heap when planned), 64 MiB when planning another machine */
    uint64_t allocator_slack;  /* freed heap the allocator keeps: 2 x the largest block, at most 64 MiB */
    uint64_t thread_stacks;    /* threads x the resident bound of one stack (2 MiB with THP "always",
                                  else 256 KiB) */
    uint64_t page_tables;      /* 8 bytes per 4 KiB page of the budget */
    int32_t threads;           /* threads counted */
    uint64_t available;        /* MemAvailable (capped by the cgroup's room) at planning; 0 = not measured */
    uint64_t reserve;          /* left to the OS and page cache by the default budget */
    uint64_t max_useful;       /* the budget that caches every expert record: no default goes above it */
    uint64_t checkpoints;      /* the prompt-reuse checkpoint pool (part of floor) */
    int32_t wave_tokens;       /* the largest prefill wave (sluice_config.prefill_wave) */
    uint64_t wave;             /* its state beyond the chunk's scratch: part of floor when the wave was
                                  given, else taken from the cache's room */
    int32_t batch_tokens;      /* a wave's routed experts run for this many tokens at once (their VQ
                                  tables are per token) */
    uint64_t batch;            /* those tables beyond the chunk's, from the cache's room */
    uint64_t sessions;         /* sessions kept aside (sluice_config.session_bytes; part of floor) */
    uint64_t replay_log;       /* the checkpoint pool's replay log (part of floor; 0 without a pool) */
} sluice_memory_plan;

/* Plans memory for a container from its manifest alone (nothing large is
 * read). budget 0 = choose. An under-floor budget returns SLUICE_E_NOMEM
 * with the floor named in err. */
SLUICE_API sluice_status sluice_plan_model(const char *path, uint64_t budget, int32_t context, const char *cgroup_root,
                                sluice_memory_plan *out, char *err, size_t err_cap);
/* The plan an open context runs under. */
SLUICE_API sluice_status sluice_memory_plan_get(sluice_ctx *ctx, sluice_memory_plan *out);

/* Plans a model from its Hugging Face config.json alone, before any weights
 * exist: the container it converts to at the default recipe (Q4G trunk, Q8G
 * embedding and head, VQ3R experts), and the memory plan on a machine with
 * ram_bytes of RAM (budget chosen as for budget 0). With a routing trace
 * (route_trace.h's JSONL; NULL for none) the hit rate is projected by
 * replaying it through the engine's cache policy (policy NULL = default)
 * with a cache holding the same fraction of the expert set as this plan's
 * cache does; without one hit_rate is -1. disk_gbps > 0 projects the
 * I/O-bound decode rate: disk_gbps / expert bytes read per token. */
typedef struct sluice_config_plan {
    char family[32];                /* "kimi-k3", "kimi-linear" or "deepseek" (V3 / R1 / K2) */
    uint64_t container_bytes;       /* on disk: trunk.bin + expert banks + codebooks */
    uint64_t trunk_file_bytes;      /* trunk.bin (the embedding included; it stays on disk) */
    uint64_t expert_bytes;          /* all expert banks */
    int32_t moe_layers, experts, top_k;
    sluice_memory_plan plan;        /* trunk, floor, budget, cache at ram_bytes */
    int32_t fits;                   /* 1 when the floor fits under 3/4 of ram_bytes */
    double cache_fraction;          /* cache records / all expert records */
    double hit_rate;                /* projected; -1 without a trace */
    double read_bytes_per_token;    /* working set x (1 - hit rate); the whole working set without a trace */
    double tok_per_s;               /* disk_gbps * 1e9 / read_bytes_per_token; 0 without disk_gbps */
} sluice_config_plan;
/* A quick probe of the disk under dir: writes a temporary file of
 * file_bytes (at least 4 records), reads random record_bytes ranges with
 * depth reads in flight (O_DIRECT where allowed) for about max_seconds, and
 * removes the file. *gbps: 1e9 bytes per second. *direct: 0 when the
 * filesystem refused O_DIRECT (the rate then includes its page cache). */
SLUICE_API sluice_status sluice_probe_disk(const char *dir, uint64_t record_bytes, uint64_t file_bytes,
                                           double max_seconds, int32_t depth, double *gbps, int32_t *direct,
                                           char *err, size_t err_cap);
SLUICE_API sluice_status sluice_plan_config(const char *config_json_path, uint64_t ram_bytes, int32_t context,
                                 const char *trace_path, const char *policy, double disk_gbps,
                                 sluice_config_plan *out, char *err, size_t err_cap);

/* ------------------------------------------------------------------------
 * Diagnostics: VQ4P rounding decisions (MODEL.md §2.3, §11)
 *
 * VQ4P's int8 lookup table is a step function of its input: an entry whose
 * scaled value T*127/M lies within float noise of a .5 can round either way
 * in two correct implementations. For a margin-aware comparison, a context
 * can record its decisions on such entries. Recording changes no numbers.
 * ------------------------------------------------------------------------ */
typedef struct sluice_vq4p_tie {
    int32_t layer;
    int32_t pos;      /* position in the session */
    int32_t kind;     /* 0 gate, 1 up, 2 down */
    int32_t expert;   /* down: the expert; gate and up: -1 (one table for the token's experts) */
    int64_t index;    /* flat table index: (v * stages + s) * entries + c */
    float value;      /* f32(T * f32(127/M)), as this engine formed it */
    int32_t q;        /* the code it used */
} sluice_vq4p_tie;

/* band > 0 (at most 0.5): from now on, sluice_eval records every table entry
 * within band code units of a rounding boundary (at most 262144 entries);
 * band 0 stops recording. Either way clears the record. Containers without
 * VQ4P experts record nothing. */
SLUICE_API sluice_status sluice_vq4p_ties_record(sluice_ctx *ctx, double band);
/* Copies the record, closest to a boundary first (buffer rules as in the
 * text functions: SLUICE_E_RANGE with *n_out set when cap is too small). */
SLUICE_API sluice_status sluice_vq4p_ties_get(sluice_ctx *ctx, sluice_vq4p_tie *out, size_t cap, size_t *n_out);

/* ------------------------------------------------------------------------
 * Images (Kimi K3's vision tower; ../shared/spec/VISION.md)
 *
 * Order of use: sluice_image_add for each image (decoded, resized to a patch
 * grid and encoded now; its embedding rows are queued), then the prompt with
 * one media block per image (sluice_image_block, or a chat render with image
 * parts), then sluice_image_expand, then ONE sluice_eval of the whole
 * expanded prompt: each pad token takes the next queued row. After an eval
 * that used any row the queue is empty; sluice_reset does not touch it.
 * Every function leaves the context as it was when it fails.
 * ------------------------------------------------------------------------ */

/* Most images queued at once. */
#define SLUICE_MAX_IMAGES 32

/* Source width and height from the file's header alone. No context needed;
 * SLUICE_E_ARG for NULL arguments, SLUICE_E_IO if the header is unreadable. */
SLUICE_API sluice_status sluice_image_dimensions(const char *path, int32_t *width, int32_t *height);
/* The same for an image's bytes in memory. */
SLUICE_API sluice_status sluice_image_dimensions_memory(const void *data, size_t len, int32_t *width, int32_t *height);
/* Decodes (PNG, JPEG, BMP, TGA, GIF, PSD), preprocesses and encodes the image
 * at path and queues its rows; *n_tokens (may be NULL) receives the number of
 * image tokens (pad positions after expansion). SLUICE_E_UNSUPPORTED without a
 * tower (context opened without sluice_config.vision, or no tower in the
 * container); SLUICE_E_IO for an unreadable, undecodable or oversized image
 * (more than 64 Mi source pixels, refused from the header before decoding);
 * SLUICE_E_ARG with SLUICE_MAX_IMAGES already queued. */
SLUICE_API sluice_status sluice_image_add(sluice_ctx *ctx, const char *path, int32_t *n_tokens);
/* The same from bytes in memory (e.g. a decoded data: URL); name labels
 * errors (may be NULL). */
SLUICE_API sluice_status sluice_image_add_memory(sluice_ctx *ctx, const void *data, size_t len, const char *name,
                                      int32_t *n_tokens);
/* Copies in[0..n) to out, each pad token replaced by its image's run, in
 * queue order. The prompt must hold exactly one pad token per queued image
 * (else SLUICE_E_ARG); buffer rules as in the text functions. out must not
 * alias in. */
SLUICE_API sluice_status sluice_image_expand(sluice_ctx *ctx, const int32_t *in, size_t n, int32_t *out, size_t cap,
                                  size_t *n_out);
/* Drops every queued image. */
SLUICE_API sluice_status sluice_image_clear(sluice_ctx *ctx);
/* The queued embedding rows, image after image: *n_out receives the float
 * count (rows x hidden); buffer rules as in the text functions. For checks
 * against a reference (tools/oracle/vision.py). */
SLUICE_API sluice_status sluice_image_embeddings(sluice_ctx *ctx, float *out, size_t cap, size_t *n_out);
/* Images queued now; 0 without a tower. */
SLUICE_API int32_t sluice_image_count(const sluice_ctx *ctx);
/* The media block of a width x height image, as ids (markup mode):
 * <|media_begin|>image WxH<|media_content|><|media_pad|><|media_end|>.
 * width or height <= 0 gives the block without the "image WxH" text.
 * SLUICE_E_UNSUPPORTED if the tokenizer lacks the four media markers. */
SLUICE_API sluice_status sluice_image_block(sluice_ctx *ctx, int32_t width, int32_t height, int32_t *out, size_t cap,
                                 size_t *n_out);

/* A chat message whose content is a list of parts: text (tokenized as
 * content, each part on its own) or an image (its media block, as markup). */
typedef struct sluice_chat_part {
    const char *text;   /* text part: bytes (NULL for an image part) */
    size_t text_len;
    int32_t width;      /* image part: source dimensions for the media block */
    int32_t height;
} sluice_chat_part;
typedef struct sluice_chat_message_parts {
    const char *role;   /* "system", "user" or "assistant" */
    const sluice_chat_part *parts;
    size_t n_parts;
} sluice_chat_message_parts;
/* As sluice_chat_render, with image parts. SLUICE_E_UNSUPPORTED when a part
 * is an image and the tokenizer lacks the media markers. */
SLUICE_API sluice_status sluice_chat_render_parts(sluice_ctx *ctx, const sluice_chat_message_parts *msgs, size_t n_msgs,
                                       int add_open, int32_t *out, size_t cap, size_t *n_out);

/* ------------------------------------------------------------------------
 * Scoring: perplexity as llama-perplexity measures it
 * ------------------------------------------------------------------------ */
/*
 * Evaluates tokens[0..n) from the session's current position and writes,
 * for every i in [first, n-1), the negative natural log of the probability
 * the model gives tokens[i+1] after tokens[0..i] into nll_out[i - first]
 * (n - 1 - first values). Logits are formed in chunks of at most 64
 * positions, so memory is 64 x vocab floats whatever n is. Call
 * sluice_reset first to score an independent window. A token id outside the
 * vocabulary is SLUICE_E_ARG.
 */
SLUICE_API sluice_status sluice_score(sluice_ctx *ctx, const int32_t *tokens, size_t n, size_t first, double *nll_out);

typedef struct sluice_ppl_stats {
    double nll_mean;      /* mean negative log-likelihood per scored token (nats) */
    double nll_se;        /* its standard error, windows as clusters */
    double ppl;           /* exp(nll_mean) */
    double ppl_lo, ppl_hi; /* 95 % CI: exp(nll_mean -+ 1.96 nll_se) */
    uint64_t n_tokens;    /* scored tokens */
    uint64_t n_windows;
} sluice_ppl_stats;

/*
 * Summarises per-window sums of NLL (window_nll[w], over window_count[w]
 * scored tokens) into a perplexity with a window-clustered 95 % interval:
 * the ratio estimator sum(nll)/sum(count) with the cluster-robust variance
 * W/(W-1) * sum_w (nll_w - mean*count_w)^2 / (sum count)^2. Tokens of one
 * window are correlated (they share a context), so windows, not tokens, are
 * the independent samples. Fewer than 2 windows give nll_se = NaN.
 */
SLUICE_API sluice_status sluice_ppl_summary(const double *window_nll, const uint64_t *window_count, size_t n_windows,
                                 sluice_ppl_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_SLUICE_H */
