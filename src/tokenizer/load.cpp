// Loading: the rank file (FORMAT.md §7.1), specials.json (§7.2) and, for
// Hugging Face sources, tokenizer_config.json's added_tokens_decoder.
//
// The loader is stricter than warp's (which skips lines without a space and
// reads ranks with atoi): a damaged file is refused with the file, the line
// and what is wrong, instead of silently producing a different vocabulary.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "common/checked_file.h"
#include "tokenizer/impl.h"

namespace sluice::tok {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A container's side files: a FIFO or device in their place must not hang
// the open (common/checked_file.h); 256 MiB is far above any tokenizer.
Status read_file(const std::string &path, std::string &out) { return read_input_file(path, 256u << 20, &out); }

std::string printable(std::string_view s, size_t max = 40) {
    std::string r;
    for (unsigned char c : s.substr(0, max)) {
        if (c >= 0x20 && c < 0x7F) {
            r.push_back(static_cast<char>(c));
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", c);
            r += buf;
        }
    }
    if (s.size() > max) r += "...";
    return r;
}

int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

// Standard padded base64, as tiktoken's files are written. Returns an empty
// string on success, else what is wrong.
std::string b64_decode(std::string_view s, std::string &out) {
    out.clear();
    if (s.empty()) return "the base64 token is empty";
    if (s.size() % 4 != 0)
        return "bad base64 '" + printable(s) + "': length " + std::to_string(s.size()) + " is not a multiple of 4";
    size_t pad = 0;
    while (pad < 2 && pad < s.size() && s[s.size() - 1 - pad] == '=') ++pad;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < s.size() - pad; ++i) {
        int v = b64_value(static_cast<unsigned char>(s[i]));
        if (v < 0)
            return "bad base64 '" + printable(s) + "': character '" + printable(s.substr(i, 1)) + "' at column " +
                   std::to_string(i + 1) + " is not in the base64 alphabet";
        acc = (acc << 6) | static_cast<uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((acc >> bits) & 0xFF));
        }
    }
    if (out.empty()) return "bad base64 '" + printable(s) + "': it decodes to no bytes";
    return {};
}

std::string b64_encode(std::string_view s) {
    static const char *A = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < s.size(); i += 3) {
        uint32_t v = uint32_t(uint8_t(s[i])) << 16 | uint32_t(uint8_t(s[i + 1])) << 8 | uint8_t(s[i + 2]);
        for (int k = 18; k >= 0; k -= 6) out.push_back(A[(v >> k) & 63]);
    }
    if (i < s.size()) {
        uint32_t v = uint32_t(uint8_t(s[i])) << 16 | (i + 1 < s.size() ? uint32_t(uint8_t(s[i + 1])) << 8 : 0);
        out.push_back(A[v >> 18]);
        out.push_back(A[(v >> 12) & 63]);
        out.push_back(i + 1 < s.size() ? A[(v >> 6) & 63] : '=');
        out.push_back('=');
    }
    return out;
}

// Decimal rank that fits an id (no sign, no spaces).
bool parse_rank(std::string_view s, Token &rank) {
    if (s.empty() || s.size() > 10) return false;
    int64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + (c - '0');
    }
    if (v >= kNoRank) return false;
    rank = static_cast<Token>(v);
    return true;
}

Status check_specials(std::vector<Special> &specials, std::string_view name) {
    std::sort(specials.begin(), specials.end(), [](const Special &a, const Special &b) { return a.id < b.id; });
    std::unordered_map<std::string, Token> texts;
    for (size_t i = 0; i < specials.size(); ++i) {
        if (i > 0 && specials[i].id == specials[i - 1].id)
            return format_error(std::string(name) + ": special id " + std::to_string(specials[i].id) +
                                " is given twice");
        auto [it, fresh] = texts.emplace(specials[i].text, specials[i].id);
        if (!fresh)
            return format_error(std::string(name) + ": special text '" + printable(specials[i].text) +
                                "' is given for ids " + std::to_string(it->second) + " and " +
                                std::to_string(specials[i].id));
    }
    return Status::ok();
}

Status parse_json(std::string_view text, std::string_view name, json &j) {
    try {
        j = json::parse(text);
    } catch (const json::exception &e) {  // parse_error, and out_of_range for a number past double (fuzz_tokenizer)
        return format_error(std::string(name) + ": not valid JSON: " + e.what());
    }
    return Status::ok();
}

}  // namespace

