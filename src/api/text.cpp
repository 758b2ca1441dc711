// The C API's text functions: tokenizer, detokenizer, chat rendering.
//
// The tokenizer is loaded from the container directory on first use and
// kept (with the outcome of a failed load) in ctx->text. Buffers follow the
// header's rule: the count needed goes to *n_out; a capacity below it is
// SLUICE_E_RANGE and nothing is written (nor consumed, for the detokenizer).
#include <sys/stat.h>

#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "api/ctx.h"
#include "sluice/sluice.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace sluice {

struct TextState {
    Status load_status;  // why the tokenizer is missing, if it is
    std::optional<tok::Tokenizer> tok;
    bool chat_tried = false;
    Status chat_status;
    tok::ChatFormat chat;
    std::string stop;
    int32_t stop_token = -1;
};

void TextStateDeleter::operator()(TextState *t) const noexcept { delete t; }

}  // namespace sluice

struct sluice_detok {
    sluice_ctx *ctx;
    sluice::tok::StreamDecoder dec;
};

namespace {

using sluice::Status;
using sluice::TextState;
namespace tok = sluice::tok;

using sluice::api::fail;

// Anything at the name counts as present: a FIFO, directory or dangling
// link where chat.json belongs must be a named error from the checked read,
// not a silent fall-back to the built-in chat format.
bool file_exists(const std::string &p) {
    struct stat sb;
    return ::lstat(p.c_str(), &sb) == 0;
}

// Loads the tokenizer on first use. Returns the status to report.
sluice_status need_tok(sluice_ctx *ctx, const tok::Tokenizer **out) {
    if (!ctx) return SLUICE_E_ARG;
    if (!ctx->opened) return fail(ctx, SLUICE_E_STATE, "the context did not open a model");
    if (!ctx->text) {
        TextState *t = new (std::nothrow) TextState();
        if (!t) return fail(ctx, SLUICE_E_NOMEM, "out of memory loading the tokenizer");
        ctx->text.reset(t);
        const std::string dir = ctx->engine.container().dir();
        if (!file_exists(dir + "/tokenizer.model") && !file_exists(dir + "/tiktoken.model")) {
            t->load_status = Status(SLUICE_E_UNSUPPORTED, dir + "/tokenizer.model: not found; the container has no "
                                                                "tokenizer, so text functions are unavailable "
                                                                "(use token ids)");
        } else {
            tok::LoadOptions opt;
            opt.pattern = tok::Pattern::kimi;
            const int eos = ctx->engine.config().eos_token_id;
            opt.eos_override = eos > 0 ? eos : 0;
            try {
                auto r = tok::Tokenizer::load(dir, {}, opt);
                if (r)
                    t->tok.emplace(std::move(r.value()));
                else
                    t->load_status = r.status();
            } catch (const std::bad_alloc &) {
                t->load_status = Status(SLUICE_E_NOMEM, dir + ": out of memory loading the tokenizer");
            }
        }
    }
    if (!ctx->text->tok) return fail(ctx, ctx->text->load_status);
    *out = &*ctx->text->tok;
    return SLUICE_OK;
}

// Picks the chat format on first use: chat.json, else the family's built-in.
sluice_status need_chat(sluice_ctx *ctx, const tok::Tokenizer **tk) {
    if (sluice_status s = need_tok(ctx, tk)) return s;
    TextState &t = *ctx->text;
    if (!t.chat_tried) {
        t.chat_tried = true;
        const std::string path = ctx->engine.container().dir() + "/chat.json";
        if (file_exists(path)) {
            auto r = tok::load_chat_json(path);
            if (r)
                t.chat = r.value();
            else
                t.chat_status = r.status();
        } else {
            sluice_info info;
            std::string family;
            if (sluice_info_get(ctx, &info) == SLUICE_OK) family = info.family;
            auto f = tok::choose_builtin_chat_format(**tk, family);
            if (f)
                t.chat = *f;
            else
                t.chat_status = Status(SLUICE_E_UNSUPPORTED,
                                       path + ": not found, and no built-in chat format fits this tokenizer (family " +
                                           family + "): its control tokens lack the format's markers");
        }
        if (t.chat_status.is_ok()) {
            t.stop = t.chat.assistant_suffix;
            if (auto id = tok::chat_stop_token(**tk, t.chat)) t.stop_token = *id;
        }
    }
    if (!t.chat_status.is_ok()) return fail(ctx, t.chat_status);
    return SLUICE_OK;
}

template <class T>
sluice_status deliver(sluice_ctx *ctx, const char *fn, const std::vector<T> &v, T *out, size_t cap, size_t *n_out) {
    if (n_out) *n_out = v.size();
    if (v.size() > cap)
        return fail(ctx, SLUICE_E_RANGE,
                    std::string(fn) + ": " + std::to_string(v.size()) + " needed, capacity " + std::to_string(cap));
    if (!v.empty()) std::memcpy(out, v.data(), v.size() * sizeof(T));
    return SLUICE_OK;
}

sluice_status deliver_bytes(sluice_ctx *ctx, const char *fn, const std::string &s, char *out, size_t cap,
                            size_t *n_out) {
    if (n_out) *n_out = s.size();
    if (s.size() > cap)
        return fail(ctx, SLUICE_E_RANGE,
                    std::string(fn) + ": " + std::to_string(s.size()) + " bytes needed, capacity " +
                        std::to_string(cap));
    if (!s.empty()) std::memcpy(out, s.data(), s.size());
    return SLUICE_OK;
}

sluice_status check_buf(sluice_ctx *ctx, const char *fn, const void *out, size_t cap, size_t *n_out) {
    if (!n_out) return fail(ctx, SLUICE_E_ARG, std::string(fn) + ": n_out is NULL");
    if (!out && cap > 0) return fail(ctx, SLUICE_E_ARG, std::string(fn) + ": out is NULL with a non-zero capacity");
    return SLUICE_OK;
}

sluice_status tokenize_impl(sluice_ctx *ctx, const char *fn, bool markup, const char *text, size_t len, int32_t *out,
                            size_t cap, size_t *n_out) {
    const tok::Tokenizer *tk;
    if (sluice_status s = need_tok(ctx, &tk)) return s;
    if (sluice_status s = check_buf(ctx, fn, out, cap, n_out)) return s;
    if (!text && len > 0) return fail(ctx, SLUICE_E_ARG, std::string(fn) + ": text is NULL");
    std::string_view sv(text ? text : "", len);
    try {
        std::vector<int32_t> ids = markup ? tk->encode_markup(sv) : tk->encode(sv);
        return deliver(ctx, fn, ids, out, cap, n_out);
    } catch (const std::bad_alloc &) {
        return fail(ctx, SLUICE_E_NOMEM, std::string(fn) + ": out of memory");
    }
}

std::optional<tok::Role> parse_role(const char *r) {
    if (!r) return std::nullopt;
    if (!std::strcmp(r, "system")) return tok::Role::system;
    if (!std::strcmp(r, "user")) return tok::Role::user;
    if (!std::strcmp(r, "assistant")) return tok::Role::assistant;
    return std::nullopt;
}

}  // namespace

