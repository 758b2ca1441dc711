// Chat formats (FORMAT.md §8): chat.json and built-in templates, and prompt
// building from segments.
//
// A prompt is a list of segments. Template structure (prefixes, suffixes,
// `open`) is encoded in markup mode, so its special strings become control
// ids; every message content is encoded in content mode, so nothing a user,
// document or tool supplies can forge a control token. The segments are
// encoded one by one and concatenated: never joined into one string first.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace sluice::tok {

struct ChatFormat {
    // sluice extension (built-in DeepSeek-V3 format, or a "begin" key in
    // chat.json): markup emitted once at the start of a conversation.
    std::string begin;
    std::string system_prefix, system_suffix;
    std::string user_prefix, user_suffix;
    std::string assistant_prefix, assistant_suffix;
    std::string open;  // starts the model's turn after the last message

    // What add_open appends: `open`, or the assistant prefix when `open` is
    // empty (as warp's interactive chat does).
    const std::string &open_text() const { return open.empty() ? assistant_prefix : open; }
};

enum class ChatFamily {
    kimi_linear,  // <|im_user|>user<|im_middle|> ... <|im_end|>
    kimi_k3,      // XTML: <|open|>message role="user"<|sep|> ...
    deepseek_v3,  // <｜begin▁of▁sentence｜> ... <｜User｜> ... <｜Assistant｜>
};

// "kimi-linear", "kimi-k3"/"k3", "deepseek-v3" (sluice_info.family names).
std::optional<ChatFamily> chat_family_from_name(std::string_view name);
ChatFormat builtin_chat_format(ChatFamily family);
// The built-in format for a container without chat.json: the family's own
// if all its markers are specials of `tok`, else the first built-in whose
// markers all are (a Kimi K2 container has the DeepSeek-V3 shape, so its
// family is "deepseek-v3", but it speaks Kimi's <|im_*|> markup).
std::optional<ChatFormat> choose_builtin_chat_format(const Tokenizer &tok, std::string_view family);

// chat.json: a JSON object, all keys optional: "system", "user",
// "assistant" as [prefix, suffix] string pairs, "open" a string (and the
// extension "begin"). Unknown keys are ignored. Errors name the key.
Result<ChatFormat> parse_chat_json(std::string_view json_text, std::string_view name = "chat.json");
Result<ChatFormat> load_chat_json(const std::string &path);

enum class Role { system, user, assistant };
struct Message {
    Role role;
    std::string content;
};

struct Segment {
    bool markup;  // true: template structure (markup mode); false: content
    std::string text;
};

// The segments of a conversation: begin, then prefix + content + suffix per
// message, then open_text() if add_open. Empty template parts are omitted.
std::vector<Segment> chat_segments(const ChatFormat &fmt, std::span<const Message> messages, bool add_open = true);
// Encodes each segment in its mode and concatenates the ids.
std::vector<Token> encode_segments(const Tokenizer &tok, std::span<const Segment> segments);
std::vector<Token> render_chat(const Tokenizer &tok, const ChatFormat &fmt, std::span<const Message> messages,
                               bool add_open = true);

// Checks that every "<|...|>" (or "<｜...｜>") marker in the format's strings
// is one special token of `tok`, as warp's server requires; the error names
// the marker and the field.
Status check_chat_format(const Tokenizer &tok, const ChatFormat &fmt);
// The assistant suffix doubles as the stop string: its first special id.
std::optional<Token> chat_stop_token(const Tokenizer &tok, const ChatFormat &fmt);

}  // namespace sluice::tok