Status parse_rank_file(std::string_view text, std::string_view name,
                       std::vector<std::pair<std::string, Token>> &out) {
    out.clear();
    out.reserve(text.size() / 12);
    std::vector<size_t> line_of_entry;
    line_of_entry.reserve(text.size() / 12);
    size_t line_no = 0, pos = 0;
    std::string bytes;
    auto where = [&](size_t line) { return std::string(name) + ":" + std::to_string(line) + ": "; };
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        pos = nl == std::string_view::npos ? text.size() : nl + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) continue;  // a trailing blank line is harmless
        size_t sp = line.find(' ');
        if (sp == std::string_view::npos)
            return format_error(where(line_no) + "missing the space between the base64 token and the rank in '" +
                                printable(line) + "'");
        std::string why = b64_decode(line.substr(0, sp), bytes);
        if (!why.empty()) return format_error(where(line_no) + why);
        Token rank;
        std::string_view rank_text = line.substr(sp + 1);
        if (!parse_rank(rank_text, rank))
            return format_error(where(line_no) + "rank '" + printable(rank_text) +
                                "' is not a decimal number below 2147483647");
        out.emplace_back(bytes, rank);
        line_of_entry.push_back(line_no);
    }
    if (out.empty()) return format_error(std::string(name) + ": the rank file holds no tokens");
    // Rank = id and the vocabulary size is the line count, so ranks must be
    // exactly 0..n-1 (FORMAT.md §7.1); a gap would shift every special id.
    std::vector<size_t> line_of_rank(out.size(), 0);
    for (size_t i = 0; i < out.size(); ++i) {
        size_t r = static_cast<size_t>(out[i].second);
        if (r >= out.size() || line_of_rank[r] != 0) {
            // Report the first offending line in file order.
            for (size_t k = 0; k < out.size(); ++k) {
                size_t rk = static_cast<size_t>(out[k].second);
                if (rk >= out.size())
                    return format_error(where(line_of_entry[k]) + "rank " + std::to_string(rk) +
                                        " leaves a gap: the file has " + std::to_string(out.size()) +
                                        " tokens, so ranks must be 0.." + std::to_string(out.size() - 1));
            }
            return format_error(where(line_of_entry[i]) + "duplicate rank " + std::to_string(r) +
                                " (first on line " + std::to_string(line_of_rank[r]) + ")");
        }
        line_of_rank[r] = line_of_entry[i];
    }
    // Duplicate byte strings: sort indices by bytes (cheaper than a map of
    // 200k strings) and compare neighbours.
    std::vector<uint32_t> order(out.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
        return out[a].first != out[b].first ? out[a].first < out[b].first : a < b;
    });
    for (size_t k = 1; k < order.size(); ++k)
        if (out[order[k]].first == out[order[k - 1]].first) {
            size_t first = order[k - 1], dup = order[k];
            return format_error(where(line_of_entry[dup]) + "duplicate token '" + b64_encode(out[dup].first) +
                                "' (rank " + std::to_string(out[first].second) + " on line " +
                                std::to_string(line_of_entry[first]) + ")");
        }
    bool has_byte[256] = {};
    for (auto &e : out)
        if (e.first.size() == 1) has_byte[static_cast<unsigned char>(e.first[0])] = true;
    for (int c = 0; c < 256; ++c)
        if (!has_byte[c]) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02X", c);
            return format_error(std::string(name) + ": no token for the single byte " + hex +
                                "; byte-level BPE needs all 256");
        }
    return Status::ok();
}

Status parse_specials_json(std::string_view text, std::string_view name, std::vector<Special> &out) {
    out.clear();
    json j;
    SLUICE_TRY(parse_json(text, name, j));
    if (!j.is_array()) return format_error(std::string(name) + ": expected a JSON array of {\"id\", \"text\"} objects");
    for (size_t i = 0; i < j.size(); ++i) {
        const json &e = j[i];
        std::string at = std::string(name) + ": entry " + std::to_string(i) + ": ";
        if (!e.is_object()) return format_error(at + "not an object");
        auto id = e.find("id");
        auto tx = e.find("text");
        if (id == e.end()) return format_error(at + "missing \"id\"");
        if (tx == e.end()) return format_error(at + "missing \"text\"");
        if (!id->is_number_integer()) return format_error(at + "\"id\" is not an integer");
        if (!tx->is_string()) return format_error(at + "\"text\" is not a string");
        int64_t v = id->get<int64_t>();
        if (v < 0 || v >= kNoRank) return format_error(at + "\"id\" " + std::to_string(v) + " is out of range");
        std::string s = tx->get<std::string>();
        if (s.empty()) continue;  // warp skips empty texts
        out.push_back({static_cast<Token>(v), std::move(s)});
    }
    return check_specials(out, name);
}