extern "C" {

sluice_status sluice_tokenize(sluice_ctx *ctx, const char *text, size_t len, int32_t *out, size_t cap,
                              size_t *n_out) {
    return tokenize_impl(ctx, "sluice_tokenize", false, text, len, out, cap, n_out);
}

sluice_status sluice_tokenize_markup(sluice_ctx *ctx, const char *text, size_t len, int32_t *out, size_t cap,
                                     size_t *n_out) {
    return tokenize_impl(ctx, "sluice_tokenize_markup", true, text, len, out, cap, n_out);
}

sluice_status sluice_detokenize(sluice_ctx *ctx, const int32_t *ids, size_t n, char *out, size_t cap,
                                size_t *n_out) {
    const tok::Tokenizer *tk;
    if (sluice_status s = need_tok(ctx, &tk)) return s;
    if (sluice_status s = check_buf(ctx, "sluice_detokenize", out, cap, n_out)) return s;
    if (!ids && n > 0) return fail(ctx, SLUICE_E_ARG, "sluice_detokenize: ids is NULL");
    try {
        auto r = tk->decode(std::span<const int32_t>(ids ? ids : (const int32_t *)nullptr, n));
        if (!r) return fail(ctx, r.status());
        return deliver_bytes(ctx, "sluice_detokenize", r.value(), out, cap, n_out);
    } catch (const std::bad_alloc &) {
        return fail(ctx, SLUICE_E_NOMEM, "sluice_detokenize: out of memory");
    }
}

int32_t sluice_token_bos(const sluice_ctx *cctx) {
    // The tokenizer loads lazily; a context is never really const.
    sluice_ctx *ctx = const_cast<sluice_ctx *>(cctx);
    const tok::Tokenizer *tk;
    return need_tok(ctx, &tk) == SLUICE_OK ? tk->bos() : -1;
}

int32_t sluice_token_eos(const sluice_ctx *cctx) {
    sluice_ctx *ctx = const_cast<sluice_ctx *>(cctx);
    const tok::Tokenizer *tk;
    return need_tok(ctx, &tk) == SLUICE_OK ? tk->eos() : -1;
}

int32_t sluice_token_is_control(const sluice_ctx *cctx, int32_t id) {
    sluice_ctx *ctx = const_cast<sluice_ctx *>(cctx);
    const tok::Tokenizer *tk;
    return need_tok(ctx, &tk) == SLUICE_OK && tk->is_special(id) ? 1 : 0;
}

sluice_detok *sluice_detok_new(sluice_ctx *ctx) {
    const tok::Tokenizer *tk;
    if (need_tok(ctx, &tk) != SLUICE_OK) return nullptr;
    sluice_detok *d = new (std::nothrow) sluice_detok{ctx, tok::StreamDecoder(*tk, /*replace_invalid=*/true)};
    if (!d) fail(ctx, SLUICE_E_NOMEM, "sluice_detok_new: out of memory");
    return d;
}

sluice_status sluice_detok_push(sluice_detok *d, int32_t id, char *out, size_t cap, size_t *n_out) {
    if (!d) return SLUICE_E_ARG;
    if (sluice_status s = check_buf(d->ctx, "sluice_detok_push", out, cap, n_out)) return s;
    try {
        // Push into a copy: a too-small buffer must leave the decoder as it was.
        tok::StreamDecoder next = d->dec;
        std::string text;
        Status st = next.push(id, text);
        if (!st) {
            *n_out = 0;
            return fail(d->ctx, st);
        }
        if (sluice_status s = deliver_bytes(d->ctx, "sluice_detok_push", text, out, cap, n_out)) return s;
        d->dec = std::move(next);
        return SLUICE_OK;
    } catch (const std::bad_alloc &) {
        return fail(d->ctx, SLUICE_E_NOMEM, "sluice_detok_push: out of memory");
    }
}

sluice_status sluice_detok_flush(sluice_detok *d, char *out, size_t cap, size_t *n_out) {
    if (!d) return SLUICE_E_ARG;
    if (sluice_status s = check_buf(d->ctx, "sluice_detok_flush", out, cap, n_out)) return s;
    try {
        tok::StreamDecoder next = d->dec;
        std::string text;
        next.finish(text);
        if (sluice_status s = deliver_bytes(d->ctx, "sluice_detok_flush", text, out, cap, n_out)) return s;
        d->dec = std::move(next);
        return SLUICE_OK;
    } catch (const std::bad_alloc &) {
        return fail(d->ctx, SLUICE_E_NOMEM, "sluice_detok_flush: out of memory");
    }
}

size_t sluice_detok_max_chunk(const sluice_detok *d) { return d ? d->dec.max_output_per_push() : 0; }

void sluice_detok_free(sluice_detok *d) { delete d; }

sluice_status sluice_chat_render(sluice_ctx *ctx, const sluice_chat_message *msgs, size_t n_msgs, int add_open,
                                 int32_t *out, size_t cap, size_t *n_out) {
    const tok::Tokenizer *tk;
    if (sluice_status s = need_chat(ctx, &tk)) return s;
    if (sluice_status s = check_buf(ctx, "sluice_chat_render", out, cap, n_out)) return s;
    if (!msgs && n_msgs > 0) return fail(ctx, SLUICE_E_ARG, "sluice_chat_render: msgs is NULL");
    try {
        std::vector<tok::Message> m;
        m.reserve(n_msgs);
        for (size_t i = 0; i < n_msgs; i++) {
            auto role = parse_role(msgs[i].role);
            if (!role)
                return fail(ctx, SLUICE_E_ARG,
                            "sluice_chat_render: message " + std::to_string(i) + ": role '" +
                                (msgs[i].role ? msgs[i].role : "(null)") +
                                "' is not one of system, user, assistant");
            if (!msgs[i].content)
                return fail(ctx, SLUICE_E_ARG, "sluice_chat_render: message " + std::to_string(i) + ": content is NULL");
            m.push_back({*role, msgs[i].content});
        }
        std::vector<int32_t> ids = tok::render_chat(*tk, ctx->text->chat, m, add_open != 0);
        return deliver(ctx, "sluice_chat_render", ids, out, cap, n_out);
    } catch (const std::bad_alloc &) {
        return fail(ctx, SLUICE_E_NOMEM, "sluice_chat_render: out of memory");
    }
}

}  // extern "C"

