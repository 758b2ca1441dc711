// JSON Schema compilation (see json_schema.h).
#include "grammar/json_schema.h"

#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace sluice::grammar {

using nlohmann::ordered_json;

namespace {

constexpr int kMaxSchemaDepth = 32;

struct Compiler {
    Grammar &g;
    const Limits &lim;
    std::string err;
    std::map<uint32_t, int32_t> any_at_depth;

    int32_t lit(const std::string &s) {
        Node n;
        n.kind = Kind::lit;
        n.lit = s;
        return g.add(n);
    }
    int32_t str(uint32_t max_bytes) {
        Node n;
        n.kind = Kind::str;
        n.max_bytes = max_bytes;
        return g.add(n);
    }
    int32_t num(bool integer) {
        Node n;
        n.kind = Kind::num;
        n.integer = integer;
        return g.add(n);
    }
    int32_t seq(std::vector<int32_t> kids) {
        Node n;
        n.kind = Kind::seq;
        n.kids = std::move(kids);
        return g.add(n);
    }
    int32_t alt(std::vector<int32_t> kids) {
        if (kids.size() == 1) return kids[0];
        Node n;
        n.kind = Kind::alt;
        n.kids = std::move(kids);
        return g.add(n);
    }
    int32_t list(char open, char close, int32_t item, uint32_t min_items, uint32_t max_items) {
        Node n;
        n.kind = Kind::list;
        n.open = open;
        n.close = close;
        n.item = item;
        n.min_items = min_items;
        n.max_items = max_items;
        return g.add(n);
    }
    int32_t boolean() { return alt({lit("true"), lit("false")}); }

    // Any JSON value nested `depth` levels inside open-ended values.
    int32_t any(uint32_t depth) {
        auto it = any_at_depth.find(depth);
        if (it != any_at_depth.end()) return it->second;
        std::vector<int32_t> k{str(lim.max_string_bytes), num(false), lit("true"), lit("false"), lit("null")};
        if (depth < lim.max_any_depth) {
            int32_t inner = any(depth + 1);
            k.push_back(list('[', ']', inner, 0, lim.max_items));
            k.push_back(list('{', '}', seq({str(lim.max_string_bytes), lit(":"), inner}), 0, lim.max_items));
        }
        int32_t id = alt(k);
        any_at_depth[depth] = id;
        return id;
    }

    bool fail(const std::string &path, const std::string &why) {
        if (err.empty()) err = (path.empty() ? std::string("/") : path) + ": " + why;
        return false;
    }

    bool uint_kw(const ordered_json &s, const char *k, const std::string &path, uint32_t *out) {
        if (!s.contains(k)) return true;
        const auto &v = s[k];
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (1 << 20))
            return fail(path + "/" + k, "must be a non-negative integer (at most 1048576)");
        *out = (uint32_t)v.get<int64_t>();
        return true;
    }

    bool value(const ordered_json &s, const std::string &path, int depth, int32_t *out) {
        if (depth > kMaxSchemaDepth) return fail(path, "the schema nests deeper than 32 levels");
        if (s.is_boolean()) {
            if (!s.get<bool>()) return fail(path, "the schema 'false' admits no value");
            return *out = any(0), true;
        }
        if (!s.is_object()) return fail(path, "a schema must be an object or a boolean");
        static const std::set<std::string> kIgnored = {
            "description", "title", "$schema", "$id", "$comment", "default", "examples", "strict",
            "additionalProperties", "required", "properties", "items", "type", "enum", "const", "anyOf",
            "maxLength", "maxItems", "minItems", "name", "nullable"};
        for (auto it = s.begin(); it != s.end(); ++it)
            if (!kIgnored.count(it.key()))
                return fail(path + "/" + it.key(),
                            "the keyword '" + it.key() + "' is not supported by the constrained decoder (supported: "
                            "type, properties, required, items, enum, const, anyOf, maxLength, minItems, maxItems)");
        if (s.contains("anyOf")) {
            const auto &a = s["anyOf"];
            if (!a.is_array() || a.empty()) return fail(path + "/anyOf", "must be a non-empty array");
            std::vector<int32_t> kids;
            for (size_t i = 0; i < a.size(); i++) {
                int32_t k;
                if (!value(a[i], path + "/anyOf/" + std::to_string(i), depth + 1, &k)) return false;
                kids.push_back(k);
            }
            return *out = alt(kids), true;
        }
        if (s.contains("const")) return *out = lit(nlohmann::json(s["const"]).dump()), true;
        if (s.contains("enum")) {
            const auto &e = s["enum"];
            if (!e.is_array() || e.empty()) return fail(path + "/enum", "must be a non-empty array");
            std::vector<int32_t> kids;
            for (const auto &v : e) kids.push_back(lit(nlohmann::json(v).dump()));
            return *out = alt(kids), true;
        }
        if (!s.contains("type")) return *out = any(0), true;
        const auto &t = s["type"];
        if (t.is_array()) {
            if (t.empty()) return fail(path + "/type", "must not be empty");
            std::vector<int32_t> kids;
            for (const auto &one : t) {
                if (!one.is_string()) return fail(path + "/type", "must hold type names");
                int32_t k;
                if (!typed(s, one.get<std::string>(), path, depth, &k)) return false;
                kids.push_back(k);
            }
            return *out = alt(kids), true;
        }
        if (!t.is_string()) return fail(path + "/type", "must be a string or an array of strings");
        return typed(s, t.get<std::string>(), path, depth, out);
    }

