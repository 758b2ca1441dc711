// K3 XTML rendering (see xtml_render.h; CHAT_K3.md §3-§7).
#include "server/xtml_render.h"
#include "server/ascii_space.h"

#include <algorithm>
#include <map>

#include "server/pyjson.h"

namespace sluice::server {

using nlohmann::ordered_json;

namespace {

constexpr const char *kPlaceholder = "<|kimi_image_placeholder|>";

struct Renderer {
    const XtmlInput &in;
    std::vector<XSegment> *out;
    size_t images_used = 0;

    void markup(const std::string &t) {
        if (!t.empty()) out->push_back({t, true});
    }
    void plain(const std::string &t) {
        if (!t.empty()) out->push_back({t, false});
    }

    static std::string escape_attr(const std::string &v) {
        std::string a;
        for (char c : v) a += c == '&' ? "&amp;" : std::string(1, c);
        std::string b;
        for (char c : a) b += c == '"' ? "&quot;" : std::string(1, c);
        return b;
    }

    // <|open|>NAME key="value"...<|sep|>, each attribute four plain fragments.
    void open(const std::string &name, const std::vector<std::pair<std::string, std::string>> &attrs) {
        markup("<|open|>");
        plain(name);
        for (const auto &[k, v] : attrs) {
            plain(" " + k);
            plain("=\"");
            plain(escape_attr(v));
            plain("\"");
        }
        markup("<|sep|>");
    }
    void close(const std::string &name) {
        markup("<|close|>");
        plain(name);
        markup("<|sep|>");
    }

    bool next_image(std::string *err) {
        if (!in.image_prompts) {
            markup(kPlaceholder);
            return true;
        }
        if (images_used >= in.image_prompts->size())
            return *err = "More image placeholders than image prompts.", false;
        markup((*in.image_prompts)[images_used++]);
        return true;
    }

    // Plain text with image placeholders resolved to media blocks (§7).
    bool text(const std::string &t, std::string *err) {
        if (!in.image_prompts) return plain(t), true;
        size_t at = 0;
        for (;;) {
            size_t p = t.find(kPlaceholder, at);
            if (p == std::string::npos) break;
            plain(t.substr(at, p - at));
            if (!next_image(err)) return false;
            at = p + std::string(kPlaceholder).size();
        }
        plain(t.substr(at));
        return true;
    }

    bool content(const ordered_json &c, std::string *err) {
        if (c.is_string()) return text(c.get<std::string>(), err);
        if (!c.is_array()) return true;
        for (const auto &part : c) {
            if (!part.is_object()) continue;
            std::string type = part.contains("type") && part["type"].is_string() ? part["type"].get<std::string>() : "";
            if (type == "image" || type == "image_url") {
                if (!next_image(err)) return false;
            } else if (part.contains("text") && part["text"].is_string()) {
                if (!text(part["text"].get<std::string>(), err)) return false;
            }
        }
        return true;
    }

    static std::string attr_str(const ordered_json &v) {
        if (v.is_string()) return v.get<std::string>();
        if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
        return py_dumps(v, false);
    }
    static bool truthy(const ordered_json &m, const char *k) {
        if (!m.is_object() || !m.contains(k)) return false;
        const auto &v = m[k];
        if (v.is_null()) return false;
        if (v.is_string()) return !v.get<std::string>().empty();
        if (v.is_boolean()) return v.get<bool>();
        if (v.is_number()) return v.get<double>() != 0.0;
        return !v.empty();
    }

    void end_message() {
        close("message");
        markup("<|end_of_msg|>");
    }

