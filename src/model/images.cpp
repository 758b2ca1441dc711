// The engine's image queue (VISION.md §6-7): encode now, splice at the
// next eval.
#include <chrono>

#include "model/engine.h"

namespace sluice {

Status Engine::image_encode_pixels(const float *pixels, vision::Grid g, std::vector<float> *emb) {
    if (!tower_) return unsupported("this context has no vision tower (open with vision enabled on a K3 container)");
    const auto t0 = std::chrono::steady_clock::now();
    Status st = vision::encode(*tower_, ops_, pixels, g, emb);
    seconds_vision_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return st;
}

Status Engine::image_add(const uint8_t *data, size_t len, const std::string &name, int *n_tokens) {
    if (!tower_) {
        if (!opt_.vision) return unsupported(name + ": images need a context opened with vision enabled");
        return unsupported(name + ": this container has no vision tower");
    }
    if ((int)img_tokens_.size() >= vision::kMaxImages)
        return arg_error(name + ": " + std::to_string(vision::kMaxImages) + " images are already queued");
    const auto t0 = std::chrono::steady_clock::now();
    vision::RgbImage img;
    SLUICE_TRY(vision::decode_image(data, len, name, &img));
    const vision::Grid g = vision::choose_grid(img.width, img.height, vcfg_.max_patches);
    std::vector<float> pixels((size_t)g.gh * g.gw * vision::kPatchValues);
    vision::preprocess(img, g, vcfg_.mean, vcfg_.stdv, pixels.data());
    std::vector<float> emb;
    Status st = vision::encode(*tower_, ops_, pixels.data(), g, &emb);
    seconds_vision_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!st) return Status(st.code(), name + ": " + st.message());
    // Append only now: a failure above leaves the queue untouched.
    img_rows_.insert(img_rows_.end(), emb.begin(), emb.end());
    img_tokens_.push_back((int)(emb.size() / (size_t)c_.config().hidden));
    images_encoded_++;
    if (n_tokens) *n_tokens = img_tokens_.back();
    return Status::ok();
}

Status Engine::image_queue_rows(const float *rows, int n_tokens) {
    if (!tower_) return unsupported("this context has no vision tower");
    if (n_tokens <= 0 || (int)img_tokens_.size() >= vision::kMaxImages) return arg_error("image_queue_rows: refused");
    img_rows_.insert(img_rows_.end(), rows, rows + (size_t)n_tokens * (size_t)c_.config().hidden);
    img_tokens_.push_back(n_tokens);
    return Status::ok();
}

Status Engine::image_expand(const int32_t *in, size_t n, std::vector<int32_t> *out) const {
    if (!tower_) return unsupported("this context has no vision tower");
    size_t pads = 0;
    for (size_t i = 0; i < n; i++) pads += in[i] == vcfg_.pad;
    if (pads != img_tokens_.size())
        return arg_error("the prompt has " + std::to_string(pads) + " image pad tokens (id " +
                         std::to_string(vcfg_.pad) + ") but " + std::to_string(img_tokens_.size()) +
                         " images are queued; each image needs exactly one");
    out->clear();
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i] == vcfg_.pad) out->insert(out->end(), (size_t)img_tokens_[k++], vcfg_.pad);
        else out->push_back(in[i]);
    }
    return Status::ok();
}

}  // namespace sluice
