// JSON Schema -> Grammar, for the subset OpenAI's strict structured output
// allows: objects with their properties, arrays, enum/const, strings,
// numbers, integers, booleans, null, nesting and anyOf; plus "any JSON
// value" (an empty schema) and "any JSON object" (response_format
// json_object).
//
// Objects are written with every declared property, in declared order
// (strict mode requires them all; an optional one may be present). No
// whitespace is generated. maxLength (a cap in bytes, so never more
// characters than allowed), maxItems and minItems are honoured; keywords
// that would constrain values in ways the grammar does not enforce
// (pattern, format, minimum, $ref, ...) are refused with their path rather
// than ignored.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "grammar/grammar.h"

namespace sluice::grammar {

struct Limits {
    uint32_t max_string_bytes = 256;  // a string without maxLength
    uint32_t max_items = 32;          // an array or generic object without maxItems
    uint32_t max_any_depth = 6;       // nesting of values the schema leaves open
};

// schema_json: the schema's JSON text. Returns false with *err naming the
// path (e.g. "/properties/age/minimum") and the reason.
bool compile_json_schema(std::string_view schema_json, const Limits &lim, Grammar *out, std::string *err);
// Any JSON object (response_format {"type": "json_object"}).
Grammar any_json_object(const Limits &lim);

}  // namespace sluice::grammar
