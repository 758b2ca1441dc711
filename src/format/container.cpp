#include "format/container.h"
#include "common/checked_math.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "format/file_sha256.h"
#include "format/f16.h"

namespace sluice {

Status Container::open(const std::string &dir) {
    dir_ = dir;
    while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
    const std::string mpath = dir_ + "/manifest.json";
    std::string text;
    // A manifest is a few hundred kB for the largest models; 256 MiB bounds
    // a hostile file before we allocate for it.
    SLUICE_TRY(read_whole_file(mpath, (size_t)256 << 20, &text));
    SLUICE_TRY(parse_manifest(text, mpath, &man_));

    for (size_t i = 0; i < man_.trunk.size(); i++) {
        const std::string &n = man_.trunk[i].name;
        // With a prefix, entries outside it belong to other towers (vision)
        // and are not part of the text model (FORMAT.md §4.8).
        if (!man_.tensor_prefix.empty() && n.compare(0, man_.tensor_prefix.size(), man_.tensor_prefix) != 0)
            continue;
        by_name_.emplace(n.substr(man_.tensor_prefix.size()), i);  // first occurrence wins
    }
    SLUICE_TRY(trunk_.open_read(dir_ + "/trunk.bin"));

    // Codebooks.
    const ExpertQuant &eq = man_.eq;
    const int64_t rec = 16 + 2 * (int64_t)eq.entries * eq.vec_dim;
    File cb;
    SLUICE_TRY(cb.open_read(dir_ + "/codebooks.bin"));
    n_books_ = (int64_t)(cb.size() / (uint64_t)rec);
    if (n_books_ > (1 << 20)) return format_error(cb.path() + ": more than 2^20 codebook records");
    // The whole file in one read (the records, then a tail shorter than one
    // record): --verify hashes these very bytes, so a codebooks.bin changed
    // between the check and the load cannot pass (issue 32).
    std::vector<uint8_t> raw((size_t)cb.size());
    if (!raw.empty()) SLUICE_TRY(cb.pread_all(raw.data(), raw.size(), 0));
    if (!man_.codebooks_sha256.empty()) {
        Sha256 h;
        h.update(raw.data(), raw.size());
        codebooks_sha256_ = h.hex();
    }
    raw.resize((size_t)(n_books_ * rec));
    book_entries_ = eq.index_bits == 8 ? 256 : eq.entries;
    books_.assign((size_t)(n_books_ * book_entries_ * 8), 0.0f);
    for (int64_t b = 0; b < n_books_; b++) {
        const uint8_t *p = raw.data() + b * rec + 16;
        float *dst = books_.data() + b * book_entries_ * 8;
        // Stored entry-major; kept component-major for the table kernels.
        for (int64_t c = 0; c < (int64_t)eq.entries; c++)
            for (int64_t j = 0; j < 8; j++) dst[j * book_entries_ + c] = f16_codebook(rd16(p + 2 * (c * 8 + j)));
    }

    SLUICE_TRY(validate_banks(man_, n_books_, mpath));
    // The books a layer uses must carry the header the format writes
    // (FORMAT.md §5.1): an edited expert_quant.entries changes the record
    // size, so every header read at the new size is off, and the logits
    // would change silently. Unreferenced records may be zero (§5.2).
    for (const auto &[L, b] : man_.banks)
        for (int64_t k = b.codebook_base; k < b.codebook_base + 3 * (int64_t)eq.stages; k++) {
            const uint8_t *p = raw.data() + k * rec;
            if (rd32(p) != 0x4B424357u || rd16(p + 4) != (uint16_t)(k & 0xFFFF) || p[7] != 8 ||
                rd32(p + 8) != (uint32_t)eq.entries)
                return format_error(cb.path() + ": codebook record " + std::to_string(k) + " (layer " +
                                    std::to_string(L) + ") is not a codebook of " + std::to_string(eq.entries) +
                                    " entries with its own id; expert_quant.entries or the file is wrong");
        }
    for (const auto &[L, b] : man_.banks) {
        File f;
        SLUICE_TRY(f.open_read(dir_ + "/" + b.file));
        // The record stride comes from bytes/experts; a bank claiming more
        // than its file holds would size the cache from a lie (a 96 KiB file
        // claiming 8 GiB records planned a 16 GiB cache).
        if (f.size() < (uint64_t)b.bytes)
            return format_error(mpath + ": layers." + std::to_string(L) + ".bytes is " + std::to_string(b.bytes) +
                                " but " + f.path() + " holds " + std::to_string(f.size()) + " bytes");
        banks_.emplace(L, std::move(f));
    }
    return Status::ok();
}

// One pass over trunk.bin through the descriptor every trunk read uses: the
// whole-file digest, and one per tensor payload / scale range (the ranges
// load_entry reads), each updated with its slice of every chunk.
Status Container::hash_trunk(std::string *hex) const {
    struct Range {
        uint64_t start, len;
        std::unique_ptr<Sha256> h;
    };
    std::vector<Range> ranges;
    for (const TrunkEntry &e : man_.trunk) {
        QTensor q;
        if (!describe_entry(e, nullptr, &q).is_ok()) continue;  // its load fails on its own
        ranges.push_back({e.off, (uint64_t)q.rows * (uint64_t)q.rowbytes, std::make_unique<Sha256>()});
        if (q.fmt != QFmt::F32)
            ranges.push_back({e.scale_off, 2ull * (uint64_t)q.rows * (uint64_t)q.ng, std::make_unique<Sha256>()});
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range &a, const Range &b) { return a.start < b.start; });
    Sha256 whole;
    std::vector<uint8_t> buf((size_t)std::min<uint64_t>(1 << 20, std::max<uint64_t>(trunk_.size(), 1)));
    std::vector<Range *> active;
    size_t next = 0;
    for (uint64_t off = 0; off < trunk_.size();) {
        const size_t n = (size_t)std::min<uint64_t>(buf.size(), trunk_.size() - off);
        SLUICE_TRY(trunk_.pread_all(buf.data(), n, off));
        whole.update(buf.data(), n);
        const uint64_t end = off + n;
        while (next < ranges.size() && ranges[next].start < end) active.push_back(&ranges[next++]);
        for (size_t i = 0; i < active.size();) {
            Range &r = *active[i];
            const uint64_t a = std::max(r.start, off), b = std::min(r.start + r.len, end);
            if (a < b) r.h->update(buf.data() + (a - off), (size_t)(b - a));
            if (r.start + r.len <= end) {
                active[i] = active.back();
                active.pop_back();
            } else {
                i++;
            }
        }
        off = end;
    }
    *hex = whole.hex();
    trunk_ranges_.clear();
    for (Range &r : ranges) trunk_ranges_[{r.start, r.len}] = r.h->hex();
    return Status::ok();
}

