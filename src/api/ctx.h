// The definition of the opaque sluice_ctx, shared by the C API's own
// translation units (sluice.cpp, text.cpp). Not installed, not public.
#pragma once
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

#include <unistd.h>

#include "model/engine.h"
#include "sluice/sluice.h"

namespace sluice {
// Tokenizer and chat format of a context, loaded on first use (text.cpp).
struct TextState;
struct TextStateDeleter {
    void operator()(TextState *t) const noexcept;
};
namespace grammar {
class TokenTable;
}
}  // namespace sluice

struct sluice_ctx {
    sluice::Engine engine;
    bool opened = false;
    // An eval that failed part-way has advanced some layers' state and not
    // others; the session is unusable until reset.
    bool broken = false;
    std::string error;
    sluice_trace_fn trace_fn = nullptr;
    void *trace_user = nullptr;
    std::unique_ptr<sluice::TextState, sluice::TextStateDeleter> text;
    // Constrained decoding's index of the vocabulary, built on first use (grammar.cpp).
    std::shared_ptr<const sluice::grammar::TokenTable> grammar_vocab;
    // The advisory lock on the container's manifest (shared, or exclusive
    // with exclusive_open): held while the context lives.
    int lock_fd = -1;
    // sluice_route_dump's file, or null.
    std::FILE *route_file = nullptr;
    std::string route_path;
    // Bytes of the sessions saved from this context (saved_sessions.cpp),
    // shared with each so one freed after the context is still subtracted.
    std::shared_ptr<std::atomic<uint64_t>> session_bytes_used = std::make_shared<std::atomic<uint64_t>>(0);

    sluice_ctx() = default;
    sluice_ctx(const sluice_ctx &) = delete;
    sluice_ctx &operator=(const sluice_ctx &) = delete;
    ~sluice_ctx() {
        if (route_file) std::fclose(route_file);
        if (lock_fd >= 0) ::close(lock_fd);  // releases the flock
    }
};

namespace sluice::api {
// Every C API entry point reports a failure this way: the message stays on
// the context (sluice_last_error) and the code is returned. One definition
// for all of src/api: copies per file had drifted (some skipped the null
// check) and collided when the files are compiled together.
inline sluice_status fail(sluice_ctx *ctx, sluice_status code, const std::string &msg) {
    if (ctx) ctx->error = msg;
    return code;
}
inline sluice_status fail(sluice_ctx *ctx, const sluice::Status &st) { return fail(ctx, st.code(), st.message()); }
inline sluice_status need_open(sluice_ctx *ctx) {
    if (!ctx) return SLUICE_E_ARG;
    if (!ctx->opened) return fail(ctx, SLUICE_E_STATE, "the context did not open a model");
    return SLUICE_OK;
}
}  // namespace sluice::api
