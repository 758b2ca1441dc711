// K3's conversation markup (XTML): an OpenAI-style conversation rendered as
// the segment list K3's release encoder builds (../shared/spec/CHAT_K3.md
// §2-§7). Pure: no model, no tokenizer. Each segment is later tokenized on
// its own, markup segments with special tokens recognised, plain ones never.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace sluice::server {

struct XSegment {
    std::string text;
    bool markup = false;
    bool operator==(const XSegment &o) const { return text == o.text && markup == o.markup; }
};

struct XtmlInput {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    nlohmann::ordered_json tools;  // null or an array
    bool thinking = true;
    bool add_generation_prompt = true;
    std::optional<std::vector<std::string>> image_prompts;  // media blocks, in order
    std::optional<std::string> thinking_effort;
    std::optional<std::string> tool_choice;  // "required"/"none" render a note
    nlohmann::ordered_json response_format;  // null or an object
};

// The segments (never an empty one), or false with *err holding the
// encoder's message (§3.6).
bool xtml_render(const XtmlInput &in, std::vector<XSegment> *out, std::string *err);

// The concatenated text (for logs and tests).
std::string xtml_join(const std::vector<XSegment> &segs);

}  // namespace sluice::server
