#include "kld/io/operand.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "kld/io/readahead.h"
#include "format/safetensors.h"
#include "common/sha256.h"

namespace sluice::kld {

using namespace ::sluice::st;  // the safetensors reader and writer

const char* const kFestr2SuiteHash = "a6856e1d0504fd00d13c67a5515c081f349088664d7ea0894dc4d15db2c7d209";

Status RowStream::peek(int64_t max, int64_t V, const float** rows, int64_t* n) {
    if (prow_ == pn_) {
        pbuf_.resize(size_t(max * V));
        SLUICE_TRY(read(max, pbuf_.data()));
        prow_ = 0;
        pn_ = max;
    }
    *rows = pbuf_.data() + prow_ * V;
    *n = std::min(max, pn_ - prow_);
    return {};
}

void hash_row_pair(RowStream& a, const float* pa, RowStream& b, const float* pb, int64_t bytes) {
    Sha256 *ha = a.row_hasher(), *hb = b.row_hasher();
    if (!ha || !hb) return;  // consume() hashes what it must
    Sha256::update2(*ha, pa, *hb, pb, size_t(bytes));
    a.rows_hashed(1);
    b.rows_hashed(1);
}

namespace {

struct Record {
    int window_index = 0;
    std::string domain, file, key, sha256, token_hash;
    std::vector<int64_t> shape;
};

// Validates one logits file against §7.9 "Tensor file" rules.
Status check_tensor_file(StFile& f, int64_t rows, int64_t V, const std::string& token_hash, const TensorInfo** out) {
    const std::string& P = f.path();
    const TensorInfo* t = f.find("logits");
    if (!t) return err(Code::format, P + ": no tensor 'logits'");
    if (f.tensors().size() != 1) return err(Code::format, P + ": holds tensors other than 'logits'");
    if (t->dt != DType::F32 && t->dt != DType::BF16 && t->dt != DType::F16)
        return err(Code::format, P + ": 'logits' dtype " + t->dtype + " is not F32, BF16 or F16");
    if (t->shape.size() != 2 || int64_t(t->shape[0]) != rows || int64_t(t->shape[1]) != V) {
        std::string got = "[";
        for (size_t i = 0; i < t->shape.size(); ++i) {  // not (i ? "," : "") + ...: GCC 12's false -Wrestrict
            if (i) got += ',';
            got += std::to_string(t->shape[i]);
        }
        return err(Code::identity, P + ": 'logits' shape expected [" + std::to_string(rows) + "," + std::to_string(V) +
                                       "], found " + got + "]");
    }
    auto m = f.metadata().find("token_ids_json_sha256");
    if (m != f.metadata().end() && m->second != token_hash)
        return err(Code::identity, P + ": metadata token_ids_json_sha256 expected " + token_hash + ", found " + m->second);
    m = f.metadata().find("vocab_size");
    if (m != f.metadata().end() && m->second != std::to_string(V))
        return err(Code::identity, P + ": metadata vocab_size expected " + std::to_string(V) + ", found " + m->second);
    *out = t;
    return {};
}

// Rows of one logits file, streamed by a ReadAhead (§7.8), with the SHA-256
// of the whole file computed inline: the header when the stream opens, the
// rows as they are consumed (or, paired with the other operand's rows, by
// hash_row_pair while they are still in cache), the rest of the file at
// finish().
class FileRows : public RowStream {
public:
    FileRows(StFile f, const TensorInfo* t, std::string expect_sha, bool verify)
        : f_(std::move(f)), t_(*t), expect_(std::move(expect_sha)), verify_(verify) {}
    Status start(const ReadAheadOptions& ro) {
        const uint64_t b = f_.data_start() + t_.begin, e = f_.data_start() + t_.end;
        if (verify_) SLUICE_TRY(hash_file_bytes(0, b));
        return ra_.open(f_.path(), b, e, ro, t_.shape[1] * dtype_size(t_.dt));
    }
    Status peek(int64_t max, int64_t V, const float** rows, int64_t* n) override {
        if (t_.dt != DType::F32) return RowStream::peek(max, V, rows, n);
        if (row_ + max > int64_t(t_.shape[0]) || V != int64_t(t_.shape[1]))
            return err(Code::format, f_.path() + ": row read out of range");
        const uint8_t* p = nullptr;
        uint64_t avail = 0;
        SLUICE_TRY(ra_.peek(&p, &avail));
        const int64_t k = int64_t(avail / (uint64_t(V) * 4));  // chunks hold whole rows
        if (k < 1) return err(Code::io, f_.path() + ": read-ahead chunk holds no whole row");
        peeked_ = p;
        pre_hashed_ = 0;
        *rows = reinterpret_cast<const float*>(p);
        *n = std::min(max, k);
        return {};
    }
    Sha256* row_hasher() override { return verify_ && t_.dt == DType::F32 ? &sha_ : nullptr; }
    void rows_hashed(int64_t k) override { pre_hashed_ += k; }
    uint64_t bytes_per_row() const override { return t_.shape[1] * dtype_size(t_.dt); }
    void consume(int64_t k) override {
        if (t_.dt != DType::F32) return RowStream::consume(k);
        const uint64_t rb = t_.shape[1] * 4;
        if (verify_ && k > pre_hashed_)  // rows the caller did not hash itself
            sha_.update(peeked_ + uint64_t(pre_hashed_) * rb, uint64_t(k - pre_hashed_) * rb);
        pre_hashed_ = 0;
        ra_.consume(uint64_t(k) * rb);
        row_ += k;
    }
    Status read(int64_t n, float* out) override {
        if (row_ + n > int64_t(t_.shape[0])) return err(Code::format, f_.path() + ": row read out of range");
        const uint64_t cnt = uint64_t(n) * t_.shape[1];
        if (t_.dt == DType::F32) {
            SLUICE_TRY(ra_.read(out, cnt * 4));
            if (verify_) sha_.update(out, cnt * 4);
        } else {  // BF16/F16: hash the raw bytes, then widen
            raw_.resize(cnt);
            SLUICE_TRY(ra_.read(raw_.data(), cnt * 2));
            if (verify_) sha_.update(raw_.data(), cnt * 2);
            if (t_.dt == DType::BF16)
                for (uint64_t i = 0; i < cnt; ++i) out[i] = bf16_to_f32(raw_[i]);
            else
                for (uint64_t i = 0; i < cnt; ++i) out[i] = f16_to_f32(raw_[i]);
        }
        row_ += n;
        return {};
    }
    Status finish() override {
        SLUICE_TRY(ra_.finish());
        if (!verify_) return {};
        if (row_ != int64_t(t_.shape[0])) return err(Code::io, f_.path() + ": could not hash the whole file");
        SLUICE_TRY(hash_file_bytes(f_.data_start() + t_.end, f_.file_size()));
        const std::string h = sha_.hex();
        if (h != expect_)
            return err(Code::identity, f_.path() + ": sha256 expected " + expect_ + " (manifest), found " + h);
        return {};
    }
private:
    // Bytes [from, to) of the file outside the streamed rows (header, trailer).
    Status hash_file_bytes(uint64_t from, uint64_t to) {
        std::vector<uint8_t> buf(size_t(std::min<uint64_t>(to - from, uint64_t(1) << 20)));
        for (uint64_t off = from; off < to;) {
            const uint64_t n = std::min<uint64_t>(buf.size(), to - off);
            SLUICE_TRY(f_.pread_file(off, buf.data(), n));
            sha_.update(buf.data(), n);
            off += n;
        }
        return {};
    }

