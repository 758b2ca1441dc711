// The C API's image functions (VISION.md §7): a thin shell over the
// engine's image queue. Each leaves the context unchanged when it fails.
#include <new>
#include <string>
#include <vector>

#include "api/ctx.h"
#include "sluice/sluice.h"
#include "vision/image.h"

namespace {

using sluice::api::fail;
using sluice::api::need_open;

sluice_status add_bytes(sluice_ctx *ctx, const uint8_t *data, size_t len, const std::string &name, int32_t *n) {
    int tokens = 0;
    sluice::Status st;
    try {
        st = ctx->engine.image_add(data, len, name, &tokens);
    } catch (const std::bad_alloc &) {
        return fail(ctx, SLUICE_E_NOMEM, name + ": out of memory while encoding the image");
    }
    if (!st) return fail(ctx, st);
    if (n) *n = tokens;
    return SLUICE_OK;
}

}  // namespace

extern "C" {

sluice_status sluice_image_dimensions(const char *path, int32_t *width, int32_t *height) {
    if (!path || !width || !height) return SLUICE_E_ARG;
    std::vector<uint8_t> bytes;
    // Only the header is needed; 1 MiB holds every format's header.
    sluice::File f;
    if (!f.open_read(path)) return SLUICE_E_IO;
    bytes.resize((size_t)std::min<uint64_t>(f.size(), 1u << 20));
    if (bytes.empty() || !f.pread_all(bytes.data(), bytes.size(), 0)) return SLUICE_E_IO;
    int w = 0, h = 0;
    if (!sluice::vision::image_dimensions(bytes.data(), bytes.size(), path, &w, &h)) return SLUICE_E_IO;
    *width = w;
    *height = h;
    return SLUICE_OK;
}

sluice_status sluice_image_dimensions_memory(const void *data, size_t len, int32_t *width, int32_t *height) {
    if (!data || !width || !height) return SLUICE_E_ARG;
    int w = 0, h = 0;
    if (!sluice::vision::image_dimensions((const uint8_t *)data, len, "image", &w, &h)) return SLUICE_E_IO;
    *width = w;
    *height = h;
    return SLUICE_OK;
}

sluice_status sluice_image_add(sluice_ctx *ctx, const char *path, int32_t *n_tokens) {
    if (sluice_status s = need_open(ctx)) return s;
    if (!path || !*path) return fail(ctx, SLUICE_E_ARG, "sluice_image_add: path is empty");
    if (!ctx->engine.has_vision()) return add_bytes(ctx, nullptr, 0, path, n_tokens);  // the named refusal
    std::vector<uint8_t> bytes;
    sluice::Status st = sluice::vision::read_image_file(path, &bytes);
    if (!st) return fail(ctx, st);
    return add_bytes(ctx, bytes.data(), bytes.size(), path, n_tokens);
}

sluice_status sluice_image_add_memory(sluice_ctx *ctx, const void *data, size_t len, const char *name,
                                      int32_t *n_tokens) {
    if (sluice_status s = need_open(ctx)) return s;
    const std::string nm = name && *name ? name : "image";
    if (!data || len == 0) return fail(ctx, SLUICE_E_ARG, nm + ": no image bytes");
    return add_bytes(ctx, (const uint8_t *)data, len, nm, n_tokens);
}

sluice_status sluice_image_expand(sluice_ctx *ctx, const int32_t *in, size_t n, int32_t *out, size_t cap,
                                  size_t *n_out) {
    if (sluice_status s = need_open(ctx)) return s;
    if (!n_out) return fail(ctx, SLUICE_E_ARG, "sluice_image_expand: n_out is NULL");
    if (!in && n > 0) return fail(ctx, SLUICE_E_ARG, "sluice_image_expand: in is NULL");
    if (!out && cap > 0) return fail(ctx, SLUICE_E_ARG, "sluice_image_expand: out is NULL with a non-zero capacity");
    std::vector<int32_t> v;
    try {
        sluice::Status st = ctx->engine.image_expand(in, n, &v);
        if (!st) return fail(ctx, st);
    } catch (const std::bad_alloc &) {
        return fail(ctx, SLUICE_E_NOMEM, "sluice_image_expand: out of memory");
    }
    *n_out = v.size();
    if (v.size() > cap)
        return fail(ctx, SLUICE_E_RANGE, "sluice_image_expand: " + std::to_string(v.size()) +
                                             " needed, capacity " + std::to_string(cap));
    if (in && out && out < in + n && in < out + v.size())
        return fail(ctx, SLUICE_E_ARG, "sluice_image_expand: out overlaps in");
    std::copy(v.begin(), v.end(), out);
    return SLUICE_OK;
}

sluice_status sluice_image_clear(sluice_ctx *ctx) {
    if (sluice_status s = need_open(ctx)) return s;
    ctx->engine.image_clear();
    return SLUICE_OK;
}

sluice_status sluice_image_embeddings(sluice_ctx *ctx, float *out, size_t cap, size_t *n_out) {
    if (sluice_status s = need_open(ctx)) return s;
    if (!n_out) return fail(ctx, SLUICE_E_ARG, "sluice_image_embeddings: n_out is NULL");
    if (!out && cap > 0) return fail(ctx, SLUICE_E_ARG, "sluice_image_embeddings: out is NULL with a non-zero capacity");
    const std::vector<float> &rows = ctx->engine.image_rows();
    *n_out = rows.size();
    if (rows.size() > cap)
        return fail(ctx, SLUICE_E_RANGE, "sluice_image_embeddings: " + std::to_string(rows.size()) +
                                             " floats needed, capacity " + std::to_string(cap));
    std::copy(rows.begin(), rows.end(), out);
    return SLUICE_OK;
}

int32_t sluice_image_count(const sluice_ctx *ctx) {
    return ctx && ctx->opened ? (int32_t)ctx->engine.images_queued() : 0;
}

}  // extern "C"
