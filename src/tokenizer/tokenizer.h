// sluice's tokenizer: tiktoken-compatible byte-level BPE over a WASTE
// container's tokenizer.model (FORMAT.md §7.1) and specials.json (§7.2).
//
// Two encoding modes form a security boundary (TOKENIZER.md §4):
//  - encode(): content. Every byte is ordinary text; no input can produce a
//    special (control) id.
//  - encode_markup(): template structure. Special strings become their ids
//    (earliest occurrence first, longest at equal positions); the text
//    between them is encoded as content.
//
// Invalid UTF-8: tiktoken only accepts strings, so the bytes a caller hands
// it have already been decoded, and every binding (Python's
// errors="replace", JavaScript's TextDecoder) turns each ill-formed
// subsequence into U+FFFD by the Unicode "maximal subpart" rule. sluice
// does the same before pre-tokenizing, so it produces exactly the ids
// tiktoken produces for the decoded string; the invalid bytes are not
// preserved (decode(encode(x)) == x holds for valid UTF-8 only).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/result.h"

namespace sluice::tok {

struct Special {
    Token id;
    std::string text;
};

struct LoadOptions {
    Pattern pattern = Pattern::kimi;
    // config.eos_token_id: when > 0 it replaces the default EOS (n_ranks + 2).
    Token eos_override = 0;
};

class Tokenizer {
public:
    // model_path: a container directory (tokenizer.model, else tiktoken.model)
    // or a rank file. specials_path: specials.json, or a Hugging Face
    // tokenizer_config.json (its added_tokens_decoder); empty means: for a
    // directory, its specials.json, else its tokenizer_config.json, if any;
    // for a file, none. Errors name the file, the line and what is wrong.
    static Result<Tokenizer> load(const std::string &model_path, const std::string &specials_path = {},
                                  LoadOptions opts = {});
    // The same from text already in memory; `name` is used in errors.
    // specials_json may be empty (no specials).
    static Result<Tokenizer> from_text(std::string_view rank_text, std::string_view specials_json,
                                       LoadOptions opts = {}, std::string_view name = "<memory>");

    Tokenizer(Tokenizer &&) noexcept;
    Tokenizer &operator=(Tokenizer &&) noexcept;
    ~Tokenizer();

    // Content mode: never yields a special id.
    std::vector<Token> encode(std::string_view text) const;
    void encode(std::string_view text, std::vector<Token> &out) const;  // appends
    // Markup mode: special strings become their ids.
    std::vector<Token> encode_markup(std::string_view text) const;
    void encode_markup(std::string_view text, std::vector<Token> &out) const;  // appends

    // The bytes of the ids, specials included unless skip_specials.
    // An id that is neither a rank nor a special is an SLUICE_E_RANGE error.
    Result<std::string> decode(std::span<const Token> ids, bool skip_specials = false) const;
    // Raw bytes of one id (a special's text for a special), if it has any.
    std::optional<std::string_view> token_to_piece(Token id) const;

    // The pre-tokenizer's pieces of `text` (after U+FFFD substitution).
    std::vector<std::string> split(std::string_view text) const;

    Pattern pattern() const;
    size_t n_ranks() const;  // lines in the rank file
    Token n_vocab() const;   // 1 + the largest id (rank or special)
    Token bos() const;       // n_ranks (FORMAT.md §7.2)
    Token eos() const;       // eos_override if > 0, else n_ranks + 2
    bool is_special(Token id) const;
    size_t max_token_bytes() const;  // longest piece, rank or special
    std::optional<Token> special_id(std::string_view text) const;
    const std::vector<Special> &specials() const;  // sorted by id

    struct Impl;  // opaque; defined in impl.h for the library's own files

private:
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Turns a stream of ids into text without ever splitting a UTF-8 sequence:
// bytes that end in an incomplete (but still completable) sequence are held
// back until the next id completes it, or until finish(). Concatenating all
// output equals decode(ids) (raw mode) or sanitize_utf8(decode(ids))
// (replace_invalid mode, whose output is always valid UTF-8).
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer &tok, bool replace_invalid = false, bool skip_specials = false);
    // Appends to `out` whatever text became complete. Unknown id: error,
    // nothing consumed.
    Status push(Token id, std::string &out);
    // Appends the held-back bytes (one U+FFFD in replace_invalid mode).
    void finish(std::string &out);
    void reset() { pending_.clear(); }
    // Upper bound of the bytes one push() or finish() appends, for callers
    // with fixed buffers: every held or new byte may become a 3-byte U+FFFD.
    size_t max_output_per_push() const { return 3 * (tok_->max_token_bytes() + 3); }
    size_t pending_bytes() const { return pending_.size(); }

private:
    const Tokenizer *tok_;
    bool replace_;
    bool skip_specials_;
    std::string pending_;
};

}  // namespace sluice::tok
