#include "gguf/export_gguf.h"

#include <algorithm>
#include <memory>

#include "gguf/export_source.h"

namespace sluice::gguf {

Status ExportSource::need(const std::string &hf, const TrunkEntry **out) const {
    *out = find(hf);
    if (!*out) return format_error(c_.dir() + ": trunk tensor " + hf + " is missing (the GGUF mapping needs it)");
    return Status::ok();
}

namespace {

// Rows [r0, r0 + n) of a trunk entry viewed as [rows, cols] (cols = last axis).
RowSource trunk_rows(const Container &c, const TrunkEntry &e) {
    return [&c, &e](int64_t r0, int64_t n, float *out) -> Status {
        QTensor desc;
        SLUICE_TRY(c.describe_entry(e, nullptr, &desc));
        return c.read_rows_f32(e, desc, r0, r0 + n, out);
    };
}

int64_t numel(const std::vector<int64_t> &d) {
    int64_t n = 1;
    for (int64_t x : d) n *= x;
    return n;
}

}  // namespace

Status ExportSource::matrix(const std::string &hf, const std::string &gguf) {
    const TrunkEntry *e = nullptr;
    SLUICE_TRY(need(hf, &e));
    if (e->shape.size() != 2)
        return format_error(c_.dir() + ": trunk tensor " + hf + " has " + std::to_string(e->shape.size()) +
                            " dims; the GGUF mapping reads it as a matrix");
    TensorType t = o_.trunk;
    if (row_bytes(t, e->shape[1]) == 0) {
        note(gguf + ": rows of " + std::to_string(e->shape[1]) + " do not fit " + type_name(t) + "; written as f32");
        t = TensorType::F32;
    }
    return w_->add_tensor(gguf, {e->shape[1], e->shape[0]}, t, trunk_rows(c_, *e));
}

Status ExportSource::as_f32(const std::string &hf, const std::string &gguf, std::vector<int64_t> dims) {
    const TrunkEntry *e = nullptr;
    SLUICE_TRY(need(hf, &e));
    if (numel(dims) != numel(e->shape))
        return format_error(c_.dir() + ": trunk tensor " + hf + " has " + std::to_string(numel(e->shape)) +
                            " values; its GGUF tensor " + gguf + " needs " + std::to_string(numel(dims)));
    // The stored rows are the GGUF rows only when the last axis is ne0.
    if (e->shape.back() != dims[0]) {
        std::vector<float> v;
        SLUICE_TRY(load(hf, &v));
        return add(gguf, std::move(dims), std::move(v));
    }
    return w_->add_tensor(gguf, std::move(dims), TensorType::F32, trunk_rows(c_, *e));
}

Status ExportSource::load(const std::string &hf, std::vector<float> *values, std::vector<int64_t> *shape_out) const {
    const TrunkEntry *e = nullptr;
    SLUICE_TRY(need(hf, &e));
    QTensor desc;
    SLUICE_TRY(c_.describe_entry(*e, nullptr, &desc));
    values->assign((size_t)(desc.rows * desc.cols), 0.0f);
    SLUICE_TRY(c_.read_rows_f32(*e, desc, 0, desc.rows, values->data()));
    if (shape_out) *shape_out = e->shape;
    return Status::ok();
}

Status ExportSource::add(const std::string &gguf, std::vector<int64_t> dims, std::vector<float> values,
                         TensorType type) {
    if ((int64_t)values.size() != numel(dims))
        return format_error(gguf + ": " + std::to_string(values.size()) + " values for " + std::to_string(numel(dims)) +
                            " elements");
    auto v = std::make_shared<std::vector<float>>(std::move(values));
    const int64_t ne0 = dims[0];
    return w_->add_tensor(gguf, std::move(dims), type, [v, ne0](int64_t r0, int64_t n, float *out) {
        std::copy(v->begin() + r0 * ne0, v->begin() + (r0 + n) * ne0, out);
        return Status::ok();
    });
}

Status ExportSource::experts(int layer, ExpertMatrix m, const std::string &gguf) {
    const Manifest &man = c_.manifest();
    auto it = man.banks.find(layer);
    if (it == man.banks.end()) return format_error(c_.dir() + ": no expert bank for layer " + std::to_string(layer));
    const BankEntry &b = it->second;
    const ModelConfig &cfg = c_.config();
    if (b.experts <= 0 || b.bytes <= 0 || b.bytes % b.experts)
        return format_error(c_.dir() + ": the bank of layer " + std::to_string(layer) + " has a bad index");
    auto g = std::make_shared<ExpertGeom>();
    SLUICE_TRY(g->init(cfg.moe_inter, cfg.expert_in(), man.eq.stages, man.eq.entries, man.eq.index_bits,
                       b.bytes / b.experts));
    const int64_t rows = m == ExpertMatrix::down ? g->n_in : g->I;
    const int64_t cols = m == ExpertMatrix::down ? g->I : g->n_in;
    const int64_t n_exp = b.experts;
    const int64_t base = b.codebook_base;
    const Container &c = c_;
    // The record last read, kept across slabs: a slab boundary may fall inside an expert.
    struct Held {
        int64_t e = -1;
        std::vector<uint8_t> rec;
        ExpertView view;
    };
    auto held = std::make_shared<Held>();
    RowSource src = [&c, g, held, layer, m, rows, cols, base](int64_t r0, int64_t n, float *out) -> Status {
        for (int64_t k = 0; k < n;) {
            const int64_t R = r0 + k, e = R / rows, r = R % rows;
            if (held->e != e) {
                held->rec.resize((size_t)g->stride);
                const File &f = c.bank_file(layer);
                SLUICE_TRY(f.pread_all(held->rec.data(), held->rec.size(), (uint64_t)(e * g->stride)));
                SLUICE_TRY(check_expert_record(held->rec.data(), *g, layer, (int)e, base, c.n_books(), true, f.path(),
                                               &held->view));
                held->e = e;
            }
            const int64_t take = std::min(n - k, rows - r);
            expert_dense_rows(held->view, *g, m, c.book(0), c.book_entries(), r, take, out + k * cols);
            k += take;
        }
        return Status::ok();
    };
    return w_->add_tensor(gguf, {cols, rows, n_exp}, o_.experts, std::move(src));
}

Status export_gguf(const ExportOptions &o, ExportReport *report,
                   const std::function<void(uint64_t, uint64_t)> &progress) {
    Container c;
    SLUICE_TRY(c.open(o.container));
    Writer w;
    ExportReport r;
    ExportSource s(c, o, &w, &r);
    if (c.manifest().eq.index_bits == 6)
        r.notes.push_back("VQ4P experts: sluice multiplies them through an int8 table of the input; the GGUF holds "
                          "the exact dense weights, so expect differences near 1e-2 from that rounding");
    if (o.experts == TensorType::Q8_0 || o.experts == TensorType::Q4_0)
        r.notes.push_back(std::string("experts rebuilt from their VQ codes and requantized to ") + type_name(o.experts) +
                          ": llama.cpp runs an approximation of the container's weights (f32 or f16 keep them)");
    // The family, as the converter records it: config.json's model_type
    // (the manifest's arch string is free text: warp writes deepseek_v3,
    // kimi-k3, kimi-linear).
    const std::string &mt = c.config().model_type;
    if (mt == "kimi_linear") {
        SLUICE_TRY(export_kimi_linear(s));
    } else if (mt == "deepseek_v3" || mt == "kimi_k2") {
        SLUICE_TRY(export_deepseek(s));
    } else if (mt == "kimi_k3") {
        SLUICE_TRY(export_k3(s));
    } else {
        return unsupported(o.container + ": model_type '" + mt +
                           "' has no GGUF mapping (kimi_linear, deepseek_v3, kimi_k2 and kimi_k3 do)");
    }
    r.tensors = w.tensor_count();
    r.bytes = w.file_bytes();
    SLUICE_TRY(w.write(o.out, progress));
    *report = std::move(r);
    return Status::ok();
}

}  // namespace sluice::gguf
