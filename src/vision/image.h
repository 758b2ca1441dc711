// Image input for K3's vision tower (VISION.md §3-4): decoding a file's
// bytes to 8-bit RGB, choosing the patch grid under the patch budget, and
// resampling + normalising to the [L][588] patch tensor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace sluice::vision {

constexpr int kPatch = 14;                          // the only patch side K3 uses
constexpr int kPatchValues = 3 * kPatch * kPatch;   // 588 values per patch
constexpr uint64_t kMaxSourcePixels = 64ull << 20;  // refused before decoding
constexpr size_t kMaxImageFileBytes = 256u << 20;   // bound on what we read into memory

struct RgbImage {
    int width = 0, height = 0;  // source dimensions, from the header
    std::vector<uint8_t> rgb;   // [height][width][3]
};

// Header probe only: source width and height. `name` labels errors.
Status image_dimensions(const uint8_t *data, size_t len, const std::string &name, int *w, int *h);
// The one decoding function: PNG, JPEG, BMP, TGA, GIF (first frame), PSD
// to 8-bit RGB (grey replicated, alpha dropped, 16-bit samples keep the
// high byte). The header is checked against kMaxSourcePixels before any
// pixel is decoded.
Status decode_image(const uint8_t *data, size_t len, const std::string &name, RgbImage *out);
// Reads a whole image file (at most kMaxImageFileBytes).
Status read_image_file(const std::string &path, std::vector<uint8_t> *out);

struct Grid {
    int gh = 0, gw = 0;  // patch rows and columns, both even
};
// VISION.md §4.1: scale to the budget (never up), round, floor to even,
// step down while over budget.
Grid choose_grid(int sw, int sh, int max_patches);

// VISION.md §4.2-4.3: bilinear resample (half-pixel centres, edge clamp, no
// antialias) to 14·gw x 14·gh, normalise, and lay out as [gh·gw][588]
// (channel, row, column inside a patch). float32 in the spec's operation
// order: bit-exact with the reference when compiled without FMA contraction.
void preprocess(const RgbImage &img, Grid g, const float mean[3], const float stdv[3], float *pixels);

}  // namespace sluice::vision
