// A GGUF file (llama.cpp's model format) as the converter's source: its
// tensors presented under the Hugging Face names the converter expects, each
// rebuilt in memory by the inverse of `sluice export-gguf`'s mapping
// (src/gguf/export_families.cpp is the forward reference), and the
// config.json the release would hold, synthesized from the GGUF metadata.
//
// Architectures: kimi-linear, kimi-k3, deepseek2 (general.architecture).
// Tensor types: what format/gguf_reader.h reads (F32, F16, BF16, Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, MXFP4, Q2_K to Q6_K);
// any other type of a tensor the mapping uses is refused at open, naming
// the tensor and the type. Every key and tensor the mapping needs is checked
// at open (presence, integer range, shape against the config), so a read
// later can only fail on I/O or a non-finite value.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/gguf_reader.h"

namespace sluice::convert {

// True when `path` is a regular file whose first 4 bytes are "GGUF".
bool is_gguf_file(const std::string& path);

class GgufSource {
public:
    // Opens and maps the whole file; false with *err naming the file and the
    // key, tensor or type at fault.
    bool open(const std::string& path, std::string* err);

    const std::string& path() const { return rd_.path(); }
    const std::string& arch() const { return arch_; }  // general.architecture
    // config.json as a Hugging Face release of this model would hold it.
    const nlohmann::ordered_json& config() const { return config_; }
    // What the mapping could not carry over, one line each (for the CLI).
    const std::vector<std::string>& notes() const { return notes_; }

    // Provenance: file size, SHA-256 of the header (metadata and tensor
    // index, [0, data start)), and the ggml type mix of the stored tensors.
    uint64_t file_size() const { return rd_.file_size(); }
    const std::string& header_sha256() const { return header_sha256_; }
    struct TypeMix {
        uint64_t tensors = 0, bytes = 0;
    };
    const std::map<std::string, TypeMix>& type_mix() const { return type_mix_; }

    // The tokenizer as a container's side files (FORMAT.md §7): a tiktoken
    // rank file (ranks = the ids of the normal tokens, which must come first
    // and in order), specials.json (control and user-defined tokens) and the
    // chat template. False with *why when the GGUF's tokenizer is not one
    // sluice runs (only llama.cpp's byte-level BPE with the kimi-k2
    // pre-tokenizer is), or is malformed: the conversion goes on without it.
    bool tokenizer_files(std::string* rank_text, std::string* specials_json, std::string* chat_template,
                         std::string* why) const;

    // Hugging Face names, ascending byte order.
    std::vector<std::string> names() const;
    bool has(const std::string& hf) const { return map_.count(hf) != 0; }
    // The HF (PyTorch, outermost first) shape, or false naming the tensor.
    bool shape(const std::string& hf, std::vector<int64_t>* out, std::string* err) const;
    // Rows [r0, r1) of the HF tensor viewed as [R, N] (N = last dim). Thread-safe.
    bool read_rows_f32(const std::string& hf, int64_t r0, int64_t r1, float* dst, std::string* err) const;

    // How an HF tensor is made from the file (public for the tests' sake).
    enum class Kind {
        rows,     // rows [row0, row0 + R) of GGUF tensor `a`, same bytes (matrices, vectors, conv, expert slices)
        kv_b,     // MLA kv_b_proj from attn_k_b (a) and attn_v_b (b), per head [k_b^T; v_b]
        a_log,    // A_log = log(-ssm_a) (a)
        ones,     // a vector of ones (the AttnRes norms: the GGUF holds norm ⊙ proj)
    };
    struct Entry {
        Kind kind = Kind::rows;
        const gguf::TensorInfo* a = nullptr;
        const gguf::TensorInfo* b = nullptr;
        int64_t row0 = 0;
        std::vector<int64_t> shape;  // HF shape
        int64_t heads = 0, dn = 0, dv = 0, rank = 0;  // kv_b
    };

private:
    bool build(std::string* err);
    bool add(const std::string& hf, Entry e, std::string* err);

    gguf::Reader rd_;
    std::string arch_;
    nlohmann::ordered_json config_;
    std::vector<std::string> notes_;
    std::string header_sha256_;
    std::map<std::string, TypeMix> type_mix_;
    std::map<std::string, Entry> map_;
};

}  // namespace sluice::convert
