// Byte sizes as users write them ("2G", "1.5GiB", "512M") and as we print
// them. Here, not in the runtime, so the CLI's option checks need no runtime
// header (scripts/check_layers.py).
#pragma once
#include <cstdint>
#include <string>

namespace sluice {

// "2G", "1.5GiB", "512M", "1073741824" -> bytes. False on junk.
bool parse_size(const std::string &s, uint64_t *out);
std::string format_size(uint64_t bytes);

}  // namespace sluice
