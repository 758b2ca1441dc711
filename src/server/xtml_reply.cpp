// K3 reply parsing (see xtml_reply.h; CHAT_K3.md §9).
#include "server/xtml_reply.h"
#include "server/ascii_space.h"

#include <algorithm>

#include "server/pyjson.h"

namespace sluice::server {

using nlohmann::ordered_json;

namespace {

const char *const kMarkers[] = {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"};

std::string unescape(std::string v) {
    std::string a;
    for (size_t i = 0; i < v.size();) {
        if (v.compare(i, 6, "&quot;") == 0) a += '"', i += 6;
        else a += v[i++];
    }
    std::string b;
    for (size_t i = 0; i < a.size();) {
        if (a.compare(i, 5, "&amp;") == 0) b += '&', i += 5;
        else b += a[i++];
    }
    return b;
}

// "NAME k="v" k2=v2": the name, then attributes (quoted, or up to a space;
// an unterminated quote takes the rest).
void parse_header(const std::string &h, std::string *name, std::vector<std::pair<std::string, std::string>> *attrs) {
    size_t sp = h.find(' ');
    *name = h.substr(0, sp);
    if (sp == std::string::npos) return;
    size_t i = sp;
    while (i < h.size()) {
        while (i < h.size() && h[i] == ' ') i++;
        if (i >= h.size()) break;
        size_t k0 = i;
        while (i < h.size() && h[i] != '=' && h[i] != ' ') i++;
        std::string key = h.substr(k0, i - k0);
        std::string val;
        if (i < h.size() && h[i] == '=') {
            i++;
            if (i < h.size() && h[i] == '"') {
                size_t q = h.find('"', i + 1);
                if (q == std::string::npos) val = h.substr(i + 1), i = h.size();
                else val = h.substr(i + 1, q - i - 1), i = q + 1;
            } else {
                size_t e = h.find(' ', i);
                if (e == std::string::npos) e = h.size();
                val = h.substr(i, e - i);
                i = e;
            }
        }
        attrs->push_back({key, unescape(val)});
    }
}

bool parse_json(const std::string &s, ordered_json *out) {
    try {
        *out = ordered_json::parse(s);
        return true;
    } catch (const std::exception &) {
        return false;
    }
}

bool parse_int(const std::string &s, int *out) {
    std::string t = trim(s);
    if (t.empty()) return false;
    size_t i = (t[0] == '-' || t[0] == '+') ? 1 : 0;
    if (i >= t.size()) return false;
    for (size_t j = i; j < t.size(); j++)
        if (t[j] < '0' || t[j] > '9') return false;
    try {
        *out = std::stoi(t);
    } catch (const std::exception &) {
        return false;
    }
    return true;
}

}  // namespace

std::string XToolCall::arguments() const { return raw ? *raw : py_dumps(args, false); }

XtmlReply::XtmlReply(const std::string &starts_in) { stack_.push_back(starts_in); }

size_t XtmlReply::calls_named() const {
    size_t n = 0;
    for (const auto &c : calls_) n += !c.name.empty();
    return n;
}

void XtmlReply::route(std::string_view t) {
    if (t.empty() || finished_) return;
    if (header_) return header_->second.append(t), void();
    if (json_) return json_->append(t), void();
    if (arg_ && !arg_->key.empty()) return arg_->text.append(t), void();
    const std::string top = stack_.empty() ? "" : stack_.back();
    if (top == "think") reasoning_.append(t);
    else if (top == "tools" || top == "call") return;
    else content_.append(t);
}

void XtmlReply::finish_argument() {
    if (!arg_) return;
    Arg a = std::move(*arg_);
    arg_.reset();
    if (calls_.empty() || a.key.empty()) return;
    ordered_json v;
    const std::string t = trim(a.text);
    if (a.type == "string") v = a.text;
    else if (a.type == "null") v = nullptr;
    else if (a.type == "boolean") {
        std::string l = t;
        std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return (char)std::tolower(c); });
        if (l == "true") v = true;
        else if (l == "false") v = false;
        else v = a.text;
    } else if (a.type == "number" || a.type == "object" || a.type == "array") {
        if (!parse_json(t, &v)) v = a.text;
    } else if (!parse_json(a.text, &v)) {
        v = a.text;
    }
    calls_.back().args[a.key] = v;
}