    StFile f_;
    TensorInfo t_;
    std::string expect_;
    bool verify_;
    ReadAhead ra_;
    Sha256 sha_;
    const uint8_t* peeked_ = nullptr;
    int64_t pre_hashed_ = 0;  // rows of the current peek hashed by the caller
    std::vector<uint16_t> raw_;
    int64_t row_ = 0;
};

class V0Dir : public Operand {
public:
    std::string dir_;
    json m_;
    int64_t V_ = 0, T_ = 0;
    bool verify_ = true;
    ReadAheadOptions io_;
    std::string manifest_sha_;
    std::map<int, Record> recs_;
    std::vector<std::string> warn_;

    std::string kind() const override { return "v0-dir"; }
    std::string label() const override { return dir_; }
    int64_t vocab() const override { return V_; }
    bool concurrent() const override { return true; }
    uint64_t stream_buffer_bytes() const override {
        // A window file: T-1 F32 rows plus a header (allowance: 1 MiB).
        return readahead_bytes(io_, uint64_t(V_) * 4, uint64_t(T_ - 1) * uint64_t(V_) * 4 + (1 << 20));
    }
    bool hashes_unchecked() const override { return !verify_; }
    std::vector<std::string> warnings() const override { return warn_; }
    json identity() const override {
        json j;
        j["kind"] = "v0-dir";
        j["path"] = dir_;
        j["manifest_sha256"] = manifest_sha_;
        j["manifest_kind"] = m_.value("kind", "");
        j["runtime"] = m_.contains("runtime") ? m_["runtime"] : json(nullptr);
        return j;
    }

