#include "format/gguf_reader.h"

#include <algorithm>
#include <cstring>

#include "common/checked_math.h"
#include "format/f16.h"

namespace sluice::gguf {

namespace {

// The header is read whole into memory, up to this size: a real model's
// header (a 160k-token vocabulary with merges) is a few MB.
constexpr uint64_t kMaxHeader = 256ull << 20;
constexpr uint64_t kMaxCount = 1ull << 24;  // keys, tensors, array elements

struct Cursor {
    const uint8_t *p;
    uint64_t n, at = 0;
    std::string where;  // the path, for messages
    std::string ctx;    // the key or tensor being read
    Status fail(const std::string &what) const {
        return format_error(where + ": " + (ctx.empty() ? "" : ctx + ": ") + what + " (at byte " + std::to_string(at) +
                            ")");
    }
    Status take(void *out, uint64_t k) {
        if (k > n - at) return fail("the header ends early");
        std::memcpy(out, p + at, (size_t)k);
        at += k;
        return Status::ok();
    }
    Status u32(uint32_t *v) { return take(v, 4); }
    Status u64(uint64_t *v) { return take(v, 8); }
    Status str(std::string *s) {
        uint64_t len = 0;
        SLUICE_TRY(u64(&len));
        if (len > n - at) return fail("a string of " + std::to_string(len) + " bytes runs past the header");
        s->assign(reinterpret_cast<const char *>(p + at), (size_t)len);
        at += len;
        return Status::ok();
    }
};

uint64_t scalar_size(ValueType t) {
    switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL: return 1;
    case ValueType::U16:
    case ValueType::I16: return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32: return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64: return 8;
    default: return 0;
    }
}

// One scalar of type t into v (integers into u/i and f, floats into f).
Status read_scalar(Cursor &c, ValueType t, Value *v) {
    uint8_t b[8] = {};
    const uint64_t k = scalar_size(t);
    if (k == 0) return c.fail("value type " + std::to_string((uint32_t)t) + " is not a GGUF scalar type");
    SLUICE_TRY(c.take(b, k));
    switch (t) {
    case ValueType::U8: v->u = b[0]; v->i = b[0]; break;
    case ValueType::I8: v->i = (int8_t)b[0]; v->u = (uint64_t)v->i; break;
    case ValueType::BOOL:
        if (b[0] > 1) return c.fail("a bool of value " + std::to_string(b[0]));
        v->b = b[0] != 0; v->u = b[0]; v->i = b[0]; break;
    case ValueType::U16: { uint16_t x; std::memcpy(&x, b, 2); v->u = x; v->i = x; break; }
    case ValueType::I16: { int16_t x; std::memcpy(&x, b, 2); v->i = x; v->u = (uint64_t)x; break; }
    case ValueType::U32: { uint32_t x; std::memcpy(&x, b, 4); v->u = x; v->i = x; break; }
    case ValueType::I32: { int32_t x; std::memcpy(&x, b, 4); v->i = x; v->u = (uint64_t)x; break; }
    case ValueType::U64: { uint64_t x; std::memcpy(&x, b, 8); v->u = x; v->i = (int64_t)x; break; }
    case ValueType::I64: { int64_t x; std::memcpy(&x, b, 8); v->i = x; v->u = (uint64_t)x; break; }
    case ValueType::F32: { float x; std::memcpy(&x, b, 4); v->f = x; return Status::ok(); }
    case ValueType::F64: { double x; std::memcpy(&x, b, 8); v->f = x; return Status::ok(); }
    default: break;
    }
    v->f = t == ValueType::U64 ? (double)v->u : (double)v->i;
    return Status::ok();
}

bool is_int(ValueType t) {
    return t == ValueType::U8 || t == ValueType::I8 || t == ValueType::U16 || t == ValueType::I16 ||
           t == ValueType::U32 || t == ValueType::I32 || t == ValueType::U64 || t == ValueType::I64;
}

}  // namespace

int64_t TensorInfo::rows() const {
    int64_t r = 1;
    for (size_t i = 1; i < dims.size(); i++) r *= dims[i];
    return r;
}

