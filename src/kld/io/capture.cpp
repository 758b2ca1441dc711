// sluice kld capture (KLD.md §7.3): engine → v0 ref/ directory.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "common/checked_file.h"
#include "kld/io/operand.h"
#include "format/safetensors.h"

namespace sluice::kld {

using namespace ::sluice::st;  // the safetensors reader and writer

namespace {

// Re-opens a written or pre-existing file and checks it against its record.
Status revalidate(const std::string& path, int64_t rows, int64_t V, const std::string& token_hash,
                  const std::string& expect_sha, uint64_t* size) {
    StFile f;
    SLUICE_TRY(f.open(path));
    const TensorInfo* t = f.find("logits");
    if (!t || f.tensors().size() != 1 || t->dt != DType::F32 || t->shape.size() != 2 ||
        int64_t(t->shape[0]) != rows || int64_t(t->shape[1]) != V)
        return err(Code::format, path + ": re-read does not hold exactly 'logits' F32 [" + std::to_string(rows) + "," +
                                     std::to_string(V) + "]");
    auto m = f.metadata().find("token_ids_json_sha256");
    if (m == f.metadata().end() || m->second != token_hash)
        return err(Code::identity, path + ": metadata token hash differs from the suite");
    std::string h;
    SLUICE_TRY(sha256_file(path, &h, size));
    if (h != expect_sha) return err(Code::identity, path + ": sha256 expected " + expect_sha + ", found " + h);
    return {};
}

Status write_window(LogitsEngine* e, const Suite& s, const SuiteWindow& w, const std::string& path, int64_t V,
                    const CaptureOptions& opt, bool k3, ProgressTicker* prog, std::string* sha_out, uint64_t* size_out) {
    const int64_t rows = s.context_length - 1;
    std::map<std::string, std::string> meta = e->extra_metadata();
    meta["format"] = k3 ? "kimi-k3-kld-reference-v1" : "sluice-kld-logits-v1";
    meta["window_index"] = std::to_string(w.index);
    meta["domain"] = w.domain;
    meta["context_length"] = std::to_string(s.context_length);
    meta["vocab_size"] = std::to_string(V);
    meta["dtype"] = "float32";
    meta["token_ids_json_sha256"] = w.token_hash;
    TensorOut t{"logits", "F32", {uint64_t(rows), uint64_t(V)}, nullptr};
    const std::string hdr = safetensors_header(meta, {t}, opt.align);
    ::sluice::OutputFile out;
    if (::sluice::Status st = out.create(path); !st) return from_status(st);
    const int fd = out.fd();
    const std::string tmp = out.temp_path();
    Sha256 sha;
    uint64_t written = 0;
    auto put = [&](const void* p, size_t n) -> Status {
        const char* c = static_cast<const char*>(p);
        sha.update(c, n);
        while (n) {
            ssize_t k = ::write(fd, c, n);
            if (k <= 0) return err(Code::io, tmp + ": write failed: " + std::strerror(errno));
            c += k;
            n -= size_t(k);
            written += uint64_t(k);
        }
        return {};
    };
    auto fail = [&](Status st) {
        out.discard();
        return st;
    };
    uint8_t lenb[8];
    for (int i = 0; i < 8; ++i) lenb[i] = uint8_t(uint64_t(hdr.size()) >> (8 * i));
    if (Status st = put(lenb, 8); !st.is_ok()) return fail(st);
    if (Status st = put(hdr.data(), hdr.size()); !st.is_ok()) return fail(st);
    if (Status st = e->reset(); !st.is_ok()) return fail(err(Code::engine, "engine reset failed: " + st.message()));
    const int64_t chunk = std::max(1, opt.chunk_rows);
    std::vector<float> buf(size_t(std::min(chunk, rows) * V));
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = std::min(chunk, rows - r0);
        if (Status st = e->eval(w.tokens.data() + r0, size_t(n), buf.data()); !st.is_ok())
            return fail(err(Code::engine, "window " + std::to_string(w.index) + ": engine eval failed at row " +
                                              std::to_string(r0) + ": " + st.message()));
        for (int64_t i = 0; i < n * V; ++i)
            if (!(buf[size_t(i)] < INFINITY))
                return fail(err(Code::nonfinite, "window " + std::to_string(w.index) + " row " + std::to_string(r0 + i / V) +
                                                     " column " + std::to_string(i % V) + ": engine produced " +
                                                     (std::isnan(buf[size_t(i)]) ? "NaN" : "+inf")));
        if (Status st = put(buf.data(), size_t(n * V) * 4); !st.is_ok()) return fail(st);
        prog->add_rows(n);
        prog->add_bytes(uint64_t(n * V) * 4);
    }
    if (::sluice::Status st = out.commit(); !st) return from_status(st);
    *sha_out = sha.hex();
    uint64_t sz = 0;
    SLUICE_TRY(revalidate(path, rows, V, w.token_hash, *sha_out, &sz));  // every file verified when written
    if (sz != written) return err(Code::io, path + ": size on disk differs from bytes written");
    *size_out = sz;
    return {};
}

}  // namespace

