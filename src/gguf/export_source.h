// What a family's GGUF mapping (export_families.cpp) draws on: the opened
// container's trunk tensors by their Hugging Face names, its expert banks,
// and the writer. Tensors are added as row sources, read from disk only
// when the file is written, so exporting holds one slab of rows at a time
// (small tensors that need a transform are loaded whole).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "format/container.h"
#include "format/expert_record.h"
#include "gguf/export_gguf.h"
#include "gguf/gguf_writer.h"

namespace sluice::gguf {

class ExportSource {
public:
    ExportSource(const Container &c, const ExportOptions &o, Writer *w, ExportReport *r) : c_(c), o_(o), w_(w), r_(r) {}
    const Container &container() const { return c_; }
    const ModelConfig &cfg() const { return c_.config(); }
    Writer &writer() { return *w_; }
    void note(const std::string &line) { r_->notes.push_back(line); }
    // general.architecture, and the prefix of the arch's own keys.
    void set_arch(const std::string &arch) {
        r_->arch = arch;
        w_->set_str("general.architecture", arch);
    }

    // The trunk entry of a tensor (name without the container's prefix).
    const TrunkEntry *find(const std::string &hf) const { return c_.find(hf); }
    bool has(const std::string &hf) const { return find(hf) != nullptr; }
    // The entry, or an error naming the container and the tensor the mapping needs.
    Status need(const std::string &hf, const TrunkEntry **out) const;

    // A trunk matrix [rows, cols] as GGUF {cols, rows} in the trunk type
    // (f32 when its rows do not fit the type, noted); 1-D tensors and
    // anything llama.cpp reads as a vector go through vector() in f32.
    Status matrix(const std::string &hf, const std::string &gguf);
    // Any trunk tensor in f32, its values in stored order, under GGUF dims
    // `dims` (ne0 first; the element count must match).
    Status as_f32(const std::string &hf, const std::string &gguf, std::vector<int64_t> dims);
    // The whole tensor in f32 (stored order) for a transform.
    Status load(const std::string &hf, std::vector<float> *values, std::vector<int64_t> *shape = nullptr) const;
    // A tensor from values in memory (f32 unless type says otherwise).
    Status add(const std::string &gguf, std::vector<int64_t> dims, std::vector<float> values,
               TensorType type = TensorType::F32);
    // The routed experts of one MoE layer, one matrix, stacked as llama.cpp
    // wants them: {cols, rows, n_experts}, expert e's block contiguous.
    Status experts(int layer, ExpertMatrix m, const std::string &gguf);

private:
    const Container &c_;
    const ExportOptions &o_;
    Writer *w_;
    ExportReport *r_;
};

// Family mappings (export_families.cpp): metadata and tensors for one arch.
Status export_kimi_linear(ExportSource &s);
Status export_deepseek(ExportSource &s);
Status export_k3(ExportSource &s);
// The container's tokenizer as llama.cpp's gpt2 BPE with the kimi-k2 pre-tokenizer.
Status export_tokenizer(ExportSource &s);

}  // namespace sluice::gguf