Status Container::check_loaded(const std::string &what, uint64_t off, const void *p, uint64_t n) const {
    if (trunk_ranges_.empty()) return Status::ok();
    auto it = trunk_ranges_.find({off, n});
    if (it == trunk_ranges_.end()) return Status::ok();
    Sha256 h;
    h.update(p, (size_t)n);
    if (h.hex() != it->second)
        return format_error(trunk_.path() + ": " + what + " [" + std::to_string(off) + ", +" + std::to_string(n) +
                            ") changed after its SHA-256 check (the bytes loaded are not the bytes checked)");
    return Status::ok();
}

Status Container::check_integrity() const {
    const std::pair<std::string, const std::string *> files[] = {{"trunk.bin", &man_.trunk_sha256},
                                                                 {"codebooks.bin", &man_.codebooks_sha256}};
    for (const auto &[name, want] : files) {
        if (want->empty()) continue;
        // The bytes the container reads: codebooks.bin as decoded at open,
        // trunk.bin through the descriptor every trunk read uses (not a
        // second open of the path, which a rename could swap).
        std::string got = name == "codebooks.bin" ? codebooks_sha256_ : std::string();
        if (name == "trunk.bin") SLUICE_TRY(hash_trunk(&got));
        if (got != *want)
            return format_error(dir_ + "/" + name + ": SHA-256 " + got + " differs from manifest.json integrity." +
                                (name == "trunk.bin" ? "trunk_sha256 " : "codebooks_sha256 ") + *want +
                                " (the file was changed after conversion)");
    }
    return Status::ok();
}

const TrunkEntry *Container::find(const std::string &name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &man_.trunk[it->second];
}

Status Container::check_entry(const TrunkEntry &e, const std::string &name) const {
    const std::string where = trunk_.path() + ": tensor '" + e.name + "'";
    if (e.fmt != 0 && e.fmt != 2 && e.fmt != 3 && e.fmt != 7)
        return format_error(where + " has format code " + std::to_string(e.fmt) + " (expected 0, 2, 3 or 7)");
    return Status::ok();
}

