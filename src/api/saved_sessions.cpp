// sluice_session_*: sessions kept aside (model/saved_session.cpp), with
// their bytes counted against the context's session_bytes.
#include <algorithm>
#include <new>

#include "api/ctx.h"

struct sluice_session {
    sluice::SavedSession s;
    std::shared_ptr<std::atomic<uint64_t>> used;  // the saving context's count
    ~sluice_session() {
        if (used) used->fetch_sub(s.bytes);
    }
};

namespace {
sluice_status fail(sluice_ctx *ctx, sluice_status code, const std::string &msg) {
    if (ctx) ctx->error = msg;
    return code;
}

sluice_status need_session(sluice_ctx *ctx, const char *fn) {
    if (!ctx) return SLUICE_E_ARG;
    if (!ctx->opened) return fail(ctx, SLUICE_E_STATE, std::string(fn) + ": the context is not open");
    if (ctx->engine.metadata_only())
        return fail(ctx, SLUICE_E_STATE, std::string(fn) + ": the context was opened metadata-only");
    return SLUICE_OK;
}
}  // namespace

sluice_status sluice_session_save(sluice_ctx *ctx, sluice_session **out) {
    if (sluice_status s = need_session(ctx, "sluice_session_save")) return s;
    if (!out) return fail(ctx, SLUICE_E_ARG, "sluice_session_save: out is NULL");
    *out = nullptr;
    if (ctx->broken)
        return fail(ctx, SLUICE_E_STATE, "an earlier evaluation failed part-way; call sluice_reset first");
    const uint64_t limit = ctx->engine.memory_plan().sessions;
    try {
        auto h = std::make_unique<sluice_session>();
        sluice::Status st = ctx->engine.save_session(&h->s);
        if (!st) return fail(ctx, st.code(), st.message());
        // Counted before it is handed out; two threads saving into one
        // context at once cannot both pass the limit.
        uint64_t have = ctx->session_bytes_used->load();
        do {
            if (have + h->s.bytes > limit)
                return fail(ctx, SLUICE_E_NOMEM,
                            "sluice_session_save: the session holds " + std::to_string(h->s.bytes) +
                                " bytes; saved sessions already hold " + std::to_string(have) + " of session_bytes " +
                                std::to_string(limit) + " (free one, or open with a larger session_bytes)");
        } while (!ctx->session_bytes_used->compare_exchange_weak(have, have + h->s.bytes));
        h->used = ctx->session_bytes_used;
        *out = h.release();
        return SLUICE_OK;
    } catch (const std::bad_alloc &) {
        return fail(ctx, SLUICE_E_NOMEM, "sluice_session_save: out of memory");
    } catch (const std::exception &e) {
        // Evaluating what a rewind left (Engine::settle) reads experts.
        return fail(ctx, SLUICE_E_IO, std::string("sluice_session_save: ") + e.what());
    }
}

sluice_status sluice_session_restore(sluice_ctx *ctx, const sluice_session *s) {
    if (sluice_status st = need_session(ctx, "sluice_session_restore")) return st;
    if (!s) return fail(ctx, SLUICE_E_ARG, "sluice_session_restore: s is NULL");
    try {
        sluice::Status st = ctx->engine.restore_session(s->s);
        if (!st) return fail(ctx, st.code(), st.message());
    } catch (const std::bad_alloc &) {
        // Part of the live session may have been replaced: unusable until reset.
        ctx->broken = true;
        return fail(ctx, SLUICE_E_NOMEM, "sluice_session_restore: out of memory; call sluice_reset");
    }
    ctx->broken = false;
    return SLUICE_OK;
}

uint64_t sluice_session_bytes(const sluice_session *s) { return s ? s->s.bytes : 0; }

sluice_status sluice_session_saved_tokens(const sluice_session *s, int32_t *out, size_t cap, size_t *n_out) {
    if (!s || !n_out) return SLUICE_E_ARG;
    *n_out = s->s.tokens.size();
    if (s->s.tokens.size() > cap) return SLUICE_E_RANGE;
    if (!s->s.tokens.empty() && !out) return SLUICE_E_ARG;
    std::copy(s->s.tokens.begin(), s->s.tokens.end(), out);
    return SLUICE_OK;
}

void sluice_session_free(sluice_session *s) { delete s; }
