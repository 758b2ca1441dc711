// `sluice verify`: every expert record header and CRC, codebook records,
// trunk bounds; with a source checkpoint, the dequantized-vs-source error
// of every trunk tensor and every expert matrix.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "convert/container.h"
#include "convert/convert.h"
#include "convert/experts.h"
#include "convert/numeric.h"
#include "convert/safetensors.h"
#include "convert/trunk.h"
#include "convert/util.h"

namespace sluice::convert {

static uint32_t rd16(const uint8_t* p) { return p[0] | (p[1] << 8); }
static uint32_t rd32(const uint8_t* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24); }

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

// Header checks of FORMAT.md 6.11 plus what warp's verify_container.py
// asserts; returns "" or the first problem.
static std::string check_record(const WasteContainer& c, const WasteLayer& l, int64_t e, const std::vector<uint8_t>& r,
                                bool* crc_bad) {
    const RecordGeom& g = c.geom();
    *crc_bad = false;
    if (rd32(&r[0]) != 0x50584557u) return "bad magic";
    if (rd16(&r[4]) != (static_cast<uint32_t>(l.layer) & 0xFFFF) || rd16(&r[6]) != (static_cast<uint32_t>(e) & 0xFFFF))
        return "layer/expert id fields do not match its position";
    if (static_cast<uint64_t>(rd32(&r[16])) * 4096 != l.stride) return "rec_4k_blocks does not match the stride";
    const int fmt = r[8];
    if ((c.index_bits() == 6 && fmt != 8) || (c.index_bits() == 8 && fmt != 4 && fmt != 5))
        return "fmt byte " + std::to_string(fmt) + " does not fit index_bits";
    if (rd16(&r[12]) != 0) return "lowrank_id is not 0";
    if (r[9] != 0) return "flags are not 0";
    if (rd16(&r[10]) != static_cast<uint32_t>(l.base)) return "codebook_id differs from the layer's codebook_base";
    if (rd16(&r[10]) + 3 * c.stages() > c.n_books()) return "codebook_id past the end of codebooks.bin";
    for (int k = 0; k < 4; ++k)
        if (rd32(&r[20 + 4 * k]) != g.off[k]) return "matrix offsets differ from the geometry config.json implies";
    if (g.scale_end > l.stride) return "record too small for its scales";
    const uint32_t crc = crc32(r.data() + 48, g.scale_end - 48);
    if (crc != rd32(&r[36])) {
        *crc_bad = true;
        char b[96];
        std::snprintf(b, sizeof b, "checksum mismatch (stored %08x, computed %08x)", rd32(&r[36]), crc);
        return b;
    }
    for (uint64_t i = g.scale_end; i < l.stride; ++i)
        if (r[i] != 0) return "padding after the scales is not zero";
    return "";
}

