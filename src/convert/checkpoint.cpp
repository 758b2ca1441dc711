#include "convert/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/sha256.h"
#include "convert/numeric.h"
#include "convert/util.h"
#include "format/f16.h"

namespace sluice::convert {

namespace fs = std::filesystem;
using json = nlohmann::json;

int64_t TensorInfo::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

int dtype_size(const std::string& d) {
    if (d == "F32" || d == "I32" || d == "U32") return 4;
    if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
    if (d == "F8_E4M3" || d == "F8_E5M2" || d == "U8" || d == "I8" || d == "BOOL") return 1;
    if (d == "F64" || d == "I64" || d == "U64") return 8;
    return 0;
}

Checkpoint::Checkpoint() = default;
Checkpoint::~Checkpoint() = default;

std::string Checkpoint::where(const TensorInfo& t) const {
    return shards_[t.shard].file + ": tensor '" + t.name + "'";
}

bool Checkpoint::open_shard(const std::string& file, std::string* err) {
    ShardInfo sh;
    sh.file = file;
    sh.path = (fs::path(dir_) / file).string();
    File& f = files_.emplace_back();
    if (!status_ok(f.open_read(sh.path), err)) return false;
    sh.size = f.size();
    uint8_t lenb[8];
    if (sh.size < 8 || !f.pread_all(lenb, 8, 0)) {
        *err = file + ": truncated safetensors file (" + std::to_string(sh.size) + " bytes, no header length)";
        return false;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | lenb[i];
    // A header beyond 256 MiB is not a real checkpoint; refuse before allocating.
    if (hlen > sh.size - 8 || hlen > (256ull << 20)) {
        *err = file + ": header length " + std::to_string(hlen) + " exceeds the file (" + std::to_string(sh.size) +
               " bytes): truncated or not a safetensors file";
        return false;
    }
    std::string hdr(hlen, '\0');
    if (!status_ok(f.pread_all(hdr.data(), hlen, 8), err)) return false;
    sh.header_sha256 = sha256_hex(hdr);
    json h;
    try {
        h = json::parse(hdr);
    } catch (const std::exception& e) {
        *err = file + ": header is not valid JSON: " + e.what();
        return false;
    }
    if (!h.is_object()) {
        *err = file + ": header is not a JSON object";
        return false;
    }
    const uint64_t data_start = 8 + hlen;
    const uint64_t data_len = sh.size - data_start;
    const int shard_idx = static_cast<int>(shards_.size());
    for (auto it = h.begin(); it != h.end(); ++it) {
        if (it.key() == "__metadata__") continue;
        const json& v = it.value();
        TensorInfo t;
        t.name = it.key();
        t.shard = shard_idx;
        const std::string at = file + ": tensor '" + t.name + "'";
        if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") ||
            !v["shape"].is_array() || !v.contains("data_offsets") || !v["data_offsets"].is_array() ||
            v["data_offsets"].size() != 2) {
            *err = at + ": header entry lacks dtype/shape/data_offsets";
            return false;
        }
        t.dtype = v["dtype"].get<std::string>();
        for (const json& d : v["shape"]) {
            if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t(1) << 40)) {
                *err = at + ": bad shape entry";
                return false;
            }
            t.shape.push_back(d.get<int64_t>());
        }
        const json& o = v["data_offsets"];
        if (!o[0].is_number_unsigned() || !o[1].is_number_unsigned()) {
            *err = at + ": data_offsets are not non-negative integers";
            return false;
        }
        const uint64_t b = o[0].get<uint64_t>(), e = o[1].get<uint64_t>();
        if (b > e || e > data_len) {
            *err = at + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                   "] run past the end of the data (" + std::to_string(data_len) +
                   " bytes): file truncated or header corrupt";
            return false;
        }
        t.offset = data_start + b;
        t.nbytes = e - b;
        const int es = dtype_size(t.dtype);
        if (es > 0) {
            // Guard the multiplication: every dim is <= 2^40 but the product may not be.
            long double want = static_cast<long double>(es);
            for (int64_t d : t.shape) want *= static_cast<long double>(d);
            if (want != static_cast<long double>(t.nbytes)) {
                *err = at + ": " + t.dtype + " shape needs " + std::to_string(static_cast<uint64_t>(want)) +
                       " bytes but data_offsets span " + std::to_string(t.nbytes);
                return false;
            }
        }
        sh.dtype_tensors[t.dtype] += 1;
        sh.dtype_bytes[t.dtype] += t.nbytes;
        if (tensors_.count(t.name)) {
            *err = at + ": tensor name appears in two shards";
            return false;
        }
        tensors_.emplace(t.name, std::move(t));
    }
    shards_.push_back(std::move(sh));
    return true;
}

