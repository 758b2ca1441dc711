// The container's tokenizer as llama.cpp's byte-level BPE ("gpt2" model,
// "kimi-k2" pre-tokenizer): every rank's bytes through GPT-2's byte-to-
// unicode map, the specials as control tokens, and the merges recomputed
// from the ranks (a tiktoken file stores none: the merge that makes a token
// is the last step of BPE on its own bytes with only lower ranks allowed).
// llama.cpp then tokenizes text as sluice does (checked by
// tests/llamacpp/tokenize_check.py) and its tools run on text.
#include <map>

#include "common/checked_file.h"
#include "convert/byte_level.h"
#include "gguf/export_source.h"
#include "tokenizer/tokenizer.h"

namespace sluice::gguf {

Status export_tokenizer(ExportSource &s) {
    const std::string dir = s.container().dir();
    auto loaded = tok::Tokenizer::load(dir);
    if (!loaded.ok()) return loaded.status();
    const tok::Tokenizer &t = loaded.value();
    if (t.pattern() != tok::Pattern::kimi)
        return unsupported(dir + ": tokenizer pattern " + tok::pattern_name(t.pattern()) +
                           " has no llama.cpp pre-tokenizer mapped (kimi does)");
    const int64_t V = s.cfg().vocab;
    if ((int64_t)t.n_vocab() > V)
        return format_error(dir + ": the tokenizer has " + std::to_string(t.n_vocab()) + " ids, the model's vocabulary " +
                            std::to_string(V));
    std::map<std::string, int64_t, std::less<>> rank;  // bytes -> rank
    const int64_t n_ranks = (int64_t)t.n_ranks();
    for (int64_t r = 0; r < n_ranks; r++)
        if (auto p = t.token_to_piece((tok::Token)r)) rank.emplace(std::string(*p), r);
    std::vector<std::string> tokens((size_t)V);
    std::vector<int32_t> types((size_t)V, 5);  // unused, until a rank or special claims the id
    std::vector<std::string> merges;
    for (int64_t id = 0; id < V; id++) {
        auto piece = id < (int64_t)t.n_vocab() ? t.token_to_piece((tok::Token)id) : std::nullopt;
        if (piece && t.is_special((tok::Token)id)) {
            tokens[(size_t)id] = std::string(*piece);
            types[(size_t)id] = 3;  // control
        } else if (piece && id < n_ranks) {
            tokens[(size_t)id] = convert::bytes_to_byte_level(*piece);
            types[(size_t)id] = 1;  // normal
        } else {
            tokens[(size_t)id] = "[PAD" + std::to_string(id) + "]";
        }
    }
    for (int64_t r = 0; r < n_ranks; r++) {
        auto p = t.token_to_piece((tok::Token)r);
        if (!p || p->size() < 2) continue;
        // BPE on the token's own bytes with ranks below r: the last merge
        // leaves the two parts whose merge has rank r.
        std::vector<std::string> parts;
        for (char c : *p) parts.emplace_back(1, c);
        while (parts.size() > 2) {
            int64_t best = -1;
            size_t at = 0;
            for (size_t i = 0; i + 1 < parts.size(); i++) {
                auto it = rank.find(parts[i] + parts[i + 1]);
                if (it != rank.end() && it->second < r && (best < 0 || it->second < best)) {
                    best = it->second;
                    at = i;
                }
            }
            if (best < 0) break;
            parts[at] += parts[at + 1];
            parts.erase(parts.begin() + (long)at + 1);
        }
        if (parts.size() != 2) {
            s.note("tokenizer: rank " + std::to_string(r) + " is not reachable by merges of lower ranks; left out");
            continue;
        }
        merges.push_back(convert::bytes_to_byte_level(parts[0]) + " " + convert::bytes_to_byte_level(parts[1]));
    }
    Writer &w = s.writer();
    w.set_str("tokenizer.ggml.model", "gpt2");
    w.set_str("tokenizer.ggml.pre", "kimi-k2");
    w.set_arr_str("tokenizer.ggml.tokens", std::move(tokens));
    w.set_arr_i32("tokenizer.ggml.token_type", types);
    w.set_arr_str("tokenizer.ggml.merges", std::move(merges));
    w.set_u32("tokenizer.ggml.bos_token_id", (uint32_t)t.bos());
    w.set_u32("tokenizer.ggml.eos_token_id", (uint32_t)t.eos());
    // sluice starts every sequence it scores with BOS (perplexity windows):
    // llama.cpp's tools add it when the vocabulary asks for it.
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    std::string tmpl;
    if (read_input_file(dir + "/chat_template.jinja", 1 << 20, &tmpl).is_ok())
        w.set_str("tokenizer.chat_template", tmpl);
    return Status::ok();
}

}  // namespace sluice::gguf