namespace {

// K3's media block (VISION.md §6.1); the four markers must be specials.
sluice_status media_block(sluice_ctx *ctx, const tok::Tokenizer &tk, int32_t w, int32_t h, std::string *out) {
    for (const char *m : {"<|media_begin|>", "<|media_content|>", "<|media_pad|>", "<|media_end|>"})
        if (!tk.special_id(m))
            return fail(ctx, SLUICE_E_UNSUPPORTED,
                        std::string("this tokenizer has no ") + m +
                            " special token: image blocks need Kimi K3's media markup");
    const std::string dims = w > 0 && h > 0 ? "image " + std::to_string(w) + "x" + std::to_string(h) : "";
    *out = "<|media_begin|>" + dims + "<|media_content|><|media_pad|><|media_end|>";
    return SLUICE_OK;
}

}  // namespace

extern "C" {

sluice_status sluice_image_block(sluice_ctx *ctx, int32_t width, int32_t height, int32_t *out, size_t cap,
                                 size_t *n_out) {
    const tok::Tokenizer *tk;
    if (sluice_status s = need_tok(ctx, &tk)) return s;
    if (sluice_status s = check_buf(ctx, "sluice_image_block", out, cap, n_out)) return s;
    try {
        std::string block;
        if (sluice_status s = media_block(ctx, *tk, width, height, &block)) return s;
        return deliver(ctx, "sluice_image_block", tk->encode_markup(block), out, cap, n_out);
    } catch (const std::bad_alloc &) {
        return fail(ctx, SLUICE_E_NOMEM, "sluice_image_block: out of memory");
    }
}

sluice_status sluice_chat_render_parts(sluice_ctx *ctx, const sluice_chat_message_parts *msgs, size_t n_msgs,
                                       int add_open, int32_t *out, size_t cap, size_t *n_out) {
    const tok::Tokenizer *tk;
    const char *fn = "sluice_chat_render_parts";
    if (sluice_status s = need_chat(ctx, &tk)) return s;
    if (sluice_status s = check_buf(ctx, fn, out, cap, n_out)) return s;
    if (!msgs && n_msgs > 0) return fail(ctx, SLUICE_E_ARG, std::string(fn) + ": msgs is NULL");
    try {
        // The segments of chat_segments, with each text part a content
        // segment of its own and each image part its media block as markup
        // (CHAT_K3.md §3.3, §7).
        const tok::ChatFormat &f = ctx->text->chat;
        std::vector<tok::Segment> segs;
        auto markup = [&](const std::string &t) {
            if (!t.empty()) segs.push_back({true, t});
        };
        markup(f.begin);
        for (size_t i = 0; i < n_msgs; i++) {
            const std::string at = std::string(fn) + ": message " + std::to_string(i);
            auto role = parse_role(msgs[i].role);
            if (!role)
                return fail(ctx, SLUICE_E_ARG,
                            at + ": role '" + (msgs[i].role ? msgs[i].role : "(null)") +
                                "' is not one of system, user, assistant");
            if (!msgs[i].parts && msgs[i].n_parts > 0) return fail(ctx, SLUICE_E_ARG, at + ": parts is NULL");
            const bool sys = *role == tok::Role::system, usr = *role == tok::Role::user;
            markup(sys ? f.system_prefix : usr ? f.user_prefix : f.assistant_prefix);
            for (size_t j = 0; j < msgs[i].n_parts; j++) {
                const sluice_chat_part &p = msgs[i].parts[j];
                if (p.text) {
                    if (p.text_len > 0) segs.push_back({false, std::string(p.text, p.text_len)});
                } else {
                    std::string block;
                    if (sluice_status s = media_block(ctx, *tk, p.width, p.height, &block)) return s;
                    segs.push_back({true, block});
                }
            }
            markup(sys ? f.system_suffix : usr ? f.user_suffix : f.assistant_suffix);
        }
        if (add_open) markup(f.open_text());
        return deliver(ctx, fn, tok::encode_segments(*tk, segs), out, cap, n_out);
    } catch (const std::bad_alloc &) {
        return fail(ctx, SLUICE_E_NOMEM, std::string(fn) + ": out of memory");
    }
}

const char *sluice_chat_stop(sluice_ctx *ctx) {
    const tok::Tokenizer *tk;
    if (need_chat(ctx, &tk) != SLUICE_OK) return "";
    return ctx->text->stop.c_str();
}

int32_t sluice_chat_stop_token(sluice_ctx *ctx) {
    const tok::Tokenizer *tk;
    if (need_chat(ctx, &tk) != SLUICE_OK) return -1;
    return ctx->text->stop_token;
}

}  // extern "C"