    void system_note(const std::string &type, const std::string &body) {
        open("message", {{"role", "system"}, {"type", type}});
        plain(body);
        end_message();
    }
};

std::string value_text(const ordered_json &v, std::string *type) {
    if (v.is_boolean()) return *type = "boolean", v.get<bool>() ? "true" : "false";
    if (v.is_null()) return *type = "null", "null";
    if (v.is_number()) return *type = "number", py_dumps(v, false);
    if (v.is_string()) return *type = "string", v.get<std::string>();
    if (v.is_object()) return *type = "object", py_dumps(v, false);
    return *type = "array", py_dumps(v, false);
}

bool is_blank(const std::string &s) {
    return std::all_of(s.begin(), s.end(), [](unsigned char c) { return c == ' ' || (c >= 9 && c <= 13); });
}

// One call's arguments after §3.1 step 2: an object, or a raw block.
struct Args {
    ordered_json obj = ordered_json::object();
    std::optional<std::string> raw;
};

bool normalize_args(const ordered_json &call, Args *a, std::string *err) {
    const ordered_json *v = nullptr;
    if (call.contains("function") && call["function"].is_object()) {
        if (call["function"].contains("arguments")) v = &call["function"]["arguments"];
    } else if (call.contains("arguments")) {
        v = &call["arguments"];
    }
    if (!v || v->is_null()) return true;
    if (v->is_object()) return a->obj = *v, true;
    if (!v->is_string()) return *err = "Kimi K3 tool call arguments must be a dict or a JSON object string.", false;
    const std::string s = v->get<std::string>();
    if (trim(s).empty()) return true;
    ordered_json parsed;
    try {
        parsed = ordered_json::parse(s);
    } catch (const std::exception &) {
        a->raw = s;
        return true;
    }
    if (!parsed.is_object()) return *err = "Kimi K3 tool call arguments must be a JSON object.", false;
    a->obj = parsed;
    return true;
}

// §5.4: each run of tool messages that all bind by id is sorted into call
// order and named after the matched calls.
ordered_json reorder_tool_results(const ordered_json &msgs) {
    ordered_json m = msgs;
    std::map<std::string, std::pair<int, std::string>> ids;
    size_t i = 0;
    while (i < m.size()) {
        const ordered_json &x = m[i];
        std::string role = x.is_object() && x.contains("role") && x["role"].is_string() ? x["role"].get<std::string>() : "";
        if (role == "assistant") {
            ids.clear();
            if (x.contains("tool_calls") && x["tool_calls"].is_array()) {
                int pos = 0;
                for (const auto &c : x["tool_calls"]) {
                    pos++;
                    if (!c.is_object() || !c.contains("id") || c["id"].is_null()) continue;
                    std::string id = c["id"].is_string() ? c["id"].get<std::string>() : py_dumps(c["id"], false);
                    std::string name;
                    if (c.contains("function") && c["function"].is_object() && c["function"].contains("name") &&
                        c["function"]["name"].is_string())
                        name = c["function"]["name"].get<std::string>();
                    else if (c.contains("name") && c["name"].is_string())
                        name = c["name"].get<std::string>();
                    ids.emplace(id, std::make_pair(pos, name));
                }
            }
            i++;
            continue;
        }
        if (role != "tool") {
            i++;
            continue;
        }
        size_t j = i;
        while (j < m.size() && m[j].is_object() && m[j].contains("role") && m[j]["role"] == "tool") j++;
        std::vector<std::pair<int, size_t>> order;
        bool all = !ids.empty();
        for (size_t k = i; k < j && all; k++) {
            const ordered_json &t = m[k];
            const ordered_json *key = t.contains("tool_call_id") ? &t["tool_call_id"] : t.contains("id") ? &t["id"] : nullptr;
            if (!key || key->is_null()) {
                all = false;
                break;
            }
            std::string id = key->is_string() ? key->get<std::string>() : py_dumps(*key, false);
            auto it = ids.find(id);
            if (it == ids.end()) {
                all = false;
                break;
            }
            order.push_back({it->second.first, k});
        }
        if (all) {
            std::vector<ordered_json> run;
            std::stable_sort(order.begin(), order.end(),
                             [](const auto &a, const auto &b) { return a.first < b.first; });
            for (auto &[pos, k] : order) {
                ordered_json t = m[k];
                const ordered_json &key = t.contains("tool_call_id") ? t["tool_call_id"] : t["id"];
                std::string id = key.is_string() ? key.get<std::string>() : py_dumps(key, false);
                const std::string &name = ids[id].second;
                t["tool"] = name;
                if (t.contains("name")) t["name"] = name;
                run.push_back(std::move(t));
            }
            for (size_t k = i; k < j; k++) m[k] = run[k - i];
        }
        i = j;
    }
    return m;
}

std::string tools_json(const ordered_json &tools) { return py_dumps(py_sort_keys(tools), true); }

}  // namespace

std::string xtml_join(const std::vector<XSegment> &segs) {
    std::string s;
    for (const auto &x : segs) s += x.text;
    return s;
}

bool xtml_render(const XtmlInput &in, std::vector<XSegment> *out, std::string *err) {
    out->clear();
    if (in.thinking && in.thinking_effort) {
        const std::string &e = *in.thinking_effort;
        if (e != "low" && e != "high" && e != "max")
            return *err = "Unsupported thinking_effort='" + e + "'; supported values are ['high', 'low', 'max'].", false;
    }
    Renderer r{in, out};
    const ordered_json msgs = reorder_tool_results(in.messages.is_array() ? in.messages : ordered_json::array());

    if (in.tools.is_array() && !in.tools.empty())
        r.system_note("tool-declare", "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n" +
                                          tools_json(in.tools) + "\n```");
    if (in.thinking && in.thinking_effort)
        r.system_note("thinking-effort",
                      "`thinking_effort` guides on how much to think in your thinking channel (not including the "
                      "response channel), supported values include `low`, `medium`, `high`, and `max`.\nNow the "
                      "system is invoked with `thinking_effort=" +
                          *in.thinking_effort + "`.");

    const ordered_json *last_assistant = nullptr;
    int tool_index = 0;
    for (const auto &m : msgs) {
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) continue;
        const std::string role = m["role"].get<std::string>();
        const ordered_json content = m.contains("content") ? m["content"] : ordered_json();
        std::vector<std::pair<std::string, std::string>> attrs{{"role", role}};
        if ((role == "user" || role == "system" || role == "assistant") && Renderer::truthy(m, "name"))
            attrs.push_back({"name", Renderer::attr_str(m["name"])});
        if (role == "user") {
            r.open("message", attrs);
            if (!r.content(content, err)) return false;
            r.end_message();
        } else if (role == "system") {
            if (m.contains("tools") && m["tools"].is_array() && !m["tools"].empty()) {
                r.system_note("tool-declare",
                              "## New Tools Available\nThe system dynamically extends the toolset via lazy-loading.\n"
                              "You have access to all existing and extended tools.\nHere are the specs for the "
                              "extended tools.\n\n```json\n" +
                                  tools_json(m["tools"]) + "\n```");
                continue;
            }
            r.open("message", attrs);
            if (!r.content(content, err)) return false;
            r.end_message();
        } else if (role == "assistant") {
            last_assistant = &m;
            tool_index = 0;
            r.open("message", attrs);
            if (in.thinking) {
                std::string reasoning;
                for (const char *k : {"reasoning_content", "reasoning"}) {
                    if (m.contains(k) && m[k].is_string() && !m[k].get<std::string>().empty()) {
                        reasoning = m[k].get<std::string>();
                        break;
                    }
                }
                r.open("think", {});
                if (!is_blank(reasoning) && !r.text(reasoning, err)) return false;
                r.close("think");
            }
            r.open("response", {});
            if (!r.content(content, err)) return false;
            r.close("response");
            if (m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty()) {
                r.open("tools", {});
                int i = 0;
                for (const auto &call : m["tool_calls"]) {
                    i++;
                    if (!call.is_object()) return *err = "Kimi K3 tool calls must be objects.", false;
                    std::string name;
                    const ordered_json *nv = nullptr;
                    if (call.contains("function") && call["function"].is_object()) {
                        if (call["function"].contains("name")) nv = &call["function"]["name"];
                    } else if (call.contains("name")) {
                        nv = &call["name"];
                    }
                    if (!nv || !nv->is_string() || nv->get<std::string>().empty())
                        return *err = "Kimi K3 tool calls require a non-empty function name.", false;
                    name = nv->get<std::string>();
                    Args a;
                    if (!normalize_args(call, &a, err)) return false;
                    r.open("call", {{"tool", name}, {"index", std::to_string(i)}});
                    if (a.raw) {
                        r.open("json", {{"type", "object"}});
                        r.plain(*a.raw);
                        r.close("json");
                    } else {
                        for (auto it = a.obj.begin(); it != a.obj.end(); ++it) {
                            std::string type, val = value_text(it.value(), &type);
                            r.open("argument", {{"key", it.key()}, {"type", type}});
                            r.plain(val);
                            r.close("argument");
                        }
                    }
                    r.close("call");
                }
                r.close("tools");
            }
            r.end_message();
        } else if (role == "tool") {
            tool_index++;
            std::string name;
            if (m.contains("tool") && !m["tool"].is_null()) name = Renderer::attr_str(m["tool"]);
            else if (m.contains("name") && !m["name"].is_null()) name = Renderer::attr_str(m["name"]);
            else if (last_assistant && last_assistant->contains("tool_calls") &&
                     (*last_assistant)["tool_calls"].is_array() &&
                     (int)(*last_assistant)["tool_calls"].size() >= tool_index) {
                const auto &c = (*last_assistant)["tool_calls"][(size_t)tool_index - 1];
                if (c.is_object() && c.contains("function") && c["function"].is_object() &&
                    c["function"].contains("name") && c["function"]["name"].is_string())
                    name = c["function"]["name"].get<std::string>();
                else if (c.is_object() && c.contains("name") && c["name"].is_string())
                    name = c["name"].get<std::string>();
            }
            if (name.empty())
                return *err = "Kimi K3 tool messages need a resolvable tool name: carry `tool`/`name`, or match a "
                              "preceding assistant tool_call by order.",
                       false;
            r.open("message", {{"role", "tool"}, {"tool", name}, {"index", std::to_string(tool_index)}});
            if (!r.content(content, err)) return false;
            r.end_message();
        }
    }