bool Checkpoint::open(const std::string& dir, std::string* err) {
    dir_ = dir;
    const fs::path idx = fs::path(dir) / "model.safetensors.index.json";
    std::error_code ec;
    if (fs::exists(idx, ec)) {
        index_file_ = "model.safetensors.index.json";
        json j;
        try {
            std::ifstream f(idx);
            j = json::parse(f);
        } catch (const std::exception& e) {
            *err = idx.string() + ": not valid JSON: " + e.what();
            return false;
        }
        if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
            *err = idx.string() + ": no weight_map object";
            return false;
        }
        std::map<std::string, std::string> wm;
        std::vector<std::string> files;
        for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
            if (!it.value().is_string()) {
                *err = idx.string() + ": weight_map['" + it.key() + "'] is not a string";
                return false;
            }
            const std::string f = it.value().get<std::string>();
            if (f.empty() || f[0] == '/' || f.find("..") != std::string::npos) {
                *err = idx.string() + ": weight_map names an unsafe shard path '" + f + "'";
                return false;
            }
            wm[it.key()] = f;
            if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
        }
        std::sort(files.begin(), files.end());
        for (const std::string& f : files)
            if (!open_shard(f, err)) return false;
        // The index is the list of tensors (as in warp's converter); each
        // listed tensor must really be in the shard the index names.
        for (const auto& [name, f] : wm) {
            auto it = tensors_.find(name);
            if (it == tensors_.end() || shards_[it->second.shard].file != f) {
                *err = idx.string() + ": tensor '" + name + "' is listed in " + f + " but that shard has no such tensor";
                return false;
            }
        }
        for (auto it = tensors_.begin(); it != tensors_.end();) {
            if (!wm.count(it->first)) it = tensors_.erase(it);
            else ++it;
        }
        return true;
    }
    std::string single;
    if (fs::exists(fs::path(dir) / "model.safetensors", ec)) {
        single = "model.safetensors";
    } else {
        std::vector<std::string> cands;
        for (const auto& de : fs::directory_iterator(dir, ec))
            if (de.path().extension() == ".safetensors") cands.push_back(de.path().filename().string());
        if (cands.size() != 1) {
            *err = dir + ": no model.safetensors.index.json and " +
                   (cands.empty() ? std::string("no .safetensors file") : std::string("several .safetensors files"));
            return false;
        }
        single = cands[0];
    }
    return open_shard(single, err);
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

bool Checkpoint::read_raw(const TensorInfo& t, uint64_t off, uint64_t n, void* dst, std::string* err) const {
    if (off > t.nbytes || n > t.nbytes - off) {
        *err = where(t) + ": read outside the tensor";
        return false;
    }
    const Status st = files_[static_cast<size_t>(t.shard)].pread_all(dst, n, t.offset + off);
    if (!st) *err = where(t) + ": " + st.message() + " (file changed or truncated?)";
    return st.is_ok();
}

static bool is_float_dtype(const std::string& d) { return d == "F32" || d == "F16" || d == "BF16"; }
static bool is_fp8(const std::string& d) { return d == "F8_E4M3" || d == "F8_E5M2"; }

bool Checkpoint::logical_exists(const std::string& name) const {
    return has(name) || (has(name + "_packed") && has(name + "_scale"));
}

bool Checkpoint::logical_shape(const std::string& name, std::vector<int64_t>* shape, std::string* err) const {
    if (const TensorInfo* t = find(name)) {
        if (!is_float_dtype(t->dtype) && !is_fp8(t->dtype)) {
            *err = where(*t) + ": dtype " + t->dtype + " cannot be decoded to floats (F32, F16, BF16, F8_E4M3, F8_E5M2)";
            return false;
        }
        *shape = t->shape;
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
    *shape = {p->shape[0], p->shape[1] * 2};
    return true;
}

bool Checkpoint::read_rows_f32(const std::string& name, int64_t r0, int64_t r1, float* dst, std::string* err) const {
    std::vector<int64_t> shape;
    if (!decode_rows(name, r0, r1, dst, &shape, err)) return false;
    const int64_t N = shape.empty() ? 1 : shape.back();
    const int64_t n = (r1 - r0) * N;
    bool finite = true;
    for (int64_t i = 0; i < n; ++i) finite &= std::fabs(dst[i]) <= std::numeric_limits<float>::max();
    if (finite) return true;
    int64_t i = 0;
    while (std::fabs(dst[i]) <= std::numeric_limits<float>::max()) ++i;
    const TensorInfo* t = find(name) ? find(name) : find(name + "_packed");
    *err = (t ? where(*t) : "tensor '" + name + "'") + ": row " + std::to_string(r0 + i / N) + ", column " +
           std::to_string(i % N) + " decodes to " + (std::isnan(dst[i]) ? "NaN" : "an infinity") +
           "; non-finite weights cannot be quantized";
    return false;
}

bool Checkpoint::decode_rows(const std::string& name, int64_t r0, int64_t r1, float* dst, std::vector<int64_t>* shape_out,
                             std::string* err) const {
    std::vector<int64_t>& shape = *shape_out;
    if (!logical_shape(name, &shape, err)) return false;
    const int64_t N = shape.empty() ? 1 : shape.back();
    int64_t R = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) R *= shape[i];
    if (N == 0) R = 0;
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
    const int64_t pc = p->shape[1], sc = s->shape[1];
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
