// `sluice verify`: every expert record header and CRC, codebook records,
// trunk bounds; with a source checkpoint, the dequantized-vs-source error
// of every trunk tensor and every expert matrix.
//
// The container is opened by the engine's own reader (src/format): the
// manifest, bank index and trunk entries get exactly the checks the engine
// applies when it loads a model, the record headers those it applies on
// every read (check_expert_record), and the dequantized values are the ones
// its kernels compute. On top of that, verify checks what the converter's
// layout fixes exactly (offsets as config.json implies, zero flags and
// padding, group 128, codebook record headers) and reports every bad record
// instead of stopping at the first.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "convert/checkpoint.h"
#include "convert/convert.h"
#include "convert/experts.h"
#include "convert/trunk.h"
#include "convert/util.h"
#include "format/container.h"
#include "format/crc32.h"
#include "format/expert_record.h"
#include "format/f16.h"

namespace sluice::convert {

namespace {

struct ErrAcc {
    double num = 0, den = 0, max_abs = 0;
    void add(const float* w, const float* s, size_t n) {
        for (size_t i = 0; i < n; ++i) {
            const double d = static_cast<double>(w[i]) - static_cast<double>(s[i]);
            num += d * d;
            den += static_cast<double>(s[i]) * s[i];
            max_abs = std::max(max_abs, std::fabs(d));
        }
    }
    double rel() const { return den > 0 ? std::sqrt(num / den) : std::sqrt(num); }
};

// One bank with what its records must look like.
struct Bank {
    int layer = 0;
    const BankEntry* entry = nullptr;
    std::string path;
    ExpertGeom eg;  // the engine's view (check_expert_record)
    RecordGeom g;   // the converter's exact layout
};

// "" when record e is sound; otherwise the problem, naming file, expert and
// layer. *crc_bad tells a checksum mismatch from a header problem.
std::string check_record(const Container& c, const Bank& b, int64_t e, const std::vector<uint8_t>& r, bool* crc_bad) {
    *crc_bad = false;
    ExpertView view;
    const Status st = check_expert_record(r.data(), b.eg, b.layer, static_cast<int>(e), b.entry->codebook_base,
                                          c.n_books(), false, b.path, &view);
    if (!st) return st.message();
    const std::string at = b.path + ": expert " + std::to_string(e) + " of layer " + std::to_string(b.layer) + ": ";
    if (r[9] != 0) return at + "flags are not 0";
    for (int k = 0; k < 4; ++k)
        if (rd32(&r[static_cast<size_t>(20 + 4 * k)]) != b.g.off[k])
            return at + "matrix offsets differ from the geometry config.json implies";
    if (b.g.scale_end > r.size()) return at + "record too small for its scales";
    const uint32_t crc = crc32_ieee(r.data() + 48, b.g.scale_end - 48);
    if (crc != rd32(&r[36])) {
        *crc_bad = true;
        char m[96];
        std::snprintf(m, sizeof m, "checksum mismatch (stored %08x, computed %08x)", rd32(&r[36]), crc);
        return at + m;
    }
    for (size_t i = b.g.scale_end; i < r.size(); ++i)
        if (r[i] != 0) return at + "padding after the scales is not zero";
    return "";
}

bool read_record(const Container& c, const Bank& b, int64_t e, std::vector<uint8_t>* r, std::string* err) {
    const uint64_t stride = static_cast<uint64_t>(b.eg.stride);
    r->resize(stride);
    return status_ok(c.bank_file(b.layer).pread_all(r->data(), stride, stride * static_cast<uint64_t>(e)), err);
}

// One matrix of a sound record per FORMAT.md 6.9: stages summed left to
// right in f32 from the engine's decoded books (subnormals flushed, 5.3),
// then one f32 multiply by the row scale (subnormals kept, 12.1).
void dequant_matrix(const Container& c, const RecordGeom& g, const std::vector<uint8_t>& rec, int kind,
                    std::vector<float>* w) {
    const int S = g.S;
    const int64_t M = g.rows[kind], N = g.cols[kind], nv = N / 8;
    const int BE = c.book_entries();
    std::vector<uint8_t> idx(static_cast<size_t>(M * nv * S));
    unpack_indices(g, kind, rec.data(), idx.data());
    const int64_t cbid = rd16(&rec[10]);
    const uint8_t* scp = rec.data() + g.off[3] + 2 * (kind == 0 ? 0 : kind == 1 ? g.rows[0] : g.rows[0] + g.rows[1]);
    w->resize(static_cast<size_t>(M * N));
    for (int64_t r = 0; r < M; ++r) {
        const float scale = f16_scale(rd16(scp + 2 * r));
        for (int64_t v = 0; v < nv; ++v) {
            const uint8_t* s = &idx[static_cast<size_t>((r * nv + v) * S)];
            for (int d = 0; d < 8; ++d) {
                float acc = 0.0f;
                for (int st = 0; st < S; ++st) {
                    const float cv = c.book(cbid + kind * S + st)[d * BE + s[st]];
                    acc = st == 0 ? cv : acc + cv;
                }
                (*w)[static_cast<size_t>(r * N + v * 8 + d)] = acc * scale;
            }
        }
    }
}

// Trunk entry checks beyond the engine's describe(): what the converter
// (and warp's) always writes.
std::string check_trunk_layout(const sluice::TrunkEntry& t, const QTensor& q) {
    if (t.shape.size() > 4) return "shape must have 1-4 dims";
    if (t.fmt != kF32 && t.group != 128) return "group is not 128";
    const uint64_t payload = static_cast<uint64_t>(q.rows * q.rowbytes);
    const uint64_t scales = t.fmt == kF32 ? 0 : 2 * static_cast<uint64_t>(q.rows * q.ng);
    if (t.bytes >= 0 && static_cast<uint64_t>(t.bytes) != payload + scales)
        return t.fmt == kF32 ? "F32 bytes != 4 x elements" : "payload/scales do not fit the shape";
    return "";
}

// True when the source's logical tensor `name`, viewed as rows of its last
// dimension, is exactly rows x cols; otherwise *why says what it is.
bool source_matrix_is(const Checkpoint& ck, const std::string& name, int64_t rows, int64_t cols, std::string* why) {
    std::vector<int64_t> shape;
    std::string er;
    if (!ck.logical_shape(name, &shape, &er)) {
        *why = er.empty() ? "'" + name + "' is not in the source" : er;
        return false;
    }
    int64_t r = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) r *= shape[i];
    const int64_t c = shape.empty() ? 1 : shape.back();
    if (r == rows && c == cols) return true;
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ',';  // not (i ? "," : "") + ...: GCC 12 -Wrestrict false positive
        s += std::to_string(shape[i]);
    }
    *why = "'" + name + "' is " + s + "], the container needs " + std::to_string(rows) + " x " + std::to_string(cols);
    return false;
}

}  // namespace