    if (in.tool_choice == "required")
        r.system_note("tool-choice",
                      "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.");
    else if (in.tool_choice == "none")
        r.system_note("tool-choice", "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in "
                                     "the next message.");

    if (in.response_format.is_object() && in.response_format.contains("type") &&
        in.response_format["type"].is_string()) {
        const std::string t = in.response_format["type"].get<std::string>();
        const std::string head = "The system is invoked with `response_format=" + t +
                                 "`.\nYour response must be raw JSON data without markdown code blocks (```json) or "
                                 "any additional formatting.";
        if (t == "json_object") {
            r.system_note("response-format", head);
        } else if (t == "json_schema") {
            ordered_json schema;
            if (in.response_format.contains("json_schema")) {
                const ordered_json &js = in.response_format["json_schema"];
                if (js.is_object() && js.contains("schema")) schema = js["schema"];
                else if (js.is_object() && js.contains("json_schema")) schema = js["json_schema"];
                else schema = js;
            }
            r.system_note("response-format", head + "\nThe JSON data must match the following schema:\n```json\n" +
                                                 py_dumps(py_sort_keys(schema), true) + "\n```");
        }
    }

    if (in.add_generation_prompt) {
        r.open("message", {{"role", "assistant"}});
        r.open(in.thinking ? "think" : "response", {});
    }
    if (in.image_prompts && r.images_used != in.image_prompts->size())
        return *err = "image prompt count " + std::to_string(in.image_prompts->size()) +
                      " != consumed placeholder count " + std::to_string(r.images_used),
               false;
    return true;
}

}  // namespace sluice::server
