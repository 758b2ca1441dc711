// The chat-specific part of a /v1/chat/completions request: the messages
// checked as K3's server checks them (CHAT_K3.md §8 step 2), thinking and
// reasoning effort (§4.1), tools, tool_choice (§5.5) and response_format
// (§6), and their mapping onto the model's chat format: K3's XTML, or a
// chat.json (Kimi-Linear, K2, DeepSeek-V3), which cannot express tools,
// tool turns or a think channel and refuses them by name (§11).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/chat_fields.h"
#include "server/request.h"
#include "server/xtml_render.h"

namespace sluice::server {


// Shape checks on the messages and the chat fields; *err is the OpenAI
// error (400) with warp's message and param.
bool parse_chat_fields(const nlohmann::ordered_json &body, ChatFields *out, ApiError *err);

// K3: the renderer's input, and the channel the prompt leaves open
// ("think" or "response"). Refusals and renderer errors come back as 400.
bool k3_prompt(const ChatFields &f, bool server_default_thinking, XtmlInput *in, std::string *starts_in,
               ApiError *err);
// Renders, mapping a renderer error to 400 param "messages". image_prompts:
// the media block of each image the request carries, in conversation order
// (§7); none for a request without images (then placeholders stay text).
bool k3_render(const ChatFields &f, bool server_default_thinking, std::vector<XSegment> *segs,
               std::string *starts_in, ApiError *err,
               const std::optional<std::vector<std::string>> &image_prompts = std::nullopt);

// chat.json formats: refuses what the format cannot express (tools,
// tool_choice, thinking, tool turns, images). response_format is accepted:
// sluice enforces it by constrained decoding rather than by a note.
bool chatjson_check(const ChatFields &f, ApiError *err);

}  // namespace sluice::server
