#include "format/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "common/checked_file.h"
#include "common/checked_math.h"
#include "common/sha256.h"

namespace sluice::st {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct DTypeName {
    const char* name;
    size_t bits;
};
// Every dtype name of §2.3, so a file holding any of them is a valid
// container even where its user refuses the dtype later.
const DTypeName kDTypes[] = {
    {"BOOL", 8},     {"U8", 8},          {"I8", 8},          {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8},
    {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8}, {"I16", 16},      {"U16", 16},    {"F16", 16},    {"BF16", 16},
    {"I32", 32},     {"U32", 32},        {"F32", 32},        {"I64", 64},    {"U64", 64},    {"F64", 64},
    {"C64", 64},     {"F4", 4},          {"F6_E2M3", 6},     {"F6_E3M2", 6},
};

DType dtype_of(const std::string& s) {
    if (s == "F32") return DType::F32;
    if (s == "BF16") return DType::BF16;
    if (s == "F16") return DType::F16;
    if (s == "U8") return DType::U8;
    if (s == "I32") return DType::I32;
    return DType::OTHER;
}

bool mul_ovf(uint64_t a, uint64_t b, uint64_t* r) { return !checked_mul<uint64_t>(a, b, r); }  // common/checked_math.h

std::string u(uint64_t v) { return std::to_string(v); }

// nlohmann keeps the last of two equal keys; a header naming one tensor
// twice is ambiguous, so the parse callback counts keys per object.
Status parse_header(const std::string& hdr, const std::string& P, json* out) {
    std::vector<std::set<std::string>> seen;
    bool dup = false;
    std::string dup_key;
    json::parser_callback_t cb = [&](int, json::parse_event_t ev, json& parsed) {
        if (ev == json::parse_event_t::object_start) {
            seen.emplace_back();
        } else if (ev == json::parse_event_t::object_end) {
            if (!seen.empty()) seen.pop_back();
        } else if (ev == json::parse_event_t::key && !seen.empty()) {
            if (!seen.back().insert(parsed.get<std::string>()).second && !dup) {
                dup = true;
                dup_key = parsed.get<std::string>();
            }
        }
        return true;
    };
    try {
        *out = json::parse(hdr, cb);
    } catch (const std::exception& e) {
        return format_error(P + "header is not valid JSON (or not UTF-8): " + e.what());
    }
    if (dup) return format_error(P + "header has the key '" + dup_key + "' twice");
    return Status::ok();
}

}  // namespace

size_t dtype_bits(const std::string& s) {
    for (const auto& d : kDTypes)
        if (s == d.name) return d.bits;
    return 0;
}

size_t dtype_size(DType d) {
    switch (d) {
        case DType::F32: case DType::I32: return 4;
        case DType::BF16: case DType::F16: return 2;
        case DType::U8: return 1;
        default: return 0;
    }
}

