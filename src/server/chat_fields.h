// The chat-specific fields of a request, as parse_chat_fields
// (chat_request.h) leaves them: checked, not yet mapped onto a format.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace sluice::server {

struct ChatFields {
    nlohmann::ordered_json messages;  // validated; "developer" renamed to "system"
    nlohmann::ordered_json tools;     // null or an array
    nlohmann::ordered_json tool_choice;      // null, a string or an object
    nlohmann::ordered_json response_format;  // null or an object
    // From thinking / reasoning_effort; resolved against the server default
    // by the format (thinking_explicit: the request asked for it either way).
    std::optional<bool> thinking_field;
    std::optional<std::string> effort;  // lowercased; absent if none given
    bool effort_given = false;
};

}  // namespace sluice::server
