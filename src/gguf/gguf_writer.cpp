#include "gguf/gguf_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "common/checked_file.h"
#include "common/checked_math.h"
#include "convert/numeric.h"

namespace sluice::gguf {

void encode_row(TensorType t, const float *x, int64_t n, uint8_t *out) {
    switch (t) {
    case TensorType::F32: std::memcpy(out, x, 4 * (size_t)n); return;
    case TensorType::F16:
        for (int64_t i = 0; i < n; i++) {
            const uint16_t h = convert::f32_to_f16(x[i]);
            out[2 * i] = (uint8_t)h;
            out[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return;
    case TensorType::BF16:
        for (int64_t i = 0; i < n; i++) {
            uint32_t u;
            std::memcpy(&u, &x[i], 4);
            // Round to nearest even on the dropped 16 bits; NaN stays NaN.
            const uint16_t h = (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40u)
                                                               : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
            out[2 * i] = (uint8_t)h;
            out[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return;
    case TensorType::Q4_0:
        // llama.cpp's reference: the scale is the signed extreme over -8,
        // codes rounded by truncating x/d + 8.5, clamped to 15.
        for (int64_t b = 0; b < n / 32; b++) {
            const float *v = x + 32 * b;
            float amax = 0, vmax = 0;
            for (int j = 0; j < 32; j++)
                if (amax < std::fabs(v[j])) {
                    amax = std::fabs(v[j]);
                    vmax = v[j];
                }
            const float d = vmax / -8.0f;
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            uint8_t *blk = out + 18 * b;
            const uint16_t h = convert::f32_to_f16(d);
            blk[0] = (uint8_t)h;
            blk[1] = (uint8_t)(h >> 8);
            for (int j = 0; j < 16; j++) {
                const int q0 = std::min(15, (int)(int8_t)(v[j] * id + 8.5f));
                const int q1 = std::min(15, (int)(int8_t)(v[16 + j] * id + 8.5f));
                blk[2 + j] = (uint8_t)(q0 | (q1 << 4));
            }
        }
        return;
    case TensorType::Q8_0:
        for (int64_t b = 0; b < n / 32; b++) {
            const float *v = x + 32 * b;
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = std::max(amax, std::fabs(v[j]));
            const float d = amax / 127.0f;
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            uint8_t *blk = out + 34 * b;
            const uint16_t h = convert::f32_to_f16(d);
            blk[0] = (uint8_t)h;
            blk[1] = (uint8_t)(h >> 8);
            for (int j = 0; j < 32; j++) blk[2 + j] = (uint8_t)(int8_t)std::roundf(v[j] * id);
        }
        return;
    case TensorType::Q4_1:
    case TensorType::Q5_0:
    case TensorType::Q5_1:
    case TensorType::IQ4_NL:
    case TensorType::IQ4_XS:
    case TensorType::MXFP4:
    case TensorType::Q2_K:
    case TensorType::Q3_K:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
    case TensorType::Q6_K: return;  // refused by add_tensor (read only)
    }
}

void Writer::set(const std::string &key, Value v) {
    if (!bad_.is_ok()) return;
    for (const auto &kv : kv_)
        if (kv.first == key) {
            bad_ = arg_error("GGUF metadata key " + key + " set twice");
            return;
        }
    kv_.emplace_back(key, std::move(v));
}

void Writer::set_u32(const std::string &key, uint32_t v) {
    Value x;
    x.type = ValueType::U32;
    x.u = v;
    set(key, std::move(x));
}
void Writer::set_i32(const std::string &key, int32_t v) {
    Value x;
    x.type = ValueType::I32;
    x.i = v;
    set(key, std::move(x));
}
void Writer::set_f32(const std::string &key, float v) {
    Value x;
    x.type = ValueType::F32;
    x.f = v;
    set(key, std::move(x));
}
void Writer::set_bool(const std::string &key, bool v) {
    Value x;
    x.type = ValueType::BOOL;
    x.b = v;
    set(key, std::move(x));
}
void Writer::set_str(const std::string &key, const std::string &v) {
    Value x;
    x.type = ValueType::STR;
    x.s = v;
    set(key, std::move(x));
}
void Writer::set_arr_str(const std::string &key, std::vector<std::string> v) {
    Value x;
    x.type = ValueType::ARR;
    x.elem = ValueType::STR;
    x.strs = std::move(v);
    set(key, std::move(x));
}
void Writer::set_arr_i32(const std::string &key, const std::vector<int32_t> &v) {
    Value x;
    x.type = ValueType::ARR;
    x.elem = ValueType::I32;
    x.nums.assign(v.begin(), v.end());
    set(key, std::move(x));
}
void Writer::set_arr_u32(const std::string &key, const std::vector<uint32_t> &v) {
    Value x;
    x.type = ValueType::ARR;
    x.elem = ValueType::U32;
    x.nums.assign(v.begin(), v.end());
    set(key, std::move(x));
}
void Writer::set_arr_f32(const std::string &key, const std::vector<float> &v) {
    Value x;
    x.type = ValueType::ARR;
    x.elem = ValueType::F32;
    x.nums.assign(v.begin(), v.end());
    set(key, std::move(x));
}

Status Writer::add_tensor(const std::string &name, std::vector<int64_t> dims, TensorType type, RowSource rows) {
    SLUICE_TRY(bad_);
    if (name.empty() || name.size() > kMaxTensorName)
        return arg_error("GGUF tensor name '" + name + "': " + std::to_string(name.size()) +
                         " bytes (llama.cpp keeps at most 63)");
    for (const auto &t : tensors_)
        if (t.name == name) return arg_error("GGUF tensor " + name + " added twice");
    if (dims.empty() || dims.size() > (size_t)kMaxDims)
        return arg_error("GGUF tensor " + name + ": " + std::to_string(dims.size()) + " dims (1 to 4 allowed)");
    uint64_t n_rows = 1;
    for (size_t i = 0; i < dims.size(); i++) {
        if (dims[i] <= 0) return arg_error("GGUF tensor " + name + ": dim " + std::to_string(i) + " is not positive");
        if (i > 0 && !checked_mul(n_rows, (uint64_t)dims[i], &n_rows))
            return arg_error("GGUF tensor " + name + ": size overflows");
    }
    if (!writable(type))
        return unsupported("GGUF tensor " + name + ": sluice reads " + type_name(type) + " but does not write it");
    const uint64_t rb = row_bytes(type, dims[0]);
    if (rb == 0)
        return unsupported("GGUF tensor " + name + ": rows of " + std::to_string(dims[0]) + " values cannot be stored as " +
                           type_name(type) + " (Q8_0 needs a multiple of 32)");
    uint64_t bytes = 0;
    if (!checked_mul(rb, n_rows, &bytes)) return arg_error("GGUF tensor " + name + ": size overflows");
    Tensor t{name, std::move(dims), type, std::move(rows), data_bytes_, bytes};
    data_bytes_ += (bytes + kAlignment - 1) / kAlignment * kAlignment;
    tensors_.push_back(std::move(t));
    return Status::ok();
}

namespace {

void put32(std::string *o, uint32_t v) { o->append(reinterpret_cast<const char *>(&v), 4); }
void put64(std::string *o, uint64_t v) { o->append(reinterpret_cast<const char *>(&v), 8); }
void put_str(std::string *o, const std::string &s) {
    put64(o, s.size());
    o->append(s);
}

void put_scalar(std::string *o, ValueType t, double num) {
    switch (t) {
    case ValueType::U32: put32(o, (uint32_t)num); break;
    case ValueType::I32: put32(o, (uint32_t)(int32_t)num); break;
    case ValueType::F32: {
        float f = (float)num;
        o->append(reinterpret_cast<const char *>(&f), 4);
        break;
    }
    default: break;  // the setters make no other array element type
    }
}

}  // namespace

std::string Writer::header() const {
    std::string o;
    put32(&o, kMagic);
    put32(&o, kVersion);
    put64(&o, tensors_.size());
    put64(&o, kv_.size());
    for (const auto &[key, v] : kv_) {
        put_str(&o, key);
        put32(&o, (uint32_t)v.type);
        switch (v.type) {
        case ValueType::U32: put32(&o, (uint32_t)v.u); break;
        case ValueType::I32: put32(&o, (uint32_t)(int32_t)v.i); break;
        case ValueType::F32: put_scalar(&o, ValueType::F32, v.f); break;
        case ValueType::BOOL: o.push_back(v.b ? 1 : 0); break;
        case ValueType::STR: put_str(&o, v.s); break;
        case ValueType::ARR:
            put32(&o, (uint32_t)v.elem);
            if (v.elem == ValueType::STR) {
                put64(&o, v.strs.size());
                for (const auto &s : v.strs) put_str(&o, s);
            } else {
                put64(&o, v.nums.size());
                for (double d : v.nums) put_scalar(&o, v.elem, d);
            }
            break;
        default: break;
        }
    }
    for (const auto &t : tensors_) {
        put_str(&o, t.name);
        put32(&o, (uint32_t)t.dims.size());
        for (int64_t d : t.dims) put64(&o, (uint64_t)d);
        put32(&o, (uint32_t)t.type);
        put64(&o, t.offset);
    }
    o.resize((o.size() + kAlignment - 1) / kAlignment * kAlignment, '\0');
    return o;
}

uint64_t Writer::file_bytes() const { return header().size() + data_bytes_; }

Status Writer::write(const std::string &path, const std::function<void(uint64_t, uint64_t)> &progress) const {
    SLUICE_TRY(bad_);
    OutputFile out;
    SLUICE_TRY(out.create(path));
    const std::string head = header();
    SLUICE_TRY(out.write(head.data(), head.size()));
    const uint64_t total = head.size() + data_bytes_;
    uint64_t done = head.size();
    // A slab of rows at a time: about 16 MiB of floats, at least one row.
    constexpr uint64_t kSlabFloats = 4u << 20;
    std::vector<float> f;
    std::vector<uint8_t> b;
    static const char zeros[kAlignment] = {};
    for (const auto &t : tensors_) {
        const int64_t ne0 = t.dims[0];
        int64_t n_rows = 1;
        for (size_t i = 1; i < t.dims.size(); i++) n_rows *= t.dims[i];
        const int64_t slab = std::max<int64_t>(1, (int64_t)(kSlabFloats / (uint64_t)ne0));
        const uint64_t rb = row_bytes(t.type, ne0);
        for (int64_t r0 = 0; r0 < n_rows; r0 += slab) {
            const int64_t n = std::min(slab, n_rows - r0);
            f.assign((size_t)(n * ne0), 0.0f);
            Status st = t.rows(r0, n, f.data());
            if (!st.is_ok()) return Status(st.code(), "GGUF tensor " + t.name + ": " + st.message());
            for (float v : f)
                if (!std::isfinite(v))
                    return format_error("GGUF tensor " + t.name + ": a value in rows " + std::to_string(r0) + ".." +
                                        std::to_string(r0 + n - 1) + " is not finite");
            b.resize((size_t)(rb * (uint64_t)n));
            for (int64_t r = 0; r < n; r++) encode_row(t.type, f.data() + r * ne0, ne0, b.data() + r * rb);
            SLUICE_TRY(out.write(b.data(), b.size()));
            done += b.size();
            if (progress) progress(done, total);
        }
        const uint64_t pad = (kAlignment - t.bytes % kAlignment) % kAlignment;
        SLUICE_TRY(out.write(zeros, pad));
        done += pad;
    }
    return out.commit();
}

}  // namespace sluice::gguf
