// Internal: the state behind a Tokenizer, shared by load.cpp and
// tokenizer.cpp. Not part of the library's interface.
#pragma once
#include <array>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace sluice::tok {

struct Tokenizer::Impl {
    Pattern pattern = Pattern::kimi;
    RankTable ranks;
    size_t n_ranks = 0;
    Token n_vocab = 0;
    Token bos = 0;
    Token eos = 0;
    size_t max_token_bytes = 0;
    std::vector<Special> specials;                        // sorted by id
    std::unordered_map<Token, size_t> special_by_id;      // -> index in specials
    std::unordered_map<std::string, Token> special_by_text;
    // Markup matching: for each first byte, the specials starting with it,
    // longest first, so the first hit at a position is the longest match.
    std::array<std::vector<size_t>, 256> by_first_byte;

    void index_specials();
    // Builds the tables and the BOS/EOS defaults; can call the private ctor.
    static Result<Tokenizer> make(std::vector<std::pair<std::string, Token>> entries,
                                  std::vector<Special> specials, LoadOptions opts);
};

// Parsers, in load.cpp. `name` is the file name used in messages.
Status parse_rank_file(std::string_view text, std::string_view name,
                       std::vector<std::pair<std::string, Token>> &out);
Status parse_specials_json(std::string_view text, std::string_view name, std::vector<Special> &out);
Status parse_tokenizer_config(std::string_view text, std::string_view name, std::vector<Special> &out);

}  // namespace sluice::tok
