#include "convert/container.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "convert/numeric.h"
#include "convert/trunk.h"
#include "convert/util.h"

namespace sluice::convert {

static int64_t jint(const ojson& o, const char* k, int64_t d) {
    auto it = o.find(k);
    if (it == o.end() || !it->is_number()) return d;
    return it->is_number_integer() ? it->get<int64_t>() : static_cast<int64_t>(it->get<double>());
}

bool WasteContainer::open(const std::string& dir, std::string* err) {
    dir_ = dir;
    std::string s;
    if (!read_file(dir + "/manifest.json", &s, err)) return false;
    try {
        m_ = ojson::parse(s);
    } catch (const std::exception& e) {
        *err = dir + "/manifest.json: not valid JSON: " + e.what();
        return false;
    }
    if (!m_.is_object() || jint(m_, "format_version", -1) != 0) {
        *err = dir + "/manifest.json: format_version must be 0";
        return false;
    }
    prefix_ = m_.value("tensor_prefix", "");
    ojson cfg = m_.value("config", ojson::object());
    if (cfg.contains("text_config") && cfg["text_config"].is_object()) cfg = cfg["text_config"];
    const ojson eq = m_.value("expert_quant", ojson::object());
    S_ = static_cast<int>(jint(eq, "stages", 3));
    E_ = static_cast<int>(jint(eq, "entries", 256));
    bits_ = static_cast<int>(jint(eq, "index_bits", 8));
    if (jint(eq, "vec_dim", 8) != 8 || jint(eq, "index_block", 64) != 64 || S_ < 1 || S_ > 8 || E_ < 1 || E_ > 256 ||
        !(bits_ == 8 || (bits_ == 6 && S_ == 4 && E_ == 64))) {
        *err = dir + "/manifest.json: unsupported expert_quant (vec_dim 8, index_block 64, index_bits 8 or 6/4/64)";
        return false;
    }
    const int64_t I = jint(cfg, "moe_intermediate_size", 0);
    const int64_t reh = jint(cfg, "routed_expert_hidden_size", 0);
    const int64_t lat = reh > 0 ? reh : jint(cfg, "hidden_size", 0);
    g_ = record_geometry(I, lat, S_, bits_);
    if (!read_file(dir + "/codebooks.bin", &s, err)) return false;
    cb_raw_.assign(s.begin(), s.end());
    const uint64_t rs = codebook_record_size(E_);
    n_books_ = static_cast<int64_t>(cb_raw_.size() / rs);
    books_.resize(static_cast<size_t>(n_books_ * E_ * 8));
    for (int64_t b = 0; b < n_books_; ++b)
        for (int64_t i = 0; i < E_ * 8; ++i) {
            const uint8_t* p = &cb_raw_[static_cast<size_t>(b * rs + 16 + 2 * i)];
            books_[static_cast<size_t>(b * E_ * 8 + i)] = f16_to_f32_flush(static_cast<uint16_t>(p[0] | (p[1] << 8)));
        }
    layers_.clear();
    const ojson ls = m_.value("layers", ojson::object());
    for (auto it = ls.begin(); it != ls.end(); ++it) {
        WasteLayer l;
        l.layer = std::atoi(it.key().c_str());
        l.file = it.value().value("file", "");
        l.experts = jint(it.value(), "experts", 0);
        l.bytes = static_cast<uint64_t>(jint(it.value(), "bytes", 0));
        l.base = jint(it.value(), "codebook_base", 0);
        l.stride = l.experts > 0 ? l.bytes / static_cast<uint64_t>(l.experts) : 0;
        layers_.push_back(l);
    }
    return true;
}

bool WasteContainer::read_trunk(const ojson& t, std::vector<float>* out, std::string* err) const {
    const std::string name = t.value("name", "");
    const int fmt = static_cast<int>(jint(t, "fmt", -1));
    std::vector<int64_t> shape = t.value("shape", std::vector<int64_t>{});
    if (shape.empty()) {
        *err = "trunk entry '" + name + "': no shape";
        return false;
    }
    const int64_t N = shape.back();
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const int64_t R = numel / N;
    const uint64_t off = static_cast<uint64_t>(jint(t, "off", 0));
    const std::string path = dir_ + "/trunk.bin";
    const int64_t fsz = file_size(path);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *err = path + ": cannot open";
        return false;
    }
    auto rd = [&](uint64_t o, uint64_t n, void* dst) {
        return o + n <= static_cast<uint64_t>(fsz) && ::pread(fd, dst, n, static_cast<off_t>(o)) == static_cast<ssize_t>(n);
    };
    out->resize(static_cast<size_t>(numel));
    bool ok;
    if (fmt == kF32) {
        ok = rd(off, static_cast<uint64_t>(numel) * 4, out->data());
    } else if (fmt == kQ8G || fmt == kQ4G || fmt == kQ3G) {
        const int64_t grp = jint(t, "group", 128);
        const int64_t ng = (N + grp - 1) / grp;
        const uint64_t rb = trunk_row_bytes(fmt, ng * grp);
        std::vector<uint8_t> pay(rb * static_cast<uint64_t>(R));
        std::vector<uint16_t> sc(static_cast<size_t>(R * ng));
        ok = grp == 128 && rd(off, pay.size(), pay.data()) &&
             rd(static_cast<uint64_t>(jint(t, "scale_off", 0)), sc.size() * 2, sc.data());
        for (int64_t r = 0; ok && r < R; ++r) dequantize_row(&pay[rb * r], &sc[r * ng], N, fmt, out->data() + r * N);
    } else {
        ::close(fd);
        *err = "trunk entry '" + name + "': unknown fmt " + std::to_string(fmt);
        return false;
    }
    ::close(fd);
    if (!ok) *err = "trunk entry '" + name + "': data outside trunk.bin (or group != 128)";
    return ok;
}

