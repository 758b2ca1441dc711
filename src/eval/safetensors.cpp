#include "eval/safetensors.h"

#include "common/output_path.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sluice::kld {

namespace {

struct DTypeName {
    const char* name;
    size_t bits;
};
// Every dtype name of §2.3, so a file holding any of them is a valid
// container even though the KLD path refuses most of them later.
const DTypeName kDTypes[] = {
    {"BOOL", 8},  {"U8", 8},       {"I8", 8},       {"F8_E5M2", 8},     {"F8_E4M3", 8},
    {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8}, {"I16", 16}, {"U16", 16},
    {"F16", 16},  {"BF16", 16},    {"I32", 32},     {"U32", 32},        {"F32", 32},
    {"I64", 64},  {"U64", 64},     {"F64", 64},     {"C64", 64},        {"F4", 4},
    {"F6_E2M3", 6}, {"F6_E3M2", 6},
};

DType dtype_of(const std::string& s) {
    if (s == "F32") return DType::F32;
    if (s == "BF16") return DType::BF16;
    if (s == "F16") return DType::F16;
    if (s == "U8") return DType::U8;
    if (s == "I32") return DType::I32;
    return DType::OTHER;
}

size_t bits_of(const std::string& s) {
    for (const auto& d : kDTypes)
        if (s == d.name) return d.bits;
    return 0;
}

bool mul_ovf(uint64_t a, uint64_t b, uint64_t* r) { return __builtin_mul_overflow(a, b, r); }

}  // namespace

size_t dtype_size(DType d) {
    switch (d) {
        case DType::F32: case DType::I32: return 4;
        case DType::BF16: case DType::F16: return 2;
        case DType::U8: return 1;
        default: return 0;
    }
}

