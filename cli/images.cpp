#include "cli/images.h"

#include <cstdio>

#include "cli/text_gen.h"

namespace sluice {

bool queue_images(sluice_ctx *ctx, const std::vector<std::string> &paths, const char *cmd, bool quiet,
                  std::vector<QueuedImage> *out) {
    out->clear();
    for (const std::string &p : paths) {
        QueuedImage q;
        q.path = p;
        sluice_status st = sluice_image_add(ctx, p.c_str(), &q.tokens);
        if (st != SLUICE_OK) {
            std::fprintf(stderr, "sluice %s: %s: %s\n", cmd, sluice_status_name(st), sluice_last_error(ctx));
            sluice_image_clear(ctx);
            out->clear();
            return false;
        }
        if (sluice_image_dimensions(p.c_str(), &q.width, &q.height) != SLUICE_OK) q.width = q.height = 0;
        if (!quiet) std::fprintf(stderr, "[%s: %d image tokens]\n", p.c_str(), q.tokens);
        out->push_back(q);
    }
    return true;
}

std::vector<sluice_chat_part> image_parts(const std::vector<QueuedImage> &imgs, const std::string &text) {
    std::vector<sluice_chat_part> parts;
    for (const QueuedImage &q : imgs) parts.push_back({nullptr, 0, q.width, q.height});
    parts.push_back({text.data(), text.size(), 0, 0});
    return parts;
}

bool image_blocks(sluice_ctx *ctx, const std::vector<QueuedImage> &imgs, const char *cmd, std::vector<int32_t> *ids) {
    for (const QueuedImage &q : imgs) {
        std::vector<int32_t> b;
        sluice_status st = fill_all(b, 32, [&](int32_t *o, size_t cap, size_t *n) {
            return sluice_image_block(ctx, q.width, q.height, o, cap, n);
        });
        if (st != SLUICE_OK) {
            std::fprintf(stderr, "sluice %s: %s: %s\n", cmd, sluice_status_name(st), sluice_last_error(ctx));
            return false;
        }
        ids->insert(ids->end(), b.begin(), b.end());
    }
    return true;
}

bool expand_images(sluice_ctx *ctx, const char *cmd, std::vector<int32_t> *ids) {
    if (sluice_image_count(ctx) == 0) return true;
    std::vector<int32_t> out;
    sluice_status st = fill_all(out, ids->size() + 256, [&](int32_t *o, size_t cap, size_t *n) {
        return sluice_image_expand(ctx, ids->data(), ids->size(), o, cap, n);
    });
    if (st != SLUICE_OK) {
        std::fprintf(stderr, "sluice %s: %s: %s\n", cmd, sluice_status_name(st), sluice_last_error(ctx));
        return false;
    }
    *ids = std::move(out);
    return true;
}

}  // namespace sluice