Status Container::describe(const std::string &name, const std::vector<int64_t> &shape, QTensor *out) const {
    const TrunkEntry *e = find(name);
    if (!e) return format_error(dir_ + "/manifest.json: required tensor '" + man_.tensor_prefix + name + "' is missing");
    return describe_entry(*e, &shape, out);
}

Status Container::describe_entry(const TrunkEntry &entry, const std::vector<int64_t> *want, QTensor *out) const {
    const TrunkEntry *e = &entry;
    const std::string &full = e->name;
    SLUICE_TRY(check_entry(*e, full));
    const std::string where = trunk_.path() + ": tensor '" + full + "'";
    auto shape_str = [](const std::vector<int64_t> &s) {
        std::string r = "[";
        for (size_t i = 0; i < s.size(); i++) {  // piece by piece: "," + std::string trips GCC 12's -Wrestrict
            if (i) r += ',';
            r += s[i] < 0 ? std::string("*") : std::to_string(s[i]);
        }
        return r + "]";
    };
    if (want) {
        const std::vector<int64_t> &shape = *want;
        bool shape_ok = e->shape.size() == shape.size();
        for (size_t i = 0; shape_ok && i < shape.size(); i++) shape_ok = shape[i] < 0 || shape[i] == e->shape[i];
        if (!shape_ok)
            return format_error(where + " has shape " + shape_str(e->shape) + ", expected " + shape_str(shape));
    } else if (e->shape.empty()) {
        return format_error(where + " has an empty shape");
    }
    QTensor &t = *out;
    t.name = full;
    t.fmt = (QFmt)e->fmt;
    t.shape = e->shape;
    t.cols = e->shape.back();
    t.rows = 1;
    for (size_t i = 0; i + 1 < e->shape.size(); i++)
        if (!checked_mul<int64_t>(t.rows, e->shape[i], &t.rows)) return format_error(where + " is too large");
    if (t.rows > ((int64_t)1 << 40) / t.cols) return format_error(where + " is too large");
    if (t.fmt != QFmt::F32) {
        if (e->group % 8 != 0 || e->group > 4096)
            return unsupported(where + " has group " + std::to_string(e->group) +
                               "; sluice implements groups that are multiples of 8 up to 4096");
        if (!e->has_scale_off) return format_error(where + " is quantized but has no scale_off");
    }
    t.group = (int)e->group;
    if (!qtensor_geometry(t.fmt, t.cols, t.group, &t.ng, &t.rowbytes)) return format_error(where + ": bad geometry");
    // Bound every byte range against the file before reading (untrusted input).
    const uint64_t fsz = trunk_.size();
    const uint64_t payload = (uint64_t)t.rows * (uint64_t)t.rowbytes;
    if (e->off > fsz || payload > fsz - e->off)
        return io_error(where + ": payload [" + std::to_string(e->off) + ", +" + std::to_string(payload) +
                        ") runs past the end of the file (" + std::to_string(fsz) + " bytes)");
    if (t.fmt != QFmt::F32) {
        const uint64_t sbytes = 2ull * (uint64_t)t.rows * (uint64_t)t.ng;
        if (e->scale_off > fsz || sbytes > fsz - e->scale_off)
            return io_error(where + ": scales [" + std::to_string(e->scale_off) + ", +" + std::to_string(sbytes) +
                            ") run past the end of the file (" + std::to_string(fsz) + " bytes)");
    }
    return Status::ok();
}

Status Container::load(const std::string &name, const std::vector<int64_t> &shape, bool need_f32,
                       QTensor *out) const {
    const TrunkEntry *e = find(name);
    if (!e) return format_error(dir_ + "/manifest.json: required tensor '" + man_.tensor_prefix + name + "' is missing");
    return load_entry(*e, &shape, need_f32, out);
}

const TrunkEntry *Container::find_full(const std::string &full_name) const {
    for (const TrunkEntry &e : man_.trunk)
        if (e.name == full_name) return &e;  // first occurrence wins, as find() does
    return nullptr;
}

