// The C API's constrained decoding: a JSON schema compiled to a grammar and
// set on a sampler as its constraint (src/grammar).
#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "api/ctx.h"
#include "api/sampler.h"
#include "grammar/constraint.h"
#include "grammar/json_schema.h"

namespace {

using namespace sluice::grammar;

using sluice::api::fail;

// Every token's bytes, indexed once per context: the mask needs them all.
sluice_status vocab_of(sluice_ctx *ctx, std::shared_ptr<const TokenTable> *out) {
    if (ctx->grammar_vocab) return *out = ctx->grammar_vocab, SLUICE_OK;
    const int32_t V = sluice_n_vocab(ctx);
    if (V <= 0) return fail(ctx, SLUICE_E_STATE, "constrained decoding needs an open model");
    if (sluice_token_eos(ctx) < 0)
        return fail(ctx, SLUICE_E_UNSUPPORTED, "constrained decoding needs the container's tokenizer (tokenizer.model)");
    std::vector<std::string> bytes((size_t)V);
    std::vector<bool> usable((size_t)V, false);
    std::vector<char> buf(256);
    for (int32_t id = 0; id < V; id++) {
        if (sluice_token_is_control(ctx, id)) continue;
        size_t n = 0;
        sluice_status st = sluice_detokenize(ctx, &id, 1, buf.data(), buf.size(), &n);
        if (st == SLUICE_E_RANGE && n > buf.size()) {
            buf.resize(n);
            st = sluice_detokenize(ctx, &id, 1, buf.data(), buf.size(), &n);
        }
        if (st != SLUICE_OK) continue;  // an id without text (padding rows) is never allowed
        bytes[(size_t)id].assign(buf.data(), n);
        usable[(size_t)id] = true;
    }
    ctx->grammar_vocab = std::make_shared<const TokenTable>(std::move(bytes), usable);
    *out = ctx->grammar_vocab;
    return SLUICE_OK;
}

}  // namespace

extern "C" {

sluice_status sluice_sampler_set_json_schema(sluice_sampler *s, sluice_ctx *ctx, const char *schema, size_t len,
                                             const int32_t *end_tokens, size_t n_end) {
    if (!ctx) return SLUICE_E_ARG;
    if (!s) return fail(ctx, SLUICE_E_ARG, "sluice_sampler_set_json_schema: the sampler is NULL");
    if (!end_tokens && n_end > 0) return fail(ctx, SLUICE_E_ARG, "sluice_sampler_set_json_schema: end_tokens is NULL");
    try {
        std::shared_ptr<const TokenTable> vocab;
        if (sluice_status st = vocab_of(ctx, &vocab)) return st;
        auto g = std::make_shared<Grammar>();
        Limits lim;
        if (!schema || len == 0) {
            *g = any_json_object(lim);
        } else {
            std::string err;
            if (!compile_json_schema(std::string_view(schema, len), lim, g.get(), &err))
                return fail(ctx, SLUICE_E_ARG, "JSON schema " + err);
        }
        std::vector<int32_t> end(end_tokens, end_tokens + n_end);
        if (end.empty()) end.push_back(sluice_token_eos(ctx));
        for (int32_t e : end)
            if (e < 0 || e >= vocab->vocab())
                return fail(ctx, SLUICE_E_RANGE, "end token " + std::to_string(e) + " is outside the vocabulary");
        s->s.set_constraint(std::make_shared<GrammarConstraint>(std::move(g), std::move(vocab), std::move(end)));
        return SLUICE_OK;
    } catch (const std::bad_alloc &) {
        return fail(ctx, SLUICE_E_NOMEM, "sluice_sampler_set_json_schema: out of memory");
    }
}

int32_t sluice_sampler_constraint_state(const sluice_sampler *s) {
    if (!s || !s->s.constraint()) return -1;
    const auto *c = static_cast<const GrammarConstraint *>(s->s.constraint());
    if (c->done()) return 2;
    return c->matcher().accepting() ? 1 : 0;
}

sluice_status sluice_sampler_set_draw_limit(sluice_sampler *s, int32_t draws) {
    if (!s) return SLUICE_E_ARG;
    if (s->s.constraint()) s->s.constraint()->set_draw_limit(draws);
    return SLUICE_OK;
}

int32_t sluice_sampler_draws_to_finish(const sluice_sampler *s) {
    if (!s || !s->s.constraint()) return -1;
    return s->s.constraint()->draws_to_finish();
}

}  // extern "C"
