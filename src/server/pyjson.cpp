// Python-compatible JSON spelling (see pyjson.h).
#include "server/pyjson.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

namespace sluice::server {

using nlohmann::ordered_json;

std::string py_float_repr(double x) {
    if (std::isnan(x)) return "NaN";
    if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
    if (x == 0.0) return std::signbit(x) ? "-0.0" : "0.0";
    // Shortest round-trip digits in scientific form, then laid out as
    // Python's float_repr_style 'short' does.
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
    std::string s(buf, r.ptr);
    bool neg = s[0] == '-';
    if (neg) s.erase(0, 1);
    size_t e = s.find('e');
    int exp10 = std::atoi(s.c_str() + e + 1);
    std::string digits;
    for (size_t i = 0; i < e; i++)
        if (s[i] != '.') digits.push_back(s[i]);
    std::string out;
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 >= 0) {
            if ((int)digits.size() <= exp10 + 1) {
                out = digits + std::string((size_t)(exp10 + 1 - (int)digits.size()), '0') + ".0";
            } else {
                out = digits.substr(0, (size_t)exp10 + 1) + "." + digits.substr((size_t)exp10 + 1);
            }
        } else {
            out = "0." + std::string((size_t)(-exp10 - 1), '0') + digits;
        }
    } else {
        out = digits.substr(0, 1);
        if (digits.size() > 1) out.append(".").append(digits, 1);
        char eb[16];
        std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
        out += eb;
    }
    return neg ? "-" + out : out;
}

std::string py_quote(const std::string &s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        switch (c) {
        case '"': o += "\\\""; break;
        case '\\': o += "\\\\"; break;
        case '\n': o += "\\n"; break;
        case '\r': o += "\\r"; break;
        case '\t': o += "\\t"; break;
        case '\b': o += "\\b"; break;
        case '\f': o += "\\f"; break;
        default:
            if (c < 0x20) {
                char b[8];
                std::snprintf(b, sizeof b, "\\u%04x", c);
                o += b;
            } else {
                o.push_back((char)c);
            }
        }
    }
    o.push_back('"');
    return o;
}

namespace {

void dump_to(const ordered_json &v, bool compact, std::string &o) {
    const char *item_sep = compact ? "," : ", ";
    const char *key_sep = compact ? ":" : ": ";
    switch (v.type()) {
    case ordered_json::value_t::null: o += "null"; break;
    case ordered_json::value_t::boolean: o += v.get<bool>() ? "true" : "false"; break;
    case ordered_json::value_t::number_integer: o += std::to_string(v.get<int64_t>()); break;
    case ordered_json::value_t::number_unsigned: o += std::to_string(v.get<uint64_t>()); break;
    case ordered_json::value_t::number_float: o += py_float_repr(v.get<double>()); break;
    case ordered_json::value_t::string: o += py_quote(v.get_ref<const std::string &>()); break;
    case ordered_json::value_t::array: {
        o.push_back('[');
        bool first = true;
        for (const auto &x : v) {
            if (!first) o += item_sep;
            first = false;
            dump_to(x, compact, o);
        }
        o.push_back(']');
        break;
    }
    case ordered_json::value_t::object: {
        o.push_back('{');
        bool first = true;
        for (auto it = v.begin(); it != v.end(); ++it) {
            if (!first) o += item_sep;
            first = false;
            o += py_quote(it.key());
            o += key_sep;
            dump_to(it.value(), compact, o);
        }
        o.push_back('}');
        break;
    }
    default: o += "null"; break;  // binary/discarded never come from a parse
    }
}

}  // namespace

std::string py_dumps(const ordered_json &v, bool compact) {
    std::string o;
    dump_to(v, compact, o);
    return o;
}

ordered_json py_sort_keys(const ordered_json &v) {
    if (v.is_array()) {
        ordered_json a = ordered_json::array();
        for (const auto &x : v) a.push_back(py_sort_keys(x));
        return a;
    }
    if (!v.is_object()) return v;
    // UTF-8 byte order is code point order, which is Python's str order.
    std::vector<std::string> keys;
    for (auto it = v.begin(); it != v.end(); ++it) keys.push_back(it.key());
    std::sort(keys.begin(), keys.end());
    ordered_json o = ordered_json::object();
    for (const auto &k : keys) o[k] = py_sort_keys(v.at(k));
    return o;
}

}  // namespace sluice::server