    Status check_suite(const Suite& s, const std::vector<int>& pos) override {
        const std::string P = join_path(dir_, "manifest.json");
        const std::string sh = m_["suite_token_hash_sha256"];
        if (sh != s.suite_hash)
            return err(Code::identity, P + ": suite_token_hash_sha256 expected " + s.suite_hash + " (suite), found " + sh);
        if (T_ != s.context_length)
            return err(Code::identity, P + ": context_length expected " + std::to_string(s.context_length) + ", found " +
                                           std::to_string(T_));
        for (int p : pos) {
            const SuiteWindow& w = s.windows[size_t(p)];
            auto it = recs_.find(w.index);
            if (it == recs_.end())
                return err(Code::identity, P + ": window " + std::to_string(w.index) + " is missing");
            if (it->second.token_hash != w.token_hash)
                return err(Code::identity, P + ": window " + std::to_string(w.index) + " token_ids_json_sha256 expected " +
                                               w.token_hash + ", found " + it->second.token_hash);
            if (!file_exists(join_path(dir_, it->second.file)))
                return err(Code::io, join_path(dir_, it->second.file) + ": missing (window " + std::to_string(w.index) + ")");
            if (it->second.file != logits_name(w.index))
                warn_.push_back("window " + std::to_string(w.index) + ": file '" + it->second.file +
                                "' differs from the naming convention '" + logits_name(w.index) + "'");
        }
        return {};
    }

    Status open_window(const Suite& s, int pos, std::unique_ptr<RowStream>* out) override {
        const SuiteWindow& w = s.windows[size_t(pos)];
        const Record& r = recs_.at(w.index);
        StFile f;
        SLUICE_TRY(f.open(join_path(dir_, r.file)));
        const TensorInfo* t = nullptr;
        SLUICE_TRY(check_tensor_file(f, T_ - 1, V_, w.token_hash, &t));
        auto rows = std::make_unique<FileRows>(std::move(f), t, r.sha256, verify_);
        SLUICE_TRY(rows->start(io_));
        *out = std::move(rows);
        return {};
    }

