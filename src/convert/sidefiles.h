// Files beside the weights: tokenizer.model, specials.json,
// chat_template.jinja and chat.json (FORMAT.md 7, 8).
#pragma once

#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/hfconfig.h"

namespace sluice::convert {

// Writes what the source offers; `written` lists the file names. Missing
// optional inputs are not errors; unreadable or malformed present ones are.
bool write_side_files(const std::string& src, const std::string& dir, const ModelPlan& mp, ProgressSink* sink,
                      std::vector<std::string>* written, std::string* err);

// The same from a GGUF source's tokenizer metadata (GgufSource::tokenizer_files),
// plus the family's built-in chat.json when its markers are specials.
class GgufSource;
bool write_gguf_side_files(const GgufSource& g, const std::string& dir, const ModelPlan& mp, ProgressSink* sink,
                           std::vector<std::string>* written, std::string* err);

// The built-in chat.json for a family ("" if none is known).
std::string builtin_chat_json(const std::string& family);

}  // namespace sluice::convert
