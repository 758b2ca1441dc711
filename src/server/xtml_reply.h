// K3's reply read back into an OpenAI message (CHAT_K3.md §9): reasoning
// from the think channel, content from the response channel, tool calls
// from <|open|>tools ... elements. Incremental: the server feeds every
// generated token (a token is structure only if its id is one of the four
// marker ids); tests and text-only hosts feed text, where markers are found
// by string match and a possible marker prefix is held back.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::server {

enum class XMarker { open, close, sep, end_of_msg };

struct XToolCall {
    std::string id;
    std::string name;
    int index = 0;
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    std::optional<std::string> raw;  // a <|open|>json block, verbatim
    // The arguments string OpenAI clients read (Python json.dumps spelling).
    std::string arguments() const;
};

class XtmlReply {
public:
    // starts_in: "think" or "response", the channel the prompt left open.
    explicit XtmlReply(const std::string &starts_in);

    void feed_marker(XMarker m);
    void feed_text(std::string_view text);  // literal text (a non-marker token)
    // Text path: finds the marker strings in `chunk` (holding back a suffix
    // that may begin one).
    void feed_scan(std::string_view chunk);
    // End of generation: flushes held-back text, an unfinished header (as
    // text), an open json block and an open argument.
    void finish();

    bool finished() const { return finished_; }  // saw <|end_of_msg|>
    // The model is writing in the think channel (its text goes to reasoning).
    bool in_think() const { return !header_ && !stack_.empty() && stack_.back() == "think"; }
    // A tag header is being written (between <|open|>/<|close|> and <|sep|>).
    bool in_header() const { return header_.has_value(); }
    // Directly inside a <|open|>call ...<|sep|> element: its header is
    // complete and no argument or json child is open.
    bool in_call() const { return !header_ && !arg_ && !json_ && !stack_.empty() && stack_.back() == "call"; }
    const std::string &reasoning() const { return reasoning_; }
    const std::string &content() const { return content_; }
    const std::vector<XToolCall> &calls() const { return calls_; }
    // Calls whose header has completed (a non-empty name), for streaming.
    size_t calls_named() const;
    // Cuts content at byte n (a stop string matched there).
    void truncate_content(size_t n) { content_.resize(std::min(n, content_.size())); }

    // {"role":"assistant","content":...,["reasoning_content"],["tool_calls"]}
    nlohmann::ordered_json message() const;

private:
    void route(std::string_view t);
    void apply_header();
    void finish_argument();

    std::vector<std::string> stack_;
    std::optional<std::pair<bool, std::string>> header_;  // (is_open, text)
    std::string reasoning_, content_;
    std::vector<XToolCall> calls_;
    struct Arg {
        std::string key, type, text;
    };
    std::optional<Arg> arg_;
    std::optional<std::string> json_;
    bool finished_ = false;
    std::string pending_;  // text path: held-back bytes
};

// A raw json block the model wrote badly passes on verbatim as the call's
// `arguments` (CHAT_K3.md's parser, and the fixtures, keep it so), but an
// agent must not discover that by crashing on json.loads: every call whose
// arguments do not parse gets an "error" object naming the call and the
// parse error. Returns how many calls were marked.
int mark_invalid_arguments(nlohmann::ordered_json *message);

}  // namespace sluice::server