    Status raw_tensor_sha256(const Suite& s, int pos, std::string* hex, uint64_t* bytes_read = nullptr) override {
        const SuiteWindow& w = s.windows[size_t(pos)];
        StFile f;
        SLUICE_TRY(f.open(join_path(dir_, recs_.at(w.index).file)));
        const TensorInfo* t = nullptr;
        SLUICE_TRY(check_tensor_file(f, T_ - 1, V_, w.token_hash, &t));
        Sha256 h;
        std::vector<uint8_t> buf(8 << 20);
        for (uint64_t off = t->begin; off < t->end;) {
            uint64_t n = std::min<uint64_t>(buf.size(), t->end - off);
            SLUICE_TRY(f.pread_data(off, buf.data(), n));
            h.update(buf.data(), n);
            off += n;
        }
        *hex = h.hex();
        if (bytes_read) *bytes_read = t->end - t->begin;
        return {};
    }
};

class EngineRows : public RowStream {
public:
    EngineRows(LogitsEngine* e, const std::vector<int32_t>* toks) : e_(e), toks_(toks) {}
    Status read(int64_t n, float* out) override {
        if (row_ + n > int64_t(toks_->size()) - 1) return err(Code::usage, "engine rows read past the window");
        Status st = e_->eval(toks_->data() + row_, size_t(n), out);
        if (!st.is_ok()) return err(Code::engine, "engine eval failed at row " + std::to_string(row_) + ": " + st.message());
        row_ += n;
        return {};
    }
private:
    LogitsEngine* e_;
    const std::vector<int32_t>* toks_;
    int64_t row_ = 0;
};

class EngineOperand : public Operand {
public:
    LogitsEngine* e_;
    std::string label_;
    std::string kind() const override { return "engine"; }
    std::string label() const override { return label_; }
    int64_t vocab() const override { return e_->n_vocab(); }
    bool concurrent() const override { return false; }
    json identity() const override {
        json j;
        j["kind"] = "engine";
        j["model"] = label_;
        j["runtime"] = e_->identity();
        return j;
    }
    Status check_suite(const Suite&, const std::vector<int>&) override { return {}; }
    Status open_window(const Suite& s, int pos, std::unique_ptr<RowStream>* out) override {
        Status st = e_->reset();
        if (!st.is_ok()) return err(Code::engine, "engine reset failed: " + st.message());
        *out = std::make_unique<EngineRows>(e_, &s.windows[size_t(pos)].tokens);
        return {};
    }
};

}  // namespace

Status open_v0_dir(const std::string& dir, bool verify, std::unique_ptr<Operand>* out) {
    return open_v0_dir(dir, verify, ReadAheadOptions{}, out);
}

Status open_v0_dir(const std::string& dir, bool verify, const ReadAheadOptions& io, std::unique_ptr<Operand>* out) {
    auto o = std::make_unique<V0Dir>();
    o->dir_ = dir;
    o->verify_ = verify;
    o->io_ = io;
    const std::string P = join_path(dir, "manifest.json");
    std::string text;
    SLUICE_TRY(read_file(P, &text));
    o->manifest_sha_ = sha256_hex(text);
    SLUICE_TRY(parse_json(text, P, &o->m_));
    const json& m = o->m_;
    if (!m.is_object()) return err(Code::format, P + ": not a JSON object");
    for (const char* k : {"vocab_size", "context_length"})
        if (!m.contains(k) || !m[k].is_number_integer()) return err(Code::format, P + ": missing integer '" + k + "'");
    if (!m.contains("suite_token_hash_sha256") || !m["suite_token_hash_sha256"].is_string())
        return err(Code::format, P + ": missing string 'suite_token_hash_sha256'");
    if (!m.contains("windows") || !m["windows"].is_array()) return err(Code::format, P + ": missing array 'windows'");
    o->V_ = m["vocab_size"].get<int64_t>();
    o->T_ = m["context_length"].get<int64_t>();
    if (o->V_ < 1 || o->T_ < 2) return err(Code::format, P + ": vocab_size < 1 or context_length < 2");
    for (size_t i = 0; i < m["windows"].size(); ++i) {
        const json& w = m["windows"][i];
        const std::string W = P + ": windows[" + std::to_string(i) + "]";
        if (!w.is_object() || !w.contains("window_index") || !w["window_index"].is_number_integer() ||
            !w.contains("file") || !w["file"].is_string() || !w.contains("token_ids_json_sha256") ||
            !w["token_ids_json_sha256"].is_string() || !w.contains("sha256") || !w["sha256"].is_string())
            return err(Code::format, W + ": needs window_index, file, sha256, token_ids_json_sha256");
        Record r;
        r.window_index = w["window_index"];
        r.file = w["file"];
        r.sha256 = w["sha256"];
        r.token_hash = w["token_ids_json_sha256"];
        r.domain = w.value("domain", "");
        if (w.contains("key") && w["key"] != "logits")
            return err(Code::format, W + ": key '" + w["key"].dump() + "' is not \"logits\"");
        o->recs_[r.window_index] = r;
    }
    *out = std::move(o);
    return {};
}

std::unique_ptr<Operand> engine_operand(LogitsEngine* e, const std::string& label) {
    auto o = std::make_unique<EngineOperand>();
    o->e_ = e;
    o->label_ = label;
    return o;
}

std::string logits_name(int idx) {
    char b[48];
    std::snprintf(b, sizeof b, "logits_%03d.safetensors", idx);
    return b;
}

}  // namespace sluice::kld