bool WasteContainer::read_record(const WasteLayer& l, int64_t e, std::vector<uint8_t>* rec, std::string* err) const {
    const std::string path = dir_ + "/" + l.file;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *err = path + ": cannot open";
        return false;
    }
    rec->resize(l.stride);
    const ssize_t r = ::pread(fd, rec->data(), l.stride, static_cast<off_t>(l.stride * static_cast<uint64_t>(e)));
    ::close(fd);
    if (r != static_cast<ssize_t>(l.stride)) {
        *err = "expert " + std::to_string(e) + " of layer " + std::to_string(l.layer) + ": short read";
        return false;
    }
    return true;
}

void WasteContainer::dequant_matrix(const std::vector<uint8_t>& rec, int kind, std::vector<float>* w) const {
    const int64_t M = g_.rows[kind], N = g_.cols[kind], nv = N / 8;
    std::vector<uint8_t> idx(static_cast<size_t>(M * nv * S_));
    unpack_indices(g_, kind, rec.data(), idx.data());
    const int cbid = rec[10] | (rec[11] << 8);
    const uint8_t* scp = rec.data() + g_.off[3] + 2 * (kind == 0 ? 0 : kind == 1 ? g_.rows[0] : g_.rows[0] + g_.rows[1]);
    w->resize(static_cast<size_t>(M * N));
    for (int64_t r = 0; r < M; ++r) {
        const float scale = f16_to_f32(static_cast<uint16_t>(scp[2 * r] | (scp[2 * r + 1] << 8)));
        for (int64_t v = 0; v < nv; ++v) {
            const uint8_t* s = &idx[static_cast<size_t>((r * nv + v) * S_)];
            for (int d = 0; d < 8; ++d) {
                float acc = 0.0f;
                for (int st = 0; st < S_; ++st) {
                    const int64_t book = cbid + kind * S_ + st;
                    const float c = book < n_books_ ? books_[static_cast<size_t>((book * E_ + s[st]) * 8 + d)] : 0.0f;
                    acc = st == 0 ? c : acc + c;
                }
                (*w)[static_cast<size_t>(r * N + v * 8 + d)] = acc * scale;
            }
        }
    }
}

}  // namespace sluice::convert
