// JSON text spelled exactly as Python's json.dumps(ensure_ascii=False)
// spells it. K3's prompt carries tool schemas and tool-call arguments in
// that spelling (CHAT_K3.md §5.1, §5.2), and the reply's `arguments`
// string is Python's too (§9.4): a different separator or float spelling
// changes prompt tokens and what clients read.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace sluice::server {

// compact: separators (",", ":") (tools, schemas); otherwise (", ", ": ").
// Object keys keep the order the value holds (ordered_json keeps insertion
// order; nlohmann::json holds them sorted, as Python's sort_keys=True does).
std::string py_dumps(const nlohmann::ordered_json &v, bool compact);
// Python's repr() of a float: the shortest round-trip digits, fixed for
// exponents in [-4, 16), else d.ddde+XX; "NaN", "Infinity".
std::string py_float_repr(double x);
// A JSON string literal with Python's escapes (non-ASCII kept as is).
std::string py_quote(const std::string &s);
// Keys of every object sorted by code point, recursively (arrays keep order).
nlohmann::ordered_json py_sort_keys(const nlohmann::ordered_json &v);

}  // namespace sluice::server