float bf16_to_f32(uint16_t v) {
    uint32_t u = uint32_t(v) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else {  // subnormal: normalise
            int e = -1;
            do { ++e; man <<= 1; } while (!(man & 0x400));
            u = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | man << 13;
    } else {
        u = sign | (exp + 112) << 23 | man << 13;
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

uint16_t f32_to_bf16_rne(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1);
    return uint16_t(u >> 16);
}

StFile::~StFile() {
    if (fd_ >= 0) ::close(fd_);
}
StFile::StFile(StFile&& o) noexcept
    : path_(std::move(o.path_)), fd_(o.fd_), size_(o.size_), header_len_(o.header_len_),
      meta_(std::move(o.meta_)), tensors_(std::move(o.tensors_)) {
    o.fd_ = -1;
}

const TensorInfo* StFile::find(const std::string& name) const {
    for (const auto& t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

Status StFile::open(const std::string& path) {
    path_ = path;
    fd_ = ::open(path.c_str(), O_RDONLY);
    if (fd_ < 0) return err(Code::io, path + ": cannot open: " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd_, &st) != 0) return err(Code::io, path + ": stat failed");
    size_ = uint64_t(st.st_size);
    const std::string P = path + ": safetensors: ";
    if (size_ < 8) return err(Code::format, P + "file shorter than 8 bytes");
    uint8_t lenb[8];
    if (::pread(fd_, lenb, 8, 0) != 8) return err(Code::io, P + "cannot read header length");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | lenb[i];
    if (n > 100000000ull) return err(Code::format, P + "header length " + std::to_string(n) + " > 100000000");
    if (8 + n > size_) return err(Code::format, P + "header length " + std::to_string(n) + " exceeds the file size");
    header_len_ = n;
    std::string hdr(n, '\0');
    if (n && ::pread(fd_, hdr.data(), n, 8) != ssize_t(n)) return err(Code::io, P + "short header read");
    size_t first = hdr.find_first_not_of(" \t\r\n");
    if (first == std::string::npos || hdr[first] != '{') return err(Code::format, P + "header is not a JSON object");
    json j;
    try {
        // Reject duplicate keys: nlohmann keeps the last; parse with a callback that counts.
        std::vector<std::set<std::string>> seen;
        bool dup = false;
        json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
            if (ev == json::parse_event_t::object_start) seen.emplace_back();
            else if (ev == json::parse_event_t::object_end) seen.pop_back();
            else if (ev == json::parse_event_t::key && !seen.empty()) {
                if (!seen.back().insert(parsed.get<std::string>()).second) dup = true;
            }
            (void)depth;
            return true;
        };
        j = json::parse(hdr, cb);
        if (dup) return err(Code::format, P + "duplicate key in header");
    } catch (const std::exception& e) {
        return err(Code::format, P + "header is not valid UTF-8 JSON: " + e.what());
    }
    if (!j.is_object()) return err(Code::format, P + "header is not a JSON object");
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (it.key() == "__metadata__") {
            if (!it.value().is_object()) return err(Code::format, P + "__metadata__ is not an object");
            for (auto m = it.value().begin(); m != it.value().end(); ++m) {
                if (!m.value().is_string())
                    return err(Code::format, P + "__metadata__ value of '" + m.key() + "' is not a string");
                meta_[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        const json& e = it.value();
        TensorInfo t;
        t.name = it.key();
        const std::string TP = P + "tensor '" + t.name + "': ";
        if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
            return err(Code::format, TP + "entry needs dtype, shape and data_offsets");
        if (!e["dtype"].is_string()) return err(Code::format, TP + "dtype is not a string");
        t.dtype = e["dtype"].get<std::string>();
        size_t bits = bits_of(t.dtype);
        if (!bits) return err(Code::format, TP + "unknown dtype '" + t.dtype + "'");
        t.dt = dtype_of(t.dtype);
        if (!e["shape"].is_array()) return err(Code::format, TP + "shape is not an array");
        uint64_t count = 1;
        for (const auto& d : e["shape"]) {
            if (!d.is_number_unsigned()) return err(Code::format, TP + "shape holds a non-integer or negative value");
            t.shape.push_back(d.get<uint64_t>());
            if (mul_ovf(count, t.shape.back(), &count)) return err(Code::format, TP + "shape product overflows");
        }
        const json& off = e["data_offsets"];
        if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
            return err(Code::format, TP + "data_offsets must be two non-negative integers");
        t.begin = off[0].get<uint64_t>();
        t.end = off[1].get<uint64_t>();
        if (t.end < t.begin) return err(Code::format, TP + "data_offsets end < begin");
        uint64_t nbits;
        if (mul_ovf(count, bits, &nbits)) return err(Code::format, TP + "byte size overflows");
        if (nbits % 8) return err(Code::format, TP + "sub-byte tensor does not end on a byte boundary");
        if (t.end - t.begin != nbits / 8)
            return err(Code::format, TP + "data_offsets span " + std::to_string(t.end - t.begin) +
                                         " bytes, shape x dtype needs " + std::to_string(nbits / 8));
        tensors_.push_back(std::move(t));
    }
    std::vector<const TensorInfo*> order;
    for (const auto& t : tensors_) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
        return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    uint64_t pos = 0;
    for (auto* t : order) {
        if (t->begin != pos) return err(Code::format, P + "tensor '" + t->name + "' leaves a gap or overlaps in the data buffer");
        pos = t->end;
    }
    if (8 + n + pos != size_)
        return err(Code::format, P + "data buffer ends at " + std::to_string(8 + n + pos) + " but the file has " +
                                     std::to_string(size_) + " bytes");
    return {};
}

Status StFile::pread_data(uint64_t off, void* dst, uint64_t n) { return pread_file(data_start() + off, dst, n); }

Status StFile::pread_file(uint64_t off, void* dst, uint64_t n) {
    if (n == 0) return {};
    uint8_t* p = static_cast<uint8_t*>(dst);
    uint64_t at = off;
    while (n) {
        ssize_t r = ::pread(fd_, p, n, off_t(at));
        if (r <= 0) return err(Code::io, path_ + ": short read at byte " + std::to_string(at));
        p += r;
        at += uint64_t(r);
        n -= uint64_t(r);
    }
    return {};
}

Status StFile::read_rows_f32(const TensorInfo& t, uint64_t row0, uint64_t n, float* out) {
    if (t.shape.size() != 2 || row0 + n > t.shape[0]) return err(Code::format, path_ + ": row read out of range");
    const uint64_t cols = t.shape[1];
    const size_t es = dtype_size(t.dt);
    if (t.dt != DType::F32 && t.dt != DType::BF16 && t.dt != DType::F16)
        return err(Code::format, path_ + ": tensor '" + t.name + "' has dtype " + t.dtype + "; only F32, BF16, F16 are read");
    const uint64_t off = t.begin + row0 * cols * es, bytes = n * cols * es;
    if (t.dt == DType::F32) return pread_data(off, out, bytes);
    scratch_.resize(bytes);
    KLD_TRY(pread_data(off, scratch_.data(), bytes));
    const uint16_t* h = reinterpret_cast<const uint16_t*>(scratch_.data());
    const uint64_t cnt = n * cols;
    if (t.dt == DType::BF16)
        for (uint64_t i = 0; i < cnt; ++i) out[i] = bf16_to_f32(h[i]);
    else
        for (uint64_t i = 0; i < cnt; ++i) out[i] = f16_to_f32(h[i]);
    return {};
}

std::string safetensors_header(const std::map<std::string, std::string>& meta,
                               const std::vector<TensorOut>& tensors, size_t align,
                               std::vector<const TensorOut*>* order_out, std::vector<uint64_t>* sizes_out) {
    // §2.5: descending dtype alignment, then name.
    std::vector<const TensorOut*> order;
    for (const auto& t : tensors) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
        size_t ba = bits_of(a->dtype), bb = bits_of(b->dtype);
        return ba != bb ? ba > bb : a->name < b->name;
    });
    ojson hdr = ojson::object();
    if (!meta.empty()) {
        ojson m = ojson::object();
        for (const auto& [k, v] : meta) m[k] = v;  // std::map: byte-wise sorted
        hdr["__metadata__"] = m;
    }
    uint64_t off = 0;
    std::vector<uint64_t> sizes;
    for (auto* t : order) {
        uint64_t cnt = 1;
        for (auto d : t->shape) cnt *= d;
        uint64_t bytes = cnt * bits_of(t->dtype) / 8;
        ojson e = ojson::object();
        e["dtype"] = t->dtype;
        e["shape"] = t->shape;
        e["data_offsets"] = {off, off + bytes};
        hdr[t->name] = e;
        sizes.push_back(bytes);
        off += bytes;
    }
    std::string h = hdr.dump();
    size_t total = 8 + h.size();
    size_t padded = (total + align - 1) / align * align;
    h.append(padded - total, ' ');
    if (order_out) *order_out = order;
    if (sizes_out) *sizes_out = sizes;
    return h;
}

Status write_safetensors(const std::string& path, const std::map<std::string, std::string>& meta,
                         const std::vector<TensorOut>& tensors, size_t align, std::string* sha_hex,
                         uint64_t* size_out) {
    if (align != 8 && align != 4096) return err(Code::usage, "safetensors align must be 8 or 4096");
    std::vector<const TensorOut*> order;
    std::vector<uint64_t> sizes;
    std::string h = safetensors_header(meta, tensors, align, &order, &sizes);
    if (std::string why = sluice::nonregular_output_reason(path); !why.empty()) return err(Code::io, why);
    std::string tmp = path + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return err(Code::io, tmp + ": cannot create: " + std::strerror(errno));
    Sha256 sha;
    uint64_t written = 0;
    auto put = [&](const void* p, uint64_t n) -> bool {
        const char* c = static_cast<const char*>(p);
        sha.update(c, n);
        while (n) {
            ssize_t w = ::write(fd, c, n);
            if (w <= 0) return false;
            c += w;
            n -= uint64_t(w);
            written += uint64_t(w);
        }
        return true;
    };
    uint8_t lenb[8];
    uint64_t hl = h.size();
    for (int i = 0; i < 8; ++i) lenb[i] = uint8_t(hl >> (8 * i));
    bool ok = put(lenb, 8) && put(h.data(), h.size());
    for (size_t i = 0; ok && i < order.size(); ++i) ok = put(order[i]->data, sizes[i]);
    if (!ok || ::fsync(fd) != 0) {
        ::close(fd);
        ::unlink(tmp.c_str());
        return err(Code::io, tmp + ": write failed: " + std::strerror(errno));
    }
    ::close(fd);
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        ::unlink(tmp.c_str());
        return err(Code::io, path + ": rename failed");
    }
    if (sha_hex) *sha_hex = sha.hex();
    if (size_out) *size_out = written;
    return {};
}

}  // namespace sluice::kld