Status Container::load_entry(const TrunkEntry &entry, const std::vector<int64_t> *shape, bool need_f32,
                             QTensor *out) const {
    SLUICE_TRY(describe_entry(entry, shape, out));
    const TrunkEntry *e = &entry;
    QTensor &t = *out;
    if (need_f32 && t.fmt != QFmt::F32)
        return format_error(trunk_.path() + ": tensor '" + t.name + "' must be F32 but is " + qfmt_name(t.fmt));
    const size_t payload = (size_t)(t.rows * t.rowbytes);
    t.data = aligned_alloc_bytes(payload);
    if (!t.data) return Status(SLUICE_E_NOMEM, "cannot allocate " + std::to_string(payload) + " bytes for " + t.name);
    SLUICE_TRY(trunk_.pread_all(t.data.get(), payload, e->off));
    SLUICE_TRY(check_loaded("tensor '" + t.name + "'", e->off, t.data.get(), payload));
    if (t.fmt != QFmt::F32) {
        std::vector<uint8_t> raw((size_t)(2 * t.rows * t.ng));
        SLUICE_TRY(trunk_.pread_all(raw.data(), raw.size(), e->scale_off));
        SLUICE_TRY(check_loaded("the scales of tensor '" + t.name + "'", e->scale_off, raw.data(), raw.size()));
        t.scales.resize((size_t)(t.rows * t.ng));
        for (size_t i = 0; i < t.scales.size(); i++) t.scales[i] = f16_scale(rd16(raw.data() + 2 * i));
    }
    return Status::ok();
}

Status Container::load_f32_min(const std::string &name, int64_t min_elems, std::vector<float> *out) const {
    const TrunkEntry *e = find(name);
    if (!e) return format_error(dir_ + "/manifest.json: required tensor '" + man_.tensor_prefix + name + "' is missing");
    std::vector<int64_t> any(e->shape.size(), -1);
    QTensor t;
    SLUICE_TRY(load(name, any, true, &t));
    if (t.numel() < min_elems)
        return format_error(trunk_.path() + ": tensor '" + t.name + "' has " + std::to_string(t.numel()) +
                            " elements, needs at least " + std::to_string(min_elems));
    out->assign(t.f32(), t.f32() + t.numel());
    return Status::ok();
}

void dequant_row_f32(const QTensor &d, const uint8_t *row, const uint8_t *sraw, float *out) {
    if (d.fmt == QFmt::F32) {
        std::memcpy(out, row, (size_t)d.cols * 4);
        return;
    }
    for (int64_t i = 0; i < d.cols; i++) {
        float s = f16_scale(rd16(sraw + 2 * (i / d.group)));
        int q;
        if (d.fmt == QFmt::Q8G) {
            q = (int8_t)row[(size_t)i];
        } else if (d.fmt == QFmt::Q4G) {
            uint8_t b = row[(size_t)(i >> 1)];
            q = (int)((i & 1) ? (b >> 4) : (b & 15)) - 8;
        } else {
            int64_t p = 3 * i;
            unsigned v = row[(size_t)(p >> 3)] | ((unsigned)row[(size_t)(p >> 3) + 1] << 8);
            q = (int)((v >> (p & 7)) & 7) - 4;
        }
        out[i] = (float)q * s;
    }
}

Status Container::read_row_f32(const QTensor &d, int64_t r, float *out) const {
    const TrunkEntry *e = find(d.name.substr(man_.tensor_prefix.size()));
    if (!e) return format_error(dir_ + "/manifest.json: tensor '" + d.name + "' is missing");
    return read_rows_f32(*e, d, r, r + 1, out);
}

Status Container::read_rows_f32(const TrunkEntry &e, const QTensor &d, int64_t r0, int64_t r1, float *out) const {
    if (r0 < 0 || r1 < r0 || r1 > d.rows)
        return arg_error(trunk_.path() + ": tensor '" + d.name + "': rows [" + std::to_string(r0) + ", " +
                         std::to_string(r1) + ") outside [0, " + std::to_string(d.rows) + ")");
    const int64_t n = r1 - r0;
    if (n == 0) return Status::ok();
    std::vector<uint8_t> rows((size_t)(n * d.rowbytes));
    SLUICE_TRY(trunk_.pread_all(rows.data(), rows.size(), e.off + (uint64_t)r0 * d.rowbytes));
    std::vector<uint8_t> sraw;
    if (d.fmt != QFmt::F32) {
        sraw.resize((size_t)(2 * d.ng * n));
        SLUICE_TRY(trunk_.pread_all(sraw.data(), sraw.size(), e.scale_off + (uint64_t)r0 * d.ng * 2));
    }
    for (int64_t r = 0; r < n; r++)
        dequant_row_f32(d, rows.data() + r * d.rowbytes, sraw.empty() ? nullptr : sraw.data() + 2 * d.ng * r,
                    out + r * d.cols);
    return Status::ok();
}

}  // namespace sluice
