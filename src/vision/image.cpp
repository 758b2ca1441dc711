#include "vision/image.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "format/file.h"
#include "vision/stb_shim.h"

namespace sluice::vision {

Status image_dimensions(const uint8_t *data, size_t len, const std::string &name, int *w, int *h) {
    if (!data || len == 0) return io_error(name + ": empty image data");
    if (len > kMaxImageFileBytes)
        return io_error(name + ": image file is " + std::to_string(len) + " bytes, more than the limit of " +
                        std::to_string(kMaxImageFileBytes));
    int comp = 0;
    if (!stb::info(data, (int)len, w, h, &comp))
        return io_error(name + ": not a readable image (PNG, JPEG, BMP, TGA, GIF or PSD): " +
                        stb::failure_reason());
    return Status::ok();
}

Status decode_image(const uint8_t *data, size_t len, const std::string &name, RgbImage *out) {
    int w = 0, h = 0;
    SLUICE_TRY(image_dimensions(data, len, name, &w, &h));
    // The header alone decides: a hostile header never reaches the decoder.
    if (w <= 0 || h <= 0 || (uint64_t)w * (uint64_t)h > kMaxSourcePixels)
        return io_error(name + ": image dimensions " + std::to_string(w) + "x" + std::to_string(h) +
                        " are invalid or exceed the " + std::to_string(kMaxSourcePixels) + "-pixel limit");
    int dw = 0, dh = 0;
    std::unique_ptr<unsigned char, void (*)(unsigned char *)> px(stb::load_rgb(data, (int)len, &dw, &dh),
                                                               stb::free_pixels);
    if (!px) return io_error(name + ": cannot decode image: " + stb::failure_reason());
    if (dw != w || dh != h)
        return io_error(name + ": decoded size " + std::to_string(dw) + "x" + std::to_string(dh) +
                        " differs from the header's " + std::to_string(w) + "x" + std::to_string(h));
    out->width = w;
    out->height = h;
    out->rgb.assign(px.get(), px.get() + (size_t)w * (size_t)h * 3);
    return Status::ok();
}

Status read_image_file(const std::string &path, std::vector<uint8_t> *out) {
    File f;
    SLUICE_TRY(f.open_read(path));
    if (f.size() == 0) return io_error(path + ": the file is empty");
    if (f.size() > kMaxImageFileBytes)
        return io_error(path + ": image file is " + std::to_string(f.size()) + " bytes, more than the limit of " +
                        std::to_string(kMaxImageFileBytes));
    out->resize((size_t)f.size());
    return f.pread_all(out->data(), out->size(), 0);
}

Grid choose_grid(int sw, int sh, int max_patches) {
    double s = std::sqrt((double)max_patches / ((double)sw * (double)sh / 196.0));
    s = std::min(s, 1.0);
    int gw = (int)((double)sw * s / 14.0 + 0.5);
    int gh = (int)((double)sh * s / 14.0 + 0.5);
    gw = std::max(gw, 2) & ~1;
    gh = std::max(gh, 2) & ~1;
    while ((int64_t)gw * gh > max_patches && (gw > 2 || gh > 2)) {
        if (gw >= gh && gw > 2) gw -= 2;
        else if (gh > 2) gh -= 2;
        else break;
    }
    return {gh, gw};
}

void preprocess(const RgbImage &img, Grid g, const float mean[3], const float stdv[3], float *pixels) {
    const int sw = img.width, sh = img.height, W = kPatch * g.gw, H = kPatch * g.gh;
    const float rx = (float)sw / (float)W, ry = (float)sh / (float)H;
    const uint8_t *I = img.rgb.data();
    for (int Y = 0; Y < H; Y++) {
        const float fy = ((float)Y + 0.5f) * ry - 0.5f;
        int y0 = (int)std::floor(fy);
        const float wy = fy - (float)y0;
        int y1 = y0 + 1;
        y0 = std::clamp(y0, 0, sh - 1);
        y1 = std::clamp(y1, 0, sh - 1);
        for (int X = 0; X < W; X++) {
            const float fx = ((float)X + 0.5f) * rx - 0.5f;
            int x0 = (int)std::floor(fx);
            const float wx = fx - (float)x0;
            int x1 = x0 + 1;
            x0 = std::clamp(x0, 0, sw - 1);
            x1 = std::clamp(x1, 0, sw - 1);
            const int64_t p = (int64_t)(Y / kPatch) * g.gw + X / kPatch;
            const int j = Y % kPatch, i = X % kPatch;
            for (int c = 0; c < 3; c++) {
                const float a = I[((size_t)y0 * sw + x0) * 3 + c], b = I[((size_t)y0 * sw + x1) * 3 + c];
                const float d = I[((size_t)y1 * sw + x0) * 3 + c], e = I[((size_t)y1 * sw + x1) * 3 + c];
                float v = (1.0f - wy) * ((1.0f - wx) * a + wx * b) + wy * ((1.0f - wx) * d + wx * e);
                v = v / 255.0f;
                pixels[p * kPatchValues + c * 196 + j * kPatch + i] = (v - mean[c]) / stdv[c];
            }
        }
    }
}

}  // namespace sluice::vision
