#include "tokenizer/tokenizer.h"

#include "tokenizer/impl.h"
#include "tokenizer/unicode.h"

namespace sluice::tok {
namespace {

// Content-mode encoding of text already known to be valid UTF-8.
void encode_valid(const Tokenizer::Impl &im, std::string_view t, std::vector<Token> &out) {
    if (t.empty()) return;
    thread_local std::vector<Piece> pieces;
    pieces.clear();
    pretokenize(t, im.pattern, pieces);
    const auto *base = reinterpret_cast<const unsigned char *>(t.data());
    for (const Piece &pc : pieces) {
        // tiktoken: a piece that is itself a token is that token, even where
        // merging its bytes would have taken another path.
        Token whole = im.ranks.find(base + pc.begin, pc.size);
        if (whole != kNoRank)
            out.push_back(whole);
        else
            im.ranks.merge(base + pc.begin, pc.size, out);
    }
}

// Valid input is used in place; invalid input is replaced into `buf`.
std::string_view as_valid(std::string_view text, std::string &buf) {
    if (is_valid_utf8(text)) return text;
    buf = sanitize_utf8(text);
    return buf;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer &&) noexcept = default;
Tokenizer &Tokenizer::operator=(Tokenizer &&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<Token> Tokenizer::encode(std::string_view text) const {
    std::vector<Token> out;
    out.reserve(text.size() / 3 + 4);
    encode(text, out);
    return out;
}

void Tokenizer::encode(std::string_view text, std::vector<Token> &out) const {
    std::string buf;
    encode_valid(*impl_, as_valid(text, buf), out);
}

std::vector<Token> Tokenizer::encode_markup(std::string_view text) const {
    std::vector<Token> out;
    encode_markup(text, out);
    return out;
}

void Tokenizer::encode_markup(std::string_view text, std::vector<Token> &out) const {
    std::string buf;
    std::string_view t = as_valid(text, buf);
    const Impl &im = *impl_;
    size_t seg = 0, i = 0;
    while (i < t.size()) {
        const auto &cands = im.by_first_byte[static_cast<unsigned char>(t[i])];
        const Special *hit = nullptr;
        for (size_t idx : cands) {  // longest first
            if (t.compare(i, im.specials[idx].text.size(), im.specials[idx].text) == 0) {
                hit = &im.specials[idx];
                break;
            }
        }
        if (!hit) {
            ++i;
            continue;
        }
        encode_valid(im, t.substr(seg, i - seg), out);
        out.push_back(hit->id);
        i += hit->text.size();
        seg = i;
    }
    encode_valid(im, t.substr(seg), out);
}

Result<std::string> Tokenizer::decode(std::span<const Token> ids, bool skip_specials) const {
    std::string out;
    for (Token id : ids) {
        auto sp = impl_->special_by_id.find(id);
        if (sp != impl_->special_by_id.end()) {  // specials first (FORMAT.md §7.2)
            if (!skip_specials) out += impl_->specials[sp->second].text;
            continue;
        }
        std::string_view bytes = impl_->ranks.bytes_of(id);
        if (bytes.empty())
            return Status(SLUICE_E_RANGE, "token id " + std::to_string(id) + " is neither a rank (0.." +
                                              std::to_string(impl_->n_ranks - 1) + ") nor a special token");
        out += bytes;
    }
    return out;
}

std::optional<std::string_view> Tokenizer::token_to_piece(Token id) const {
    auto sp = impl_->special_by_id.find(id);
    if (sp != impl_->special_by_id.end()) return std::string_view(impl_->specials[sp->second].text);
    std::string_view bytes = impl_->ranks.bytes_of(id);
    if (bytes.empty()) return std::nullopt;
    return bytes;
}

std::vector<std::string> Tokenizer::split(std::string_view text) const {
    std::string buf;
    std::string_view t = as_valid(text, buf);
    std::vector<Piece> pieces;
    pretokenize(t, impl_->pattern, pieces);
    std::vector<std::string> out;
    out.reserve(pieces.size());
    for (const Piece &p : pieces) out.emplace_back(t.substr(p.begin, p.size));
    return out;
}

Pattern Tokenizer::pattern() const { return impl_->pattern; }
size_t Tokenizer::n_ranks() const { return impl_->n_ranks; }
Token Tokenizer::n_vocab() const { return impl_->n_vocab; }
Token Tokenizer::bos() const { return impl_->bos; }
Token Tokenizer::eos() const { return impl_->eos; }
size_t Tokenizer::max_token_bytes() const { return impl_->max_token_bytes; }
bool Tokenizer::is_special(Token id) const { return impl_->special_by_id.count(id) != 0; }
const std::vector<Special> &Tokenizer::specials() const { return impl_->specials; }

std::optional<Token> Tokenizer::special_id(std::string_view text) const {
    auto it = impl_->special_by_text.find(std::string(text));
    if (it == impl_->special_by_text.end()) return std::nullopt;
    return it->second;
}

StreamDecoder::StreamDecoder(const Tokenizer &tok, bool replace_invalid, bool skip_specials)
    : tok_(&tok), replace_(replace_invalid), skip_specials_(skip_specials) {}

Status StreamDecoder::push(Token id, std::string &out) {
    auto piece = tok_->token_to_piece(id);
    if (!piece) return Status(SLUICE_E_RANGE, "token id " + std::to_string(id) + " has no text");
    if (skip_specials_ && tok_->is_special(id)) return Status::ok();
    pending_ += *piece;
    // Hold back only a sequence that the next bytes can still complete; an
    // ill-formed one can never become valid, so it goes out now.
    size_t emit = pending_.size() - incomplete_utf8_tail(pending_);
    if (emit == 0) return Status::ok();
    if (replace_)
        out += sanitize_utf8(std::string_view(pending_).substr(0, emit));
    else
        out.append(pending_, 0, emit);
    pending_.erase(0, emit);
    return Status::ok();
}

void StreamDecoder::finish(std::string &out) {
    if (pending_.empty()) return;
    out += replace_ ? sanitize_utf8(pending_) : pending_;
    pending_.clear();
}

}  // namespace sluice::tok