Status parse_tokenizer_config(std::string_view text, std::string_view name, std::vector<Special> &out) {
    out.clear();
    json j;
    SLUICE_TRY(parse_json(text, name, j));
    if (!j.is_object()) return format_error(std::string(name) + ": expected a JSON object");
    auto dec = j.find("added_tokens_decoder");
    if (dec == j.end()) return Status::ok();
    if (!dec->is_object()) return format_error(std::string(name) + ": \"added_tokens_decoder\" is not an object");
    for (auto it = dec->begin(); it != dec->end(); ++it) {
        std::string at = std::string(name) + ": added_tokens_decoder[\"" + printable(it.key()) + "\"]: ";
        Token id;
        if (!parse_rank(it.key(), id)) return format_error(at + "the key is not a token id");
        auto content = it->find("content");
        if (!it->is_object() || content == it->end() || !content->is_string())
            return format_error(at + "expected an object with a string \"content\"");
        std::string s = content->get<std::string>();
        if (!s.empty()) out.push_back({id, std::move(s)});
    }
    return check_specials(out, name);
}

void Tokenizer::Impl::index_specials() {
    special_by_id.clear();
    special_by_text.clear();
    for (auto &v : by_first_byte) v.clear();
    for (size_t i = 0; i < specials.size(); ++i) {
        special_by_id.emplace(specials[i].id, i);
        special_by_text.emplace(specials[i].text, specials[i].id);
        by_first_byte[static_cast<unsigned char>(specials[i].text[0])].push_back(i);
    }
    for (auto &v : by_first_byte)
        std::stable_sort(v.begin(), v.end(),
                         [&](size_t a, size_t b) { return specials[a].text.size() > specials[b].text.size(); });
}

Result<Tokenizer> Tokenizer::Impl::make(std::vector<std::pair<std::string, Token>> entries,
                                        std::vector<Special> specials, LoadOptions opts) {
    auto impl = std::make_unique<Impl>();
    impl->pattern = opts.pattern;
    impl->n_ranks = entries.size();
    for (auto &e : entries) impl->max_token_bytes = std::max(impl->max_token_bytes, e.first.size());
    for (auto &s : specials) impl->max_token_bytes = std::max(impl->max_token_bytes, s.text.size());
    impl->ranks.build(std::move(entries));
    impl->specials = std::move(specials);
    impl->index_specials();
    Token top = static_cast<Token>(impl->n_ranks);
    for (auto &s : impl->specials) top = std::max(top, s.id + 1);
    impl->n_vocab = top;
    // FORMAT.md §7.2: BOS is n_ranks and EOS n_ranks + 2 (Kimi's reserved
    // block starts [BOS], [EOS], <|end_of_msg|>); config.eos_token_id > 0
    // replaces EOS; config.bos_token_id is not consulted.
    impl->bos = static_cast<Token>(impl->n_ranks);
    impl->eos = opts.eos_override > 0 ? opts.eos_override : static_cast<Token>(impl->n_ranks) + 2;
    return Tokenizer(std::move(impl));
}

Result<Tokenizer> Tokenizer::from_text(std::string_view rank_text, std::string_view specials_json, LoadOptions opts,
                                       std::string_view name) {
    std::vector<std::pair<std::string, Token>> entries;
    SLUICE_TRY(parse_rank_file(rank_text, name, entries));
    std::vector<Special> specials;
    if (!specials_json.empty())
        SLUICE_TRY(parse_specials_json(specials_json, std::string(name) + " (specials)", specials));
    return Impl::make(std::move(entries), std::move(specials), opts);
}

Result<Tokenizer> Tokenizer::load(const std::string &model_path, const std::string &specials_path,
                                  LoadOptions opts) {
    std::error_code ec;
    std::string rank_path = model_path, spec_path = specials_path;
    if (fs::is_directory(model_path, ec)) {
        fs::path dir(model_path);
        if (fs::exists(dir / "tokenizer.model", ec))
            rank_path = (dir / "tokenizer.model").string();
        else if (fs::exists(dir / "tiktoken.model", ec))
            rank_path = (dir / "tiktoken.model").string();
        else
            return Status(io_error("no tokenizer.model or tiktoken.model in " + model_path));
        if (spec_path.empty()) {
            if (fs::exists(dir / "specials.json", ec))
                spec_path = (dir / "specials.json").string();
            else if (fs::exists(dir / "tokenizer_config.json", ec))
                spec_path = (dir / "tokenizer_config.json").string();
        }
    }
    std::string text;
    SLUICE_TRY(read_file(rank_path, text));
    std::vector<std::pair<std::string, Token>> entries;
    SLUICE_TRY(parse_rank_file(text, rank_path, entries));
    std::vector<Special> specials;
    if (!spec_path.empty()) {
        SLUICE_TRY(read_file(spec_path, text));
        if (fs::path(spec_path).filename() == "tokenizer_config.json")
            SLUICE_TRY(parse_tokenizer_config(text, spec_path, specials));
        else
            SLUICE_TRY(parse_specials_json(text, spec_path, specials));
    }
    return Impl::make(std::move(entries), std::move(specials), opts);
}

}  // namespace sluice::tok