void XtmlReply::apply_header() {
    auto [is_open, text] = std::move(*header_);
    header_.reset();
    std::string name;
    std::vector<std::pair<std::string, std::string>> attrs;
    parse_header(text, &name, &attrs);
    auto attr = [&](const char *k) -> std::optional<std::string> {
        for (const auto &[key, v] : attrs)
            if (key == k) return v;
        return std::nullopt;
    };
    if (is_open) {
        stack_.push_back(name);
        if (name == "call") {
            XToolCall c;
            c.name = attr("tool").value_or("");
            int idx = 0;
            auto is = attr("index");
            c.index = is && parse_int(*is, &idx) ? idx : (int)calls_.size() + 1;
            auto id = attr("id");
            c.id = id ? *id : "call_" + std::to_string(c.index);
            calls_.push_back(std::move(c));
        } else if (name == "argument") {
            arg_ = Arg{attr("key").value_or(""), attr("type").value_or(""), ""};
        } else if (name == "json") {
            json_ = std::string();
        }
        return;
    }
    if (name == "argument") finish_argument();
    if (name == "json" && json_) {
        if (!calls_.empty()) calls_.back().raw = *json_;
        json_.reset();
    }
    if (name.empty()) {
        if (!stack_.empty()) stack_.pop_back();
        return;
    }
    auto it = std::find(stack_.rbegin(), stack_.rend(), name);
    if (it != stack_.rend()) stack_.erase(std::prev(it.base()), stack_.end());
}

void XtmlReply::feed_marker(XMarker m) {
    if (finished_) return;
    switch (m) {
    case XMarker::end_of_msg: finished_ = true; break;
    case XMarker::open: header_ = std::make_pair(true, std::string()); break;
    case XMarker::close: header_ = std::make_pair(false, std::string()); break;
    case XMarker::sep:
        if (header_) apply_header();
        break;
    }
}

void XtmlReply::feed_text(std::string_view text) { route(text); }

void XtmlReply::feed_scan(std::string_view chunk) {
    pending_.append(chunk);
    for (;;) {
        size_t best = std::string::npos;
        int which = -1;
        for (int k = 0; k < 4; k++) {
            size_t p = pending_.find(kMarkers[k]);
            if (p < best) best = p, which = k;
        }
        if (which < 0) break;
        route(std::string_view(pending_).substr(0, best));
        pending_.erase(0, best + std::string(kMarkers[which]).size());
        feed_marker((XMarker)which);
    }
    // Hold back a suffix that is a proper prefix of a marker.
    size_t hold = 0;
    for (const char *mk : kMarkers) {
        std::string_view m(mk);
        for (size_t k = std::min(pending_.size(), m.size() - 1); k > hold; k--)
            if (std::string_view(pending_).substr(pending_.size() - k) == m.substr(0, k)) {
                hold = k;
                break;
            }
    }
    route(std::string_view(pending_).substr(0, pending_.size() - hold));
    pending_.erase(0, pending_.size() - hold);
}

void XtmlReply::finish() {
    if (!pending_.empty()) {
        std::string p = std::move(pending_);
        pending_.clear();
        route(p);
    }
    if (header_) {
        auto [is_open, text] = std::move(*header_);
        header_.reset();
        route((is_open ? std::string("<|open|>") : std::string("<|close|>")) + text);
    }
    if (json_) {
        if (!calls_.empty()) calls_.back().raw = *json_;
        json_.reset();
    }
    finish_argument();
}

ordered_json XtmlReply::message() const {
    ordered_json m = ordered_json::object();
    m["role"] = "assistant";
    m["content"] = content_.empty() ? ordered_json(nullptr) : ordered_json(content_);
    if (!reasoning_.empty()) m["reasoning_content"] = reasoning_;
    if (!calls_.empty()) {
        ordered_json a = ordered_json::array();
        for (const auto &c : calls_)
            a.push_back(ordered_json{{"id", c.id},
                                     {"type", "function"},
                                     {"function", ordered_json{{"name", c.name}, {"arguments", c.arguments()}}}});
        m["tool_calls"] = a;
    }
    return m;
}

int mark_invalid_arguments(ordered_json *message) {
    if (!message->contains("tool_calls") || !(*message)["tool_calls"].is_array()) return 0;
    int n = 0;
    size_t i = 0;
    for (auto &tc : (*message)["tool_calls"]) {
        const std::string args = tc["function"]["arguments"].get<std::string>();
        try {
            const auto parsed = nlohmann::json::parse(args);  // only whether it parses
            (void)parsed;
        } catch (const nlohmann::json::exception &e) {  // parse_error, and out_of_range for a number past double
            tc["error"] = ordered_json{
                {"type", "invalid_arguments"},
                {"message", "tool call " + std::to_string(i) + " (" + tc["function"]["name"].get<std::string>() +
                                "): its arguments are not valid JSON: " + e.what()}};
            n++;
        }
        i++;
    }
    return n;
}

}  // namespace sluice::server