float bf16_to_f32(uint16_t v) {
    uint32_t x = uint32_t(v) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, x;
    if (exp == 0) {
        if (man == 0) {
            x = sign;
        } else {  // subnormal: normalise
            int e = -1;
            do {
                ++e;
                man <<= 1;
            } while (!(man & 0x400));
            x = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        x = sign | 0x7f800000u | man << 13;
    } else {
        x = sign | (exp + 112) << 23 | man << 13;
    }
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

uint16_t f32_to_bf16_rne(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1);
    return uint16_t(x >> 16);
}

uint64_t TensorInfo::numel() const {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;  // bounded at open: numel * size == nbytes, or a zero dim
    return n;
}

// ---- StFile ------------------------------------------------------------

const TensorInfo* StFile::find(const std::string& name) const {
    for (const auto& t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

Status StFile::open(const std::string& path, const std::string& label) {
    label_ = label.empty() ? path : label;
    SLUICE_TRY(f_.open_read(path));
    const uint64_t size = f_.size();
    const std::string P = label_ + ": ";
    // §2.4 rules 1-3: the length word, its bound, and room for it.
    if (size < 8) return format_error(P + "safetensors file of " + u(size) + " bytes has no 8-byte header length");
    uint8_t lenb[8];
    SLUICE_TRY(f_.pread_all(lenb, 8, 0));
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | lenb[i];
    if (n > kMaxHeaderBytes)
        return format_error(P + "header length " + u(n) + " is over the " + u(kMaxHeaderBytes) +
                            "-byte limit: not a safetensors file");
    if (n > size - 8)
        return format_error(P + "header length " + u(n) + " exceeds the file (" + u(size) +
                            " bytes): truncated or not a safetensors file");
    header_len_ = n;
    std::string hdr(n, '\0');
    SLUICE_TRY(f_.pread_all(hdr.data(), n, 8));
    header_sha256_ = sha256_hex(hdr);
    // Rule 4: JSON whitespace around one object (writers pad with spaces).
    const size_t first = hdr.find_first_not_of(" \t\r\n");
    if (first == std::string::npos || hdr[first] != '{') return format_error(P + "header is not a JSON object");
    json j;
    SLUICE_TRY(parse_header(hdr, P, &j));
    if (!j.is_object()) return format_error(P + "header is not a JSON object");
    const uint64_t data_len = size - 8 - n;
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (it.key() == "__metadata__") {  // rule 7
            if (!it.value().is_object()) return format_error(P + "__metadata__ is not an object");
            for (auto m = it.value().begin(); m != it.value().end(); ++m) {
                if (!m.value().is_string())
                    return format_error(P + "__metadata__ value of '" + m.key() + "' is not a string");
                meta_[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        // Rule 5, each entry on its own.
        const json& e = it.value();
        TensorInfo t;
        t.name = it.key();
        const std::string TP = P + "tensor '" + t.name + "': ";
        if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
            return format_error(TP + "entry needs dtype, shape and data_offsets");
        if (!e["dtype"].is_string()) return format_error(TP + "dtype is not a string");
        t.dtype = e["dtype"].get<std::string>();
        const size_t bits = dtype_bits(t.dtype);
        if (!bits) return format_error(TP + "unknown dtype '" + t.dtype + "'");
        t.dt = dtype_of(t.dtype);
        if (!e["shape"].is_array()) return format_error(TP + "shape is not an array");
        uint64_t count = 1;
        for (const auto& d : e["shape"]) {
            if (!d.is_number_unsigned()) return format_error(TP + "shape holds a non-integer or negative value");
            t.shape.push_back(d.get<uint64_t>());
            if (t.shape.back() > kMaxDim)
                return format_error(TP + "shape dimension " + u(t.shape.back()) + " is over 2^40");
            if (mul_ovf(count, t.shape.back(), &count)) return format_error(TP + "shape product overflows 64 bits");
        }
        const json& off = e["data_offsets"];
        if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
            return format_error(TP + "data_offsets must be two non-negative integers");
        t.begin = off[0].get<uint64_t>();
        t.end = off[1].get<uint64_t>();
        if (t.end < t.begin) return format_error(TP + "data_offsets end " + u(t.end) + " < begin " + u(t.begin));
        if (t.end > data_len)
            return format_error(TP + "data_offsets [" + u(t.begin) + ", " + u(t.end) + "] run past the end of the data (" +
                                u(data_len) + " bytes): file truncated or header corrupt");
        uint64_t nbits;
        if (mul_ovf(count, bits, &nbits)) return format_error(TP + "byte size overflows 64 bits");
        if (nbits % 8) return format_error(TP + "sub-byte tensor does not end on a byte boundary");
        if (t.end - t.begin != nbits / 8)
            return format_error(TP + "data_offsets span " + u(t.end - t.begin) + " bytes, but shape x " + t.dtype +
                                " needs " + u(nbits / 8));
        t.offset = 8 + n + t.begin;
        t.nbytes = t.end - t.begin;
        tensors_.push_back(std::move(t));
    }
    // Rule 6: sorted by begin, the entries tile the data buffer exactly.
    std::sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t pos = 0;
    for (const TensorInfo& t : tensors_) {
        if (t.begin != pos)
            return format_error(P + "tensor '" + t.name + "' " + (t.begin > pos ? "leaves a gap" : "overlaps") +
                                " in the data buffer (begins at " + u(t.begin) + ", the tensors before end at " + u(pos) +
                                ")");
        pos = t.end;
    }
    if (pos != data_len)
        return format_error(P + "data buffer ends at byte " + u(8 + n + pos) + " but the file has " + u(size) +
                            " bytes");
    return Status::ok();
}

Status StFile::pread_file(uint64_t off, void* dst, uint64_t n) const {
    if (off > f_.size() || n > f_.size() - off)
        return format_error(label_ + ": read of " + u(n) + " bytes at " + u(off) + " is outside the file");
    if (n == 0) return Status::ok();
    return f_.pread_all(dst, size_t(n), off);
}

Status StFile::pread_data(uint64_t off, void* dst, uint64_t n) const {
    if (off > f_.size() - data_start())
        return format_error(label_ + ": read at data offset " + u(off) + " is outside the data buffer");
    return pread_file(data_start() + off, dst, n);
}

Status StFile::read_rows_f32(const TensorInfo& t, uint64_t row0, uint64_t n, float* out) const {
    const std::string TP = label_ + ": tensor '" + t.name + "': ";
    if (t.shape.size() != 2) return format_error(TP + "rows are read from rank-2 tensors only");
    if (n > t.shape[0] || row0 > t.shape[0] - n)
        return format_error(TP + "rows [" + u(row0) + ", +" + u(n) + ") are outside its " + u(t.shape[0]));
    if (t.dt != DType::F32 && t.dt != DType::BF16 && t.dt != DType::F16)
        return format_error(TP + "dtype " + t.dtype + "; only F32, BF16, F16 are read");
    const uint64_t cols = t.shape[1], es = dtype_size(t.dt);
    const uint64_t off = t.begin + row0 * cols * es, bytes = n * cols * es;  // <= nbytes: no overflow
    if (t.dt == DType::F32) return pread_data(off, out, bytes);
    std::vector<uint16_t> h(size_t(n * cols));
    SLUICE_TRY(pread_data(off, h.data(), bytes));
    if (t.dt == DType::BF16)
        for (size_t i = 0; i < h.size(); ++i) out[i] = bf16_to_f32(h[i]);
    else
        for (size_t i = 0; i < h.size(); ++i) out[i] = f16_to_f32(h[i]);
    return Status::ok();
}

// ---- Checkpoint ----------------------------------------------------------

std::string Checkpoint::where(const TensorInfo& t) const {
    return shards_[size_t(t.shard)].file + ": tensor '" + t.name + "'";
}

Status Checkpoint::open_shard(const std::string& file) {
    ShardInfo sh;
    sh.file = file;
    sh.path = (fs::path(dir_) / file).string();
    StFile& f = files_.emplace_back();
    SLUICE_TRY(f.open(sh.path));
    sh.size = f.file_size();
    sh.header_sha256 = f.header_sha256();
    const int shard = int(shards_.size());
    for (TensorInfo t : f.tensors()) {
        t.shard = shard;
        sh.dtype_tensors[t.dtype] += 1;
        sh.dtype_bytes[t.dtype] += t.nbytes;
        if (tensors_.count(t.name))
            return format_error(sh.path + ": tensor '" + t.name + "' is also in " +
                                shards_[size_t(tensors_[t.name].shard)].file);
        tensors_.emplace(t.name, std::move(t));
    }
    shards_.push_back(std::move(sh));
    return Status::ok();
}

Status Checkpoint::open(const std::string& dir) {
    dir_ = dir;
    const fs::path idx = fs::path(dir) / "model.safetensors.index.json";
    std::error_code ec;
    if (fs::exists(idx, ec)) {
        index_file_ = "model.safetensors.index.json";
        const std::string I = idx.string();
        std::string text;
        // A real index is a few MB even for a 1T-parameter model.
        SLUICE_TRY(read_whole_file(I, size_t(256) << 20, &text));
        json j;
        try {
            j = json::parse(text);
        } catch (const std::exception& e) {
            return format_error(I + ": not valid JSON: " + e.what());
        }
        if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
            return format_error(I + ": no weight_map object");
        std::map<std::string, std::string> wm;
        std::vector<std::string> files;
        for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
            if (!it.value().is_string()) return format_error(I + ": weight_map['" + it.key() + "'] is not a string");
            const std::string f = it.value().get<std::string>();
            // Shards live in the checkpoint directory: an index naming
            // /etc/... or ../.. must not make us open files outside it.
            if (f.empty() || f[0] == '/' || f.find("..") != std::string::npos)
                return format_error(I + ": weight_map names an unsafe shard path '" + f + "'");
            wm[it.key()] = f;
            if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
        }
        std::sort(files.begin(), files.end());
        for (const std::string& f : files) SLUICE_TRY(open_shard(f));
        // The index is the list of tensors; each listed tensor must really be
        // in the shard the index names.
        for (const auto& [name, f] : wm) {
            auto it = tensors_.find(name);
            if (it == tensors_.end() || shards_[size_t(it->second.shard)].file != f)
                return format_error(I + ": tensor '" + name + "' is listed in " + f + " but that shard has no such tensor");
        }
        for (auto it = tensors_.begin(); it != tensors_.end();) {
            if (!wm.count(it->first)) it = tensors_.erase(it);
            else ++it;
        }
        return Status::ok();
    }
    std::string single;
    if (fs::exists(fs::path(dir) / "model.safetensors", ec)) {
        single = "model.safetensors";
    } else {
        std::vector<std::string> cands;
        for (const auto& de : fs::directory_iterator(dir, ec))
            if (de.path().extension() == ".safetensors") cands.push_back(de.path().filename().string());
        if (cands.size() != 1)
            return io_error(dir + ": no model.safetensors.index.json and " +
                            (cands.empty() ? std::string("no .safetensors file") : std::string("several .safetensors files")));
        single = cands[0];
    }
    return open_shard(single);
}

std::vector<std::string> Checkpoint::names() const {
    std::vector<std::string> v;
    v.reserve(tensors_.size());
    for (const auto& kv : tensors_) v.push_back(kv.first);  // std::map: byte order
    return v;
}

const TensorInfo* Checkpoint::find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

Status Checkpoint::read_raw(const TensorInfo& t, uint64_t off, uint64_t n, void* dst) const {
    if (off > t.nbytes || n > t.nbytes - off) return format_error(where(t) + ": read outside the tensor");
    const Status st = files_[size_t(t.shard)].pread_file(t.offset + off, dst, n);
    if (!st.is_ok()) return {st.code(), where(t) + ": " + st.message() + " (file changed or truncated?)"};
    return Status::ok();
}

// ---- writer ----------------------------------------------------------------

std::string safetensors_header(const std::map<std::string, std::string>& meta,
                               const std::vector<TensorOut>& tensors, size_t align,
                               std::vector<const TensorOut*>* order_out, std::vector<uint64_t>* sizes_out) {
    // §2.5: descending dtype alignment, then name.
    std::vector<const TensorOut*> order;
    for (const auto& t : tensors) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
        const size_t ba = dtype_bits(a->dtype), bb = dtype_bits(b->dtype);
        return ba != bb ? ba > bb : a->name < b->name;
    });
    nlohmann::ordered_json hdr = nlohmann::ordered_json::object();
    if (!meta.empty()) {
        nlohmann::ordered_json m = nlohmann::ordered_json::object();
        for (const auto& [k, v] : meta) m[k] = v;  // std::map: byte-wise sorted
        hdr["__metadata__"] = m;
    }
    uint64_t off = 0;
    std::vector<uint64_t> sizes;
    for (auto* t : order) {
        uint64_t cnt = 1;
        for (auto d : t->shape) cnt *= d;
        const uint64_t bytes = cnt * dtype_bits(t->dtype) / 8;
        nlohmann::ordered_json e = nlohmann::ordered_json::object();
        e["dtype"] = t->dtype;
        e["shape"] = t->shape;
        e["data_offsets"] = {off, off + bytes};
        hdr[t->name] = e;
        sizes.push_back(bytes);
        off += bytes;
    }
    std::string h = hdr.dump();
    const size_t total = 8 + h.size();
    const size_t padded = (total + align - 1) / align * align;
    h.append(padded - total, ' ');
    if (order_out) *order_out = order;
    if (sizes_out) *sizes_out = sizes;
    return h;
}

Status write_safetensors(const std::string& path, const std::map<std::string, std::string>& meta,
                         const std::vector<TensorOut>& tensors, size_t align, std::string* sha_hex,
                         uint64_t* size_out) {
    if (align != 8 && align != 4096) return arg_error(path + ": safetensors align must be 8 or 4096");
    for (const TensorOut& t : tensors)
        if (!dtype_bits(t.dtype)) return arg_error(path + ": tensor '" + t.name + "': unknown dtype '" + t.dtype + "'");
    std::vector<const TensorOut*> order;
    std::vector<uint64_t> sizes;
    const std::string h = safetensors_header(meta, tensors, align, &order, &sizes);
    int fd = -1;
    std::string tmp;
    SLUICE_TRY(create_output_temp(path, &fd, &tmp));
    Sha256 sha;
    uint64_t written = 0;
    auto put = [&](const void* p, uint64_t n) -> bool {
        const char* c = static_cast<const char*>(p);
        sha.update(c, n);
        while (n) {
            const ssize_t w = ::write(fd, c, n);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) return false;
            c += w;
            n -= uint64_t(w);
            written += uint64_t(w);
        }
        return true;
    };
    uint8_t lenb[8];
    const uint64_t hl = h.size();
    for (int i = 0; i < 8; ++i) lenb[i] = uint8_t(hl >> (8 * i));
    bool ok = put(lenb, 8) && put(h.data(), h.size());
    for (size_t i = 0; ok && i < order.size(); ++i) ok = put(order[i]->data, sizes[i]);
    if (!ok || ::fsync(fd) != 0) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        ::unlink(tmp.c_str());
        return io_error(tmp + ": write failed: " + why);
    }
    ::close(fd);
    SLUICE_TRY(publish_output_temp(tmp, path));
    if (sha_hex) *sha_hex = sha.hex();
    if (size_out) *size_out = written;
    return Status::ok();
}

}  // namespace sluice::st
