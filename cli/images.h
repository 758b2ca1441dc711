// Image input for the CLI (run, eval, chat): queueing images through the C
// API, their media blocks, and the expansion of the prompt.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/sluice.h"

namespace sluice {

struct QueuedImage {
    std::string path;
    int32_t width = 0, height = 0;  // source dimensions (0 if the header could not be read)
    int32_t tokens = 0;
};

// Adds every image in order and says "[PATH: N image tokens]" on stderr
// (unless quiet). If one fails, the error is printed with `cmd` and the whole
// queue is cleared: nothing stays half-attached.
bool queue_images(sluice_ctx *ctx, const std::vector<std::string> &paths, const char *cmd, bool quiet,
                  std::vector<QueuedImage> *out);
// The chat parts of a user turn: one image part per image, then the text.
std::vector<sluice_chat_part> image_parts(const std::vector<QueuedImage> &imgs, const std::string &text);
// The media blocks of the images, concatenated (markup).
bool image_blocks(sluice_ctx *ctx, const std::vector<QueuedImage> &imgs, const char *cmd, std::vector<int32_t> *ids);
// Replaces each pad by its image's run (no-op without images).
bool expand_images(sluice_ctx *ctx, const char *cmd, std::vector<int32_t> *ids);

}  // namespace sluice