    bool typed(const ordered_json &s, const std::string &t, const std::string &path, int depth, int32_t *out) {
        if (t == "string") {
            uint32_t max = lim.max_string_bytes;
            if (!uint_kw(s, "maxLength", path, &max)) return false;
            return *out = str(max), true;
        }
        if (t == "number" || t == "integer") return *out = num(t == "integer"), true;
        if (t == "boolean") return *out = boolean(), true;
        if (t == "null") return *out = lit("null"), true;
        if (t == "array") {
            uint32_t mn = 0, mx = lim.max_items;
            if (!uint_kw(s, "minItems", path, &mn) || !uint_kw(s, "maxItems", path, &mx)) return false;
            if (mn > mx) return fail(path + "/minItems", "is larger than maxItems");
            int32_t item;
            if (s.contains("items")) {
                if (!value(s["items"], path + "/items", depth + 1, &item)) return false;
            } else {
                item = any(1);
            }
            return *out = list('[', ']', item, mn, mx), true;
        }
        if (t == "object") {
            const bool closed = s.contains("additionalProperties") && s["additionalProperties"].is_boolean() &&
                                !s["additionalProperties"].get<bool>();
            if (!s.contains("properties")) {
                if (closed) return *out = lit("{}"), true;
                return *out = list('{', '}', seq({str(lim.max_string_bytes), lit(":"), any(1)}), 0, lim.max_items),
                       true;
            }
            const auto &props = s["properties"];
            if (!props.is_object()) return fail(path + "/properties", "must be an object");
            if (s.contains("required")) {
                const auto &r = s["required"];
                if (!r.is_array()) return fail(path + "/required", "must be an array");
                for (const auto &k : r)
                    if (!k.is_string() || !props.contains(k.get<std::string>()))
                        return fail(path + "/required", "names '" + (k.is_string() ? k.get<std::string>() : k.dump()) +
                                                            "', which is not in 'properties'");
            }
            std::vector<int32_t> kids;
            bool first = true;
            for (auto it = props.begin(); it != props.end(); ++it) {
                std::string key = nlohmann::json(it.key()).dump();
                kids.push_back(lit((first ? "{" : ",") + key + ":"));
                first = false;
                int32_t v;
                if (!value(it.value(), path + "/properties/" + it.key(), depth + 1, &v)) return false;
                kids.push_back(v);
            }
            kids.push_back(lit(first ? "{}" : "}"));
            return *out = seq(kids), true;
        }
        return fail(path + "/type", "unknown type '" + t + "'");
    }
};

}  // namespace

bool compile_json_schema(std::string_view schema_json, const Limits &lim, Grammar *out, std::string *err) {
    *out = Grammar{};
    ordered_json s;
    try {
        s = ordered_json::parse(schema_json);
    } catch (const std::exception &e) {
        return *err = std::string("the schema is not valid JSON: ") + e.what(), false;
    }
    Compiler c{*out, lim, {}, {}};
    int32_t root;
    if (!c.value(s, "", 0, &root)) return *err = c.err, false;
    out->root = root;
    return true;
}

Grammar any_json_object(const Limits &lim) {
    Grammar g;
    Compiler c{g, lim, {}, {}};
    g.root = c.list('{', '}', c.seq({c.str(lim.max_string_bytes), c.lit(":"), c.any(1)}), 0, lim.max_items);
    return g;
}

}  // namespace sluice::grammar