int run_verify(const VerifyOptions& opt, VerifyReport* rep, std::string* err, ProgressSink* user_sink) {
    DefaultSink dflt(false);
    ProgressSink* sink = user_sink ? user_sink : &dflt;
    *rep = VerifyReport{};
    WasteContainer c;
    if (!c.open(opt.container_dir, err)) return 2;
    const std::string& dir = opt.container_dir;
    const ojson cfg = c.manifest()["config"];
    // Codebook records referenced by layers: headers as the converter writes them.
    const uint64_t rs = codebook_record_size(c.entries());
    for (const WasteLayer& l : c.layers())
        for (int64_t b = l.base; b < l.base + 3 * c.stages() && b < c.n_books(); ++b) {
            const uint8_t* p = &c.codebook_bytes()[static_cast<size_t>(b * rs)];
            if (rd32(p) != 0x4B424357u || rd16(p + 4) != (static_cast<uint32_t>(b) & 0xFFFF) || p[7] != 8 ||
                rd32(p + 8) != static_cast<uint32_t>(c.entries()))
                rep->problems.push_back("codebooks.bin record " + std::to_string(b) + ": header is not a codebook of " +
                                        std::to_string(c.entries()) + " entries with its own id");
        }
    const int64_t nexp = cfg.value("num_experts", int64_t{0});
    for (const WasteLayer& l : c.layers()) {
        const std::string path = dir + "/" + l.file;
        if (l.experts != nexp || l.stride % 4096 != 0 || l.stride * static_cast<uint64_t>(l.experts) != l.bytes ||
            file_size(path) != static_cast<int64_t>(l.bytes)) {
            rep->problems.push_back(path + ": bank size/experts/stride do not match the manifest");
            ++rep->header_failures;
            continue;
        }
        std::mutex mu;
        parallel_for(l.experts, opt.jobs, [&](int64_t e, std::string*) {
            std::vector<uint8_t> r;
            std::string er;
            bool crc_bad = false;
            std::string p = c.read_record(l, e, &r, &er) ? check_record(c, l, e, r, &crc_bad) : er;
            std::lock_guard<std::mutex> lk(mu);
            ++rep->records_checked;
            if (!p.empty()) {
                (crc_bad ? rep->crc_failures : rep->header_failures) += 1;
                rep->problems.push_back("expert " + std::to_string(e) + " of layer " + std::to_string(l.layer) + ": " + p);
            }
            return true;
        }, nullptr);
        sink->progress("verify", l.experts, l.experts, "layer " + std::to_string(l.layer));
    }
    // Exactly the MoE layers have bank entries (FORMAT.md 2.4).
    const int64_t nl = cfg.value("num_hidden_layers", int64_t{0}), fk = cfg.value("first_k_dense_replace", int64_t{0});
    for (int64_t L = 0; L < nl; ++L) {
        bool has = false;
        for (const WasteLayer& l : c.layers()) has |= l.layer == L;
        const bool moe = nexp > 0 && L >= fk;
        if (has != moe)
            rep->problems.push_back("manifest layers: layer " + std::to_string(L) + (moe ? " is MoE but has no bank entry" : " is dense but has a bank entry"));
    }
    const int64_t tsz = file_size(dir + "/trunk.bin");
    if (tsz < 0) rep->problems.push_back(dir + "/trunk.bin: missing");
    for (const ojson& t : c.manifest()["trunk"]) {
        const std::string name = t.value("name", "");
        const int fmt = t.value("fmt", -1);
        const uint64_t off = t.value("off", uint64_t{0}), bytes = t.value("bytes", uint64_t{0});
        const std::vector<int64_t> shape = t.value("shape", std::vector<int64_t>{});
        int64_t n = shape.empty() ? 0 : 1;
        for (int64_t d : shape) n *= d;
        std::string p;
        if (fmt != kF32 && fmt != kQ8G && fmt != kQ4G && fmt != kQ3G) p = "unknown fmt " + std::to_string(fmt);
        else if (shape.empty() || shape.size() > 4 || n <= 0) p = "shape must have 1-4 positive dims";
        else if (tsz >= 0 && off + bytes > static_cast<uint64_t>(tsz)) p = "extends past trunk.bin";
        else if (fmt == kF32 && bytes != static_cast<uint64_t>(n) * 4) p = "F32 bytes != 4 x elements";
        else if (fmt != kF32) {
            const int64_t N = shape.back(), R = n / N, ng = (N + 127) / 128;
            const uint64_t payload = trunk_row_bytes(fmt, ng * 128) * static_cast<uint64_t>(R);
            if (t.value("group", 128) != 128) p = "group is not 128";
            else if (t.value("scale_off", uint64_t{0}) + 2 * static_cast<uint64_t>(R * ng) > static_cast<uint64_t>(tsz) ||
                     bytes != payload + 2 * static_cast<uint64_t>(R * ng))
                p = "payload/scales do not fit the shape";
        }
        if (!p.empty()) rep->problems.push_back("trunk entry '" + name + "': " + p);
    }

    if (!opt.source_dir.empty()) {
        Checkpoint ck;
        ModelPlan mp;
        if (!ck.open(opt.source_dir, err) || !load_model_plan(opt.source_dir, ck, &mp, err)) return 2;
        ck.set_fp8_block(mp.fp8_bm, mp.fp8_bn);
        std::vector<TrunkEntry> plan;
        uint64_t total = 0;
        if (!plan_trunk(ck, mp, 4, false, &plan, &total, err)) return 2;
        for (const ojson& t : c.manifest()["trunk"]) {
            const std::string name = t.value("name", "");
            const TrunkEntry* src = nullptr;
            for (const TrunkEntry& p : plan)
                if (p.name == name) src = &p;
            if (!src) {
                rep->problems.push_back("trunk entry '" + name + "': not in the source");
                continue;
            }
            std::vector<float> w, s(static_cast<size_t>(src->rows * src->cols));
            if (!c.read_trunk(t, &w, err) || !ck.read_rows_f32(src->source, 0, src->rows, s.data(), err)) return 2;
            if (w.size() != s.size()) {
                rep->problems.push_back("trunk entry '" + name + "': element count differs from the source");
                continue;
            }
            ErrAcc a;
            a.add(w.data(), s.data(), w.size());
            rep->trunk.push_back({name, a.rel(), a.rel(), a.max_abs});
        }
        static const char* kn[3] = {"gate", "up", "down"};
        for (const WasteLayer& l : c.layers()) {
            std::vector<double> rel[3];
            double mabs[3] = {0, 0, 0};
            std::vector<double> absmax[3];
            for (int k = 0; k < 3; ++k) {
                rel[k].assign(static_cast<size_t>(l.experts), 0.0);
                absmax[k].assign(static_cast<size_t>(l.experts), 0.0);
            }
            std::mutex mu;
            if (!parallel_for(l.experts, opt.jobs, [&](int64_t e, std::string* er) {
                    std::vector<uint8_t> r;
                    if (!c.read_record(l, e, &r, er)) return false;
                    for (int k = 0; k < 3; ++k) {
                        std::vector<float> w, s(static_cast<size_t>(c.geom().rows[k] * c.geom().cols[k]));
                        c.dequant_matrix(r, k, &w);
                        if (!ck.read_rows_f32(mp.expert_name(l.layer, e, k), 0, c.geom().rows[k], s.data(), er)) return false;
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
            const std::string lp = std::string("L") + std::to_string(l.layer);
            if (opt.per_expert)  // in expert order, whatever order the workers finished in
                for (int64_t e = 0; e < l.experts; ++e)
                    for (int k = 0; k < 3; ++k) {
                        std::string nm = lp;
                        nm += ".e";
                        nm += std::to_string(e);
                        nm += ".";
                        nm += kn[k];
                        const size_t i = static_cast<size_t>(e);
                        rep->experts.push_back({nm, rel[k][i], rel[k][i], absmax[k][i]});
                    }
            for (int k = 0; k < 3; ++k) {
                double sum = 0, mx = 0;
                for (double v : rel[k]) { sum += v; mx = std::max(mx, v); }
                rep->experts.push_back({lp + "." + kn[k],
                                        l.experts ? sum / static_cast<double>(l.experts) : 0.0, mx, mabs[k]});
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