Status Reader::open(const std::string &path) {
    SLUICE_TRY(file_.open_read(path));
    const uint64_t size = file_.size();
    if (size < 24) return format_error(path + ": " + std::to_string(size) + " bytes, too short for a GGUF header");
    std::vector<uint8_t> head((size_t)std::min(size, kMaxHeader));
    SLUICE_TRY(file_.pread_all(head.data(), head.size(), 0));
    Cursor c{head.data(), head.size(), 0, path, ""};
    uint32_t magic = 0;
    SLUICE_TRY(c.u32(&magic));
    if (magic != kMagic) return format_error(path + ": not a GGUF file (no GGUF magic)");
    SLUICE_TRY(c.u32(&version_));
    if (version_ != 2 && version_ != 3)
        return unsupported(path + ": GGUF version " + std::to_string(version_) + " (sluice reads 2 and 3)");
    uint64_t n_tensors = 0, n_kv = 0;
    SLUICE_TRY(c.u64(&n_tensors));
    SLUICE_TRY(c.u64(&n_kv));
    if (n_tensors > kMaxCount || n_kv > kMaxCount)
        return format_error(path + ": " + std::to_string(n_tensors) + " tensors and " + std::to_string(n_kv) +
                            " metadata keys: more than a GGUF header can hold");
    uint64_t alignment = kAlignment;
    for (uint64_t k = 0; k < n_kv; k++) {
        c.ctx = "metadata key " + std::to_string(k);
        std::string key;
        SLUICE_TRY(c.str(&key));
        c.ctx = "metadata key " + key;
        if (kv_index_.count(key)) return c.fail("the key appears twice");
        uint32_t type = 0;
        SLUICE_TRY(c.u32(&type));
        Value v;
        v.type = (ValueType)type;
        if (v.type == ValueType::STR) {
            SLUICE_TRY(c.str(&v.s));
        } else if (v.type == ValueType::ARR) {
            uint32_t et = 0;
            uint64_t count = 0;
            SLUICE_TRY(c.u32(&et));
            SLUICE_TRY(c.u64(&count));
            v.elem = (ValueType)et;
            if (v.elem == ValueType::ARR) return c.fail("an array of arrays");
            if (count > c.n - c.at)  // every element takes at least one byte
                return c.fail("an array of " + std::to_string(count) + " elements runs past the header");
            if (v.elem == ValueType::STR) {
                v.strs.resize((size_t)count);
                for (auto &s : v.strs) SLUICE_TRY(c.str(&s));
            } else {
                if (scalar_size(v.elem) == 0) return c.fail("array element type " + std::to_string(et));
                v.nums.resize((size_t)count);
                for (auto &d : v.nums) {
                    Value e;
                    SLUICE_TRY(read_scalar(c, v.elem, &e));
                    d = e.f;
                }
            }
        } else {
            SLUICE_TRY(read_scalar(c, v.type, &v));
        }
        if (key == "general.alignment") {
            if (!is_int(v.type) || v.u == 0 || v.u > 4096 || (v.u & (v.u - 1)))
                return c.fail("general.alignment must be a power of two up to 4096");
            alignment = v.u;
        }
        kv_index_[key] = kv_.size();
        kv_.emplace_back(key, std::move(v));
    }
    tensors_.reserve((size_t)n_tensors);
    for (uint64_t k = 0; k < n_tensors; k++) {
        c.ctx = "tensor " + std::to_string(k);
        TensorInfo t;
        SLUICE_TRY(c.str(&t.name));
        c.ctx = "tensor " + t.name;
        if (tensor_index_.count(t.name)) return c.fail("the name appears twice");
        uint32_t nd = 0;
        SLUICE_TRY(c.u32(&nd));
        if (nd == 0 || nd > (uint32_t)kMaxDims) return c.fail(std::to_string(nd) + " dims (1 to 4 allowed)");
        uint64_t elems = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t x = 0;
            SLUICE_TRY(c.u64(&x));
            if (x == 0 || x > (1ull << 40) || !checked_mul(elems, x, &elems) || elems > (1ull << 50))
                return c.fail("dim " + std::to_string(d) + " = " + std::to_string(x) + " is out of range");
            t.dims.push_back((int64_t)x);
        }
        SLUICE_TRY(c.u32(&t.type));
        SLUICE_TRY(c.u64(&t.offset));
        const uint64_t rb = row_bytes((TensorType)t.type, t.dims[0]);
        const bool known = row_bytes((TensorType)t.type, 256) != 0;  // a type row_bytes sizes (blocks of 32 or 256)
        t.bytes = known && rb ? rb * (uint64_t)t.rows() : 0;
        if (known && rb == 0) return c.fail("rows of " + std::to_string(t.dims[0]) + " values do not fit its type");
        tensor_index_[t.name] = tensors_.size();
        tensors_.push_back(std::move(t));
    }
    c.ctx.clear();
    const uint64_t data_start = (c.at + alignment - 1) / alignment * alignment;
    size_ = size;
    data_start_ = std::min(data_start, size);
    for (auto &t : tensors_) {
        if (t.offset % alignment)
            return format_error(path + ": tensor " + t.name + ": offset " + std::to_string(t.offset) +
                                " is not aligned to " + std::to_string(alignment));
        uint64_t end = 0;
        if (!checked_add(data_start, t.offset, &t.offset) || !checked_add(t.offset, t.bytes, &end) || end > size)
            return format_error(path + ": tensor " + t.name + ": its data runs past the end of the file (" +
                                std::to_string(size) + " bytes)");
    }
    return Status::ok();
}

