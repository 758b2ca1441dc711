// The one parser for the numbers and id lists users type (--seed, --ids,
// detokenize's ids): the same text gets the same answer from every
// command, and a value past the type is an error, never saturated.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

// Decimal digits only (no sign, no spaces), at most max. On failure *err
// says why, quoting the text.
bool parse_u64(std::string_view s, uint64_t *out, std::string *err, uint64_t max = UINT64_MAX);

// Non-negative token ids separated by commas and/or whitespace. An empty
// element (a leading or trailing comma, two commas with only blanks between)
// is an error, as is an id above INT32_MAX or no ids at all.
bool parse_id_list(std::string_view s, std::vector<int32_t> *ids, std::string *err);

}  // namespace sluice