Status capture(LogitsEngine* e, const Suite& s, const std::vector<int>& positions, const std::string& out_dir,
               const CaptureOptions& opt, CaptureReport* rep) {
    const int64_t V = e->n_vocab();
    if (V < 1) return err(Code::engine, "engine reports vocab " + std::to_string(V));
    SLUICE_TRY(check_suite_vocab(s, V));
    SLUICE_TRY(make_dirs(out_dir));
    remove_tmp_files(out_dir);  // leftovers of an interrupted run
    const bool k3 = s.suite_hash == kFestr2SuiteHash;
    const std::string mpath = join_path(out_dir, "manifest.json");
    std::map<int, json> recs;
    if (file_exists(mpath)) {
        std::string text;
        json old;
        SLUICE_TRY(read_file(mpath, &text));
        SLUICE_TRY(parse_json(text, mpath, &old));
        if (old.value("suite_token_hash_sha256", "") != s.suite_hash || old.value("vocab_size", int64_t(0)) != V ||
            old.value("context_length", 0) != s.context_length)
            return err(Code::identity, mpath + ": existing capture is for another suite, vocab or context length");
        for (const auto& w : old["windows"]) recs[w["window_index"].get<int>()] = w;
    }
    const int64_t rows = s.context_length - 1;
    ProgressTicker prog(opt.progress, "capture", "written", int64_t(positions.size()), int64_t(positions.size()) * rows,
                        opt.progress_interval_s);
    for (int p : positions) {
        const SuiteWindow& w = s.windows[size_t(p)];
        const std::string fname = logits_name(w.index), path = join_path(out_dir, fname);
        auto it = recs.find(w.index);
        if (it != recs.end() && it->second.value("token_ids_json_sha256", "") == w.token_hash &&
            revalidate(path, rows, V, w.token_hash, it->second.value("sha256", ""), nullptr).is_ok()) {
            rep->skipped.push_back(w.index);
            prog.window_skipped(rows);
            continue;
        }
        std::string sha;
        uint64_t size = 0;
        SLUICE_TRY(write_window(e, s, w, path, V, opt, k3, &prog, &sha, &size));
        prog.window_done();
        json r;
        r["window_index"] = w.index;
        r["domain"] = w.domain;
        r["file"] = fname;
        r["key"] = "logits";
        r["shape"] = {rows, V};
        r["dtype"] = "F32";
        r["size_bytes"] = size;
        r["sha256"] = sha;
        r["token_ids_json_sha256"] = w.token_hash;
        recs[w.index] = r;
        rep->captured.push_back(w.index);
        rep->bytes_written += size;
        // The manifest is rewritten after every window so an interrupted
        // capture resumes from the last finished one.
        json m;
        m["format_version"] = 1;
        m["created_utc"] = utc_now_iso();
        m["kind"] = k3 ? "Kimi K3 full original MXFP4 KLD reference logits" : "sluice KLD logits";
        m["tensor_key"] = "logits";
        m["dtype"] = "float32";
        m["vocab_size"] = V;
        m["context_length"] = s.context_length;
        m["window_count"] = recs.size();
        int lo = s.position_of(recs.begin()->first), hi = s.position_of(recs.rbegin()->first) + 1;
        m["window_range"] = {lo, hi};
        m["total_scored_positions"] = int64_t(recs.size()) * rows;
        uint64_t total = 0;
        json arr = json::array();
        for (auto& [k, v] : recs) {
            total += v.value("size_bytes", uint64_t(0));
            arr.push_back(v);
        }
        m["total_size_bytes"] = total;
        m["suite_token_hash_sha256"] = s.suite_hash;
        m["windows"] = arr;
        json rt = e->identity();
        if (!rt.is_object()) rt = json::object();
        rt["capture_tool"] = "sluice kld capture";
        if (!opt.run_name.empty()) rt["run_name"] = opt.run_name;
        m["runtime"] = rt;
        SLUICE_TRY(write_file_atomic(mpath, dump_py(m, true)));
    }
    prog.stop(true);
    return {};
}

}  // namespace sluice::kld