int run_verify(const VerifyOptions& opt, VerifyReport* rep, std::string* err, ProgressSink* user_sink) {
    DefaultSink dflt(false);
    ProgressSink* sink = user_sink ? user_sink : &dflt;
    *rep = VerifyReport{};
    Container c;
    if (!status_ok(c.open(opt.container_dir), err)) return 2;
    const std::string& dir = c.dir();
    const Manifest& man = c.manifest();
    const ModelConfig& cfg = man.cfg;
    if (std::string p; !status_ok(c.check_integrity(), &p)) rep->problems.push_back(p);

    // The codebook records the layers reference were checked by Container::open
    // (magic, own id, 8-bit entries, expert_quant.entries): a bad one refuses
    // the container above.

    std::vector<Bank> banks;
    for (const auto& [L, be] : man.banks) {
        Bank b;
        b.layer = L;
        b.entry = &be;
        b.path = dir + "/" + be.file;
        b.g = record_geometry(cfg.moe_inter, cfg.expert_in(), man.eq.stages, man.eq.index_bits);
        std::string p;
        if (!status_ok(b.eg.init(cfg.moe_inter, cfg.expert_in(), man.eq.stages, man.eq.entries, man.eq.index_bits,
                          be.bytes / be.experts),
                &p)) {
            rep->problems.push_back(b.path + ": " + p);
            ++rep->header_failures;
            continue;
        }
        if (c.bank_file(L).size() != static_cast<uint64_t>(be.bytes)) {
            rep->problems.push_back(b.path + ": " + std::to_string(c.bank_file(L).size()) +
                                    " bytes, the manifest says " + std::to_string(be.bytes));
            ++rep->header_failures;
            continue;
        }
        banks.push_back(std::move(b));
    }
    for (const Bank& b : banks) {
        const int64_t n = b.entry->experts;
        std::vector<std::string> found(static_cast<size_t>(n));
        std::vector<char> crc_bad(static_cast<size_t>(n), 0);
        parallel_for(n, opt.jobs, [&](int64_t e, std::string*) {
            std::vector<uint8_t> r;
            std::string er;
            bool bad_crc = false;
            found[static_cast<size_t>(e)] = read_record(c, b, e, &r, &er) ? check_record(c, b, e, r, &bad_crc) : er;
            crc_bad[static_cast<size_t>(e)] = bad_crc;
            return true;
        }, nullptr);
        for (int64_t e = 0; e < n; ++e) {  // in expert order, whatever order the workers finished in
            ++rep->records_checked;
            if (found[static_cast<size_t>(e)].empty()) continue;
            (crc_bad[static_cast<size_t>(e)] ? rep->crc_failures : rep->header_failures) += 1;
            rep->problems.push_back(found[static_cast<size_t>(e)]);
        }
        sink->progress("verify", n, n, "layer " + std::to_string(b.layer));
    }

    // Every trunk entry, also those outside tensor_prefix the engine skips.
    std::vector<QTensor> desc(man.trunk.size());
    std::vector<char> trunk_ok(man.trunk.size(), 0);
    for (size_t i = 0; i < man.trunk.size(); ++i) {
        const sluice::TrunkEntry& t = man.trunk[i];
        std::string p;
        if (!status_ok(c.describe_entry(t, nullptr, &desc[i]), &p)) {
            rep->problems.push_back(p);
            continue;
        }
        p = check_trunk_layout(t, desc[i]);
        if (!p.empty()) rep->problems.push_back("trunk entry '" + t.name + "': " + p);
        else trunk_ok[i] = 1;
    }

    if (!opt.source_dir.empty()) {
        Checkpoint ck;
        ModelPlan mp;
        if (!open_source(opt.source_dir, &ck, &mp, err)) return 2;
        std::vector<TrunkEntry> plan;
        uint64_t total = 0;
        if (!plan_trunk(ck, mp, 4, false, &plan, &total, err)) return 2;
        for (size_t i = 0; i < man.trunk.size(); ++i) {
            if (!trunk_ok[i]) continue;
            const std::string& name = man.trunk[i].name;
            const TrunkEntry* src = nullptr;
            for (const TrunkEntry& p : plan)
                if (p.name == name) src = &p;
            if (!src) {
                rep->problems.push_back("trunk entry '" + name + "': not in the source");
                continue;
            }
            const QTensor& q = desc[i];
            std::string why;
            if (q.rows != src->rows || q.cols != src->cols || !source_matrix_is(ck, src->source, q.rows, q.cols, &why)) {
                rep->problems.push_back("trunk entry '" + name + "': shape differs from the source" +
                                        (why.empty() ? "" : " (" + why + ")"));
                continue;
            }
            // Row chunks of ~1 M elements: the embedding alone is 1.5 GB as f32.
            const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 20) / q.cols);
            std::vector<float> w, s;
            ErrAcc a;
            for (int64_t r0 = 0; r0 < q.rows; r0 += chunk) {
                const int64_t r1 = std::min(q.rows, r0 + chunk);
                w.resize(static_cast<size_t>((r1 - r0) * q.cols));
                s.resize(w.size());
                if (!status_ok(c.read_rows_f32(man.trunk[i], q, r0, r1, w.data()), err) ||
                    !ck.read_rows_f32(src->source, r0 * src->src_rows_per_row, r1 * src->src_rows_per_row, s.data(),
                                      err))
                    return 2;
                a.add(w.data(), s.data(), w.size());
            }
            rep->trunk.push_back({name, a.rel(), a.rel(), a.max_abs});
        }
        static const char* kn[3] = {"gate", "up", "down"};
        for (const Bank& b : banks) {
            const int64_t n = b.entry->experts;
            std::vector<double> rel[3], absmax[3];
            double mabs[3] = {0, 0, 0};
            for (int k = 0; k < 3; ++k) {
                rel[k].assign(static_cast<size_t>(n), 0.0);
                absmax[k].assign(static_cast<size_t>(n), 0.0);
            }
            std::mutex mu;
            std::vector<std::string> shape_problems;
            if (!parallel_for(n, opt.jobs, [&](int64_t e, std::string* er) {
                    std::vector<uint8_t> r;
                    if (!read_record(c, b, e, &r, er)) return false;
                    bool crc_bad = false;
                    if (!check_record(c, b, e, r, &crc_bad).empty()) return true;  // reported above
                    for (int k = 0; k < 3; ++k) {
                        // The source is read into a buffer sized from the
                        // container's geometry: a source of another shape
                        // (a wrong checkpoint) must be refused first, or the
                        // read writes past the buffer.
                        std::string why;
                        if (!source_matrix_is(ck, mp.expert_name(b.layer, e, k), b.g.rows[k], b.g.cols[k], &why)) {
                            std::lock_guard<std::mutex> lk(mu);
                            shape_problems.push_back(b.path + ": expert " + std::to_string(e) + " of layer " +
                                                     std::to_string(b.layer) + " " + kn[k] +
                                                     ": the source does not match: " + why);
                            return true;
                        }
                        std::vector<float> w, s(static_cast<size_t>(b.g.rows[k] * b.g.cols[k]));
                        dequant_matrix(c, b.g, r, k, &w);
                        if (!ck.read_rows_f32(mp.expert_name(b.layer, e, k), 0, b.g.rows[k], s.data(), er)) return false;
                        ErrAcc a;
                        a.add(w.data(), s.data(), w.size());
                        std::lock_guard<std::mutex> lk(mu);
                        rel[k][static_cast<size_t>(e)] = a.rel();
                        absmax[k][static_cast<size_t>(e)] = a.max_abs;
                        mabs[k] = std::max(mabs[k], a.max_abs);
                    }
                    return true;
                }, err))
                return 2;
            std::sort(shape_problems.begin(), shape_problems.end());
            for (std::string& sp : shape_problems) rep->problems.push_back(std::move(sp));
            if (!shape_problems.empty()) continue;
            const std::string lp = std::string("L") + std::to_string(b.layer);
            if (opt.per_expert)  // in expert order, whatever order the workers finished in
                for (int64_t e = 0; e < n; ++e)
                    for (int k = 0; k < 3; ++k) {
                        const size_t i = static_cast<size_t>(e);
                        rep->experts.push_back({lp + ".e" + std::to_string(e) + "." + kn[k], rel[k][i], rel[k][i],
                                                absmax[k][i]});
                    }
            for (int k = 0; k < 3; ++k) {
                double sum = 0, mx = 0;
                for (double v : rel[k]) { sum += v; mx = std::max(mx, v); }
                rep->experts.push_back({lp + "." + kn[k], n ? sum / static_cast<double>(n) : 0.0, mx, mabs[k]});
            }
        }
    }
    if (!rep->problems.empty()) {
        *err = rep->problems.front() + (rep->problems.size() > 1 ? " (and " + std::to_string(rep->problems.size() - 1) + " more)" : "");
        return 2;
    }
    return 0;
}

}  // namespace sluice::convert
