#include "tokenizer/chat.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include "common/checked_file.h"

namespace sluice::tok {
namespace {

using json = nlohmann::json;

// U+FF5C FULLWIDTH VERTICAL LINE, DeepSeek's marker bar.
constexpr std::string_view kFullBar = "\xEF\xBD\x9C";

Status take_pair(const json &j, const char *key, std::string_view name, std::string &prefix, std::string &suffix) {
    auto it = j.find(key);
    if (it == j.end()) return Status::ok();
    if (!it->is_array() || it->size() != 2 || !(*it)[0].is_string() || !(*it)[1].is_string())
        return format_error(std::string(name) + ": \"" + key + "\" must be an array of two strings [prefix, suffix]");
    prefix = (*it)[0].get<std::string>();
    suffix = (*it)[1].get<std::string>();
    return Status::ok();
}

Status take_string(const json &j, const char *key, std::string_view name, std::string &out) {
    auto it = j.find(key);
    if (it == j.end()) return Status::ok();
    if (!it->is_string()) return format_error(std::string(name) + ": \"" + key + "\" must be a string");
    out = it->get<std::string>();
    return Status::ok();
}

// Every "<|...|>" and "<｜...｜>" marker in s.
std::vector<std::string> markers(std::string_view s) {
    std::vector<std::string> out;
    const std::pair<std::string, std::string> forms[] = {{"<|", "|>"},
                                                         {"<" + std::string(kFullBar), std::string(kFullBar) + ">"}};
    for (const auto &[open, close] : forms) {
        size_t i = 0;
        while ((i = s.find(open, i)) != std::string_view::npos) {
            size_t j = s.find(close, i + open.size());
            if (j == std::string_view::npos) break;
            out.emplace_back(s.substr(i, j + close.size() - i));
            i = j + close.size();
        }
    }
    return out;
}

}  // namespace

std::optional<ChatFamily> chat_family_from_name(std::string_view name) {
    if (name == "kimi-linear") return ChatFamily::kimi_linear;
    if (name == "kimi-k3" || name == "k3") return ChatFamily::kimi_k3;
    if (name == "deepseek-v3") return ChatFamily::deepseek_v3;
    return std::nullopt;
}

ChatFormat builtin_chat_format(ChatFamily family) {
    ChatFormat f;
    switch (family) {
    case ChatFamily::kimi_linear:
        // warp's examples/chat-kimi-linear.json (FORMAT.md §8).
        f.system_prefix = "<|im_system|>system<|im_middle|>";
        f.user_prefix = "<|im_user|>user<|im_middle|>";
        f.assistant_prefix = "<|im_assistant|>assistant<|im_middle|>";
        f.system_suffix = f.user_suffix = f.assistant_suffix = "<|im_end|>";
        f.open = f.assistant_prefix;
        break;
    case ChatFamily::kimi_k3:
        // XTML as K3's encoding_k3.py emits it for a text conversation,
        // answering in the response channel (no think channel).
        f.system_prefix = "<|open|>message role=\"system\"<|sep|>";
        f.user_prefix = "<|open|>message role=\"user\"<|sep|>";
        f.system_suffix = f.user_suffix = "<|close|>message<|sep|><|end_of_msg|>";
        f.assistant_prefix = "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>";
        f.assistant_suffix = "<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>";
        f.open = f.assistant_prefix;
        break;
    case ChatFamily::deepseek_v3:
        // DeepSeek-V3's template: BOS, the system text bare, then
        // <｜User｜>... <｜Assistant｜>...<｜end▁of▁sentence｜>.
        f.begin = "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
        f.user_prefix = "<\xEF\xBD\x9CUser\xEF\xBD\x9C>";
        f.assistant_prefix = "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>";
        f.assistant_suffix = "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
        f.open = f.assistant_prefix;
        break;
    }
    return f;
}

std::optional<ChatFormat> choose_builtin_chat_format(const Tokenizer &tok, std::string_view family) {
    std::vector<ChatFamily> order;
    if (auto f = chat_family_from_name(family)) order.push_back(*f);
    for (ChatFamily f : {ChatFamily::kimi_linear, ChatFamily::kimi_k3, ChatFamily::deepseek_v3}) order.push_back(f);
    for (ChatFamily f : order) {
        ChatFormat fmt = builtin_chat_format(f);
        if (check_chat_format(tok, fmt).is_ok()) return fmt;
    }
    return std::nullopt;
}

Result<ChatFormat> parse_chat_json(std::string_view text, std::string_view name) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception &e) {  // parse_error, and out_of_range for a number past double (fuzz_tokenizer)
        return Status(format_error(std::string(name) + ": not valid JSON: " + e.what()));
    }
    if (!j.is_object()) return Status(format_error(std::string(name) + ": expected a JSON object"));
    ChatFormat f;
    SLUICE_TRY(take_pair(j, "system", name, f.system_prefix, f.system_suffix));
    SLUICE_TRY(take_pair(j, "user", name, f.user_prefix, f.user_suffix));
    SLUICE_TRY(take_pair(j, "assistant", name, f.assistant_prefix, f.assistant_suffix));
    SLUICE_TRY(take_string(j, "open", name, f.open));
    SLUICE_TRY(take_string(j, "begin", name, f.begin));
    return f;
}

