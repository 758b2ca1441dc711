// GPT-2's byte-level map, the one llama.cpp's "gpt2" tokenizers (and Hugging
// Face's ByteLevel) store token bytes through: each byte as one printable
// code point. export-gguf writes token strings with it, the GGUF import reads
// them back; one table, so the two directions cannot drift apart.
#pragma once
#include <string>
#include <string_view>

namespace sluice::convert {

// The bytes as their code points, UTF-8 encoded.
std::string bytes_to_byte_level(std::string_view bytes);
// The inverse; false when a code point is not one of the map's 256.
bool byte_level_to_bytes(std::string_view s, std::string* out);

}  // namespace sluice::convert