const Value *Reader::find(const std::string &key) const {
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

Status Reader::get_int(const std::string &key, int64_t *out) const {
    const Value *v = find(key);
    if (!v) return format_error(path() + ": metadata key " + key + " is missing");
    if (!is_int(v->type)) return format_error(path() + ": metadata key " + key + " is not an integer");
    *out = v->i;
    return Status::ok();
}

Status Reader::get_float(const std::string &key, double *out) const {
    const Value *v = find(key);
    if (!v) return format_error(path() + ": metadata key " + key + " is missing");
    if (!is_int(v->type) && v->type != ValueType::F32 && v->type != ValueType::F64)
        return format_error(path() + ": metadata key " + key + " is not a number");
    *out = v->f;
    return Status::ok();
}

Status Reader::get_str(const std::string &key, std::string *out) const {
    const Value *v = find(key);
    if (!v) return format_error(path() + ": metadata key " + key + " is missing");
    if (v->type != ValueType::STR) return format_error(path() + ": metadata key " + key + " is not a string");
    *out = v->s;
    return Status::ok();
}

Status Reader::get_bool(const std::string &key, bool *out) const {
    const Value *v = find(key);
    if (!v) return format_error(path() + ": metadata key " + key + " is missing");
    if (v->type != ValueType::BOOL) return format_error(path() + ": metadata key " + key + " is not a bool");
    *out = v->b;
    return Status::ok();
}

Status Reader::get_int_array(const std::string &key, std::vector<int64_t> *out) const {
    const Value *v = find(key);
    if (!v) return format_error(path() + ": metadata key " + key + " is missing");
    if (v->type != ValueType::ARR || !is_int(v->elem))
        return format_error(path() + ": metadata key " + key + " is not an array of integers");
    out->assign(v->nums.begin(), v->nums.end());
    return Status::ok();
}

const TensorInfo *Reader::tensor(const std::string &name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Status Reader::read_rows_f32(const TensorInfo &t, int64_t row0, int64_t n, float *out) const {
    if (t.bytes == 0)
        return unsupported(path() + ": tensor " + t.name + " is of ggml type " + std::to_string(t.type) + " (" +
                           ggml_type_name(t.type) + "), which sluice does not read (only " + read_type_names() + ")");
    if (row0 < 0 || n < 0 || row0 + n > t.rows())
        return arg_error(path() + ": tensor " + t.name + ": rows " + std::to_string(row0) + "+" + std::to_string(n) +
                         " out of " + std::to_string(t.rows()));
    const int64_t ne0 = t.dims[0];
    const uint64_t rb = row_bytes((TensorType)t.type, ne0);
    std::vector<uint8_t> raw((size_t)(rb * (uint64_t)n));
    SLUICE_TRY(file_.pread_all(raw.data(), raw.size(), t.offset + rb * (uint64_t)row0));
    for (int64_t r = 0; r < n; r++) dequant_row((TensorType)t.type, raw.data() + rb * (uint64_t)r, ne0, out + r * ne0);
    return Status::ok();
}

}  // namespace sluice::gguf