Result<ChatFormat> load_chat_json(const std::string &path) {
    std::string text;
    if (Status st = read_input_file(path, 64u << 20, &text); !st) return st;
    return parse_chat_json(text, path);
}

std::vector<Segment> chat_segments(const ChatFormat &fmt, std::span<const Message> messages, bool add_open) {
    std::vector<Segment> out;
    auto markup = [&](const std::string &s) {
        if (!s.empty()) out.push_back({true, s});
    };
    markup(fmt.begin);
    for (const Message &m : messages) {
        const std::string &pre = m.role == Role::system ? fmt.system_prefix
                                 : m.role == Role::user ? fmt.user_prefix
                                                        : fmt.assistant_prefix;
        const std::string &suf = m.role == Role::system ? fmt.system_suffix
                                 : m.role == Role::user ? fmt.user_suffix
                                                        : fmt.assistant_suffix;
        markup(pre);
        if (!m.content.empty()) out.push_back({false, m.content});
        markup(suf);
    }
    if (add_open) markup(fmt.open_text());
    return out;
}

std::vector<Token> encode_segments(const Tokenizer &tok, std::span<const Segment> segments) {
    std::vector<Token> ids;
    for (const Segment &s : segments) {
        if (s.markup)
            tok.encode_markup(s.text, ids);
        else
            tok.encode(s.text, ids);
    }
    return ids;
}

std::vector<Token> render_chat(const Tokenizer &tok, const ChatFormat &fmt, std::span<const Message> messages,
                               bool add_open) {
    std::vector<Segment> segs = chat_segments(fmt, messages, add_open);
    return encode_segments(tok, segs);
}

Status check_chat_format(const Tokenizer &tok, const ChatFormat &fmt) {
    const std::pair<const char *, const std::string *> fields[] = {
        {"begin", &fmt.begin},
        {"system prefix", &fmt.system_prefix},
        {"system suffix", &fmt.system_suffix},
        {"user prefix", &fmt.user_prefix},
        {"user suffix", &fmt.user_suffix},
        {"assistant prefix", &fmt.assistant_prefix},
        {"assistant suffix", &fmt.assistant_suffix},
        {"open", &fmt.open},
    };
    for (const auto &[field, text] : fields)
        for (const std::string &m : markers(*text))
            if (!tok.special_id(m))
                return format_error("chat format: the " + std::string(field) + " marker '" + m +
                                    "' is not a special token of this tokenizer");
    return Status::ok();
}

std::optional<Token> chat_stop_token(const Tokenizer &tok, const ChatFormat &fmt) {
    // The last control id of the suffix: <|im_end|>, K3's <|end_of_msg|>,
    // DeepSeek's <｜end▁of▁sentence｜>: the id that ends the whole turn.
    std::optional<Token> stop;
    for (Token id : tok.encode_markup(fmt.assistant_suffix))
        if (tok.is_special(id)) stop = id;
    return stop;
}

}  // namespace sluice::tok
