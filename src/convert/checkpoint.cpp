#include "convert/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "convert/numeric.h"
#include "convert/util.h"
#include "format/f16.h"

namespace sluice::convert {

int dtype_size(const std::string& d) {
    const size_t bits = st::dtype_bits(d);
    return bits % 8 ? 0 : static_cast<int>(bits / 8);  // sub-byte dtypes are not decoded
}

bool Checkpoint::open(const std::string& dir, std::string* err) {
    if (is_gguf_file(dir)) {
        auto g = std::make_shared<GgufSource>();
        if (!g->open(dir, err)) return false;
        gguf_ = std::move(g);
        return true;
    }
    gguf_.reset();
    return status_ok(st_.open(dir), err);
}

bool Checkpoint::read_raw(const TensorInfo& t, uint64_t off, uint64_t n, void* dst, std::string* err) const {
    return status_ok(st_.read_raw(t, off, n, dst), err);
}

static bool is_float_dtype(const std::string& d) { return d == "F32" || d == "F16" || d == "BF16"; }
static bool is_fp8(const std::string& d) { return d == "F8_E4M3" || d == "F8_E5M2"; }

bool Checkpoint::logical_exists(const std::string& name) const {
    if (gguf_) return gguf_->has(name);
    return has(name) || (has(name + "_packed") && has(name + "_scale"));
}

bool Checkpoint::logical_shape(const std::string& name, std::vector<int64_t>* shape, std::string* err) const {
    if (gguf_) return gguf_->shape(name, shape, err);
    if (const TensorInfo* t = find(name)) {
        if (!is_float_dtype(t->dtype) && !is_fp8(t->dtype)) {
            *err = where(*t) + ": dtype " + t->dtype + " cannot be decoded to floats (F32, F16, BF16, F8_E4M3, F8_E5M2)";
            return false;
        }
        shape->assign(t->shape.begin(), t->shape.end());  // each dim <= 2^40 (st::kMaxDim)
        return true;
    }
    const TensorInfo* p = find(name + "_packed");
    const TensorInfo* s = find(name + "_scale");
    if (!p || !s) {
        *err = "tensor '" + name + "' is not in the checkpoint" +
               (p ? std::string(" (MXFP4 '_packed' present but '_scale' missing)") : std::string());
        return false;
    }
    if (p->dtype != "U8" || s->dtype != "U8") {
        *err = where(p->dtype != "U8" ? *p : *s) + ": MXFP4 half must be U8, is " + (p->dtype != "U8" ? p->dtype : s->dtype);
        return false;
    }
    if (p->shape.size() != 2 || s->shape.size() != 2 || s->shape[0] != p->shape[0] ||
        s->shape[1] != (p->shape[1] * 2 + 31) / 32) {
        *err = where(*p) + ": MXFP4 pair shapes do not fit ([rows, cols/2] packed and [rows, cols/32] scales)";
        return false;
    }
    *shape = {int64_t(p->shape[0]), int64_t(p->shape[1]) * 2};
    return true;
}

bool Checkpoint::read_rows_f32(const std::string& name, int64_t r0, int64_t r1, float* dst, std::string* err) const {
    std::vector<int64_t> shape;
    if (gguf_) {
        if (!gguf_->shape(name, &shape, err) || !gguf_->read_rows_f32(name, r0, r1, dst, err)) return false;
    } else if (!decode_rows(name, r0, r1, dst, &shape, err)) {
        return false;
    }
    const int64_t N = shape.empty() ? 1 : shape.back();
    const int64_t n = (r1 - r0) * N;
    bool finite = true;
    for (int64_t i = 0; i < n; ++i) finite &= std::fabs(dst[i]) <= std::numeric_limits<float>::max();
    if (finite) return true;
    int64_t i = 0;
    while (std::fabs(dst[i]) <= std::numeric_limits<float>::max()) ++i;
    const TensorInfo* t = find(name) ? find(name) : find(name + "_packed");
    *err = (t ? where(*t) : gguf_ ? gguf_->path() + ": tensor '" + name + "'" : "tensor '" + name + "'") + ": row " + std::to_string(r0 + i / N) + ", column " +
           std::to_string(i % N) + " decodes to " + (std::isnan(dst[i]) ? "NaN" : "an infinity") +
           "; non-finite weights cannot be quantized";
    return false;
}

bool Checkpoint::decode_rows(const std::string& name, int64_t r0, int64_t r1, float* dst, std::vector<int64_t>* shape_out,
                             std::string* err) const {
    std::vector<int64_t>& shape = *shape_out;
    if (!logical_shape(name, &shape, err)) return false;
    const int64_t N = shape.empty() ? 1 : shape.back();
    // A zero-sized tensor may have other dims up to 2^40 (st::kMaxDim): their
    // product would overflow int64; any non-empty product is bounded by the file.
    bool empty = N == 0;
    for (int64_t d : shape) empty |= d == 0;
    int64_t R = empty ? 0 : 1;
    for (size_t i = 0; !empty && i + 1 < shape.size(); ++i) R *= shape[i];
    if (r0 < 0 || r1 < r0 || r1 > R) {
        *err = "tensor '" + name + "': row range out of bounds";
        return false;
    }
    const int64_t rows = r1 - r0;
    if (rows == 0) return true;
    std::vector<uint8_t> raw;
    if (const TensorInfo* t = find(name)) {
        const int es = dtype_size(t->dtype);
        raw.resize(static_cast<size_t>(rows * N * es));
        if (!read_raw(*t, static_cast<uint64_t>(r0 * N * es), raw.size(), raw.data(), err)) return false;
        const size_t n = static_cast<size_t>(rows * N);
        if (t->dtype == "F32") {
            std::memcpy(dst, raw.data(), n * 4);
        } else if (t->dtype == "F16" || t->dtype == "BF16") {
            const bool bf = t->dtype == "BF16";
            for (size_t i = 0; i < n; ++i) {
                const uint16_t h = static_cast<uint16_t>(raw[2 * i] | (raw[2 * i + 1] << 8));
                dst[i] = bf ? bf16_to_f32(h) : f16_scale(h);
            }
        } else {  // fp8 with block scales
            if (shape.size() != 2) {
                *err = where(*t) + ": fp8 tensors must be 2-D";
                return false;
            }
            const TensorInfo* sc = find(name + "_scale_inv");
            if (!sc) {
                *err = where(*t) + ": fp8 tensor without its '_scale_inv' companion";
                return false;
            }
            const int64_t gm = (shape[0] + fp8_bm_ - 1) / fp8_bm_, gn = (N + fp8_bn_ - 1) / fp8_bn_;
            std::vector<int64_t> sshape;
            if (!logical_shape(sc->name, &sshape, err) || is_fp8(sc->dtype)) {
                if (err->empty()) *err = where(*sc) + ": scale must be a float tensor";
                return false;
            }
            int64_t snumel = 1;
            for (int64_t d : sshape) snumel *= d;
            if (snumel != gm * gn || (sshape.size() == 2 && (sshape[0] != gm || sshape[1] != gn))) {
                *err = where(*sc) + ": expected shape [" + std::to_string(gm) + ", " + std::to_string(gn) +
                       "] for block size [" + std::to_string(fp8_bm_) + ", " + std::to_string(fp8_bn_) + "]";
                return false;
            }
            const int64_t b0 = r0 / fp8_bm_, b1 = (r1 - 1) / fp8_bm_ + 1;
            std::vector<float> s(static_cast<size_t>((b1 - b0) * gn));
            // Viewed as [gm, gn] whatever the stored rank: rows of tiles.
            const int ses = dtype_size(sc->dtype);
            std::vector<uint8_t> sraw(s.size() * ses);
            if (!read_raw(*sc, static_cast<uint64_t>(b0 * gn * ses), sraw.size(), sraw.data(), err)) return false;
            for (size_t i = 0; i < s.size(); ++i) {
                if (ses == 4) std::memcpy(&s[i], &sraw[4 * i], 4);
                else {
                    const uint16_t h = static_cast<uint16_t>(sraw[2 * i] | (sraw[2 * i + 1] << 8));
                    s[i] = sc->dtype == "BF16" ? bf16_to_f32(h) : f16_scale(h);
                }
            }
            const bool e4 = t->dtype == "F8_E4M3";
            for (int64_t r = 0; r < rows; ++r) {
                const float* srow = &s[static_cast<size_t>(((r0 + r) / fp8_bm_ - b0) * gn)];
                for (int64_t c = 0; c < N; ++c) {
                    const uint8_t q = raw[static_cast<size_t>(r * N + c)];
                    const float v = e4 ? fp8_e4m3_to_f32(q) : fp8_e5m2_to_f32(q);
                    dst[r * N + c] = v * srow[c / fp8_bn_];  // a multiplication, despite "_inv"
                }
            }
        }
        return true;
    }
    // MXFP4 pair.
    const TensorInfo* p = find(name + "_packed");
    const TensorInfo* s = find(name + "_scale");
    const int64_t pc = int64_t(p->shape[1]), sc = int64_t(s->shape[1]);
    raw.resize(static_cast<size_t>(rows * pc));
    std::vector<uint8_t> sraw(static_cast<size_t>(rows * sc));
    if (!read_raw(*p, static_cast<uint64_t>(r0 * pc), raw.size(), raw.data(), err)) return false;
    if (!read_raw(*s, static_cast<uint64_t>(r0 * sc), sraw.size(), sraw.data(), err)) return false;
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < N; ++c) {
            const uint8_t byte = raw[static_cast<size_t>(r * pc + c / 2)];
            const uint8_t code = (c & 1) ? (byte >> 4) : (byte & 15);  // element 2j = low nibble
            const float scale = e8m0_to_f32(sraw[static_cast<size_t>(r * sc + c / 32)]);
            dst[r * N + c] = fp4_e2m1_to_f32(code) * scale;
        }
    }
    return true;
}

}  // namespace sluice::convert
