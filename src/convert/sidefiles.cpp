#include "convert/sidefiles.h"

#include <algorithm>
#include <map>

#include "convert/gguf_source.h"
#include "convert/util.h"

namespace sluice::convert {

std::string builtin_chat_json(const std::string& family) {
    // Byte for byte warp's examples/chat-kimi-linear.json (one-space indent,
    // trailing newline), which it installs for KimiLinear releases.
    if (family == "kimi-linear")
        return "{\n"
               " \"system\": [\"<|im_system|>system<|im_middle|>\", \"<|im_end|>\"],\n"
               " \"user\": [\"<|im_user|>user<|im_middle|>\", \"<|im_end|>\"],\n"
               " \"assistant\": [\"<|im_assistant|>assistant<|im_middle|>\", \"<|im_end|>\"],\n"
               " \"open\": \"<|im_assistant|>assistant<|im_middle|>\"\n"
               "}\n";
    return "";
}

// Every "<|...|>" marker in s.
static std::vector<std::string> markers(const std::string& s) {
    std::vector<std::string> out;
    size_t p = 0;
    while ((p = s.find("<|", p)) != std::string::npos) {
        const size_t q = s.find("|>", p + 2);
        if (q == std::string::npos) break;
        out.push_back(s.substr(p, q + 2 - p));
        p = q + 2;
    }
    return out;
}

static bool plain_text(const std::string& s) {
    for (unsigned char c : s)
        if (c < 0x20 || c == '"' || c == '\\' || c == 0x7F) return false;
    return true;
}

bool write_side_files(const std::string& src, const std::string& dir, const ModelPlan& mp, ProgressSink* sink,
                      std::vector<std::string>* written, std::string* err) {
    std::string data;
    for (const char* name : {"tiktoken.model", "tokenizer.model"}) {
        if (file_exists(src + "/" + name)) {
            if (!read_file(src + "/" + name, &data, err)) return false;
            if (!write_file_atomic(dir + "/tokenizer.model", data, err)) return false;
            written->push_back("tokenizer.model");
            break;
        }
    }

    std::vector<std::string> specials;
    ojson tc;
    const std::string tcp = src + "/tokenizer_config.json";
    if (file_exists(tcp)) {
        if (!read_file(tcp, &data, err)) return false;
        try {
            tc = ojson::parse(data);
        } catch (const std::exception& e) {
            *err = tcp + ": not valid JSON: " + e.what();
            return false;
        }
        if (tc.is_object() && tc.contains("added_tokens_decoder") && tc["added_tokens_decoder"].is_object()) {
            std::map<int64_t, std::string> byid;
            for (auto it = tc["added_tokens_decoder"].begin(); it != tc["added_tokens_decoder"].end(); ++it) {
                char* end = nullptr;
                const long long id = std::strtoll(it.key().c_str(), &end, 10);
                if (it.key().empty() || *end != '\0' || id < 0 || !it.value().is_object() ||
                    !it.value().contains("content") || !it.value()["content"].is_string()) {
                    *err = tcp + ": added_tokens_decoder entry '" + it.key() + "' is not {id: {\"content\": ...}}";
                    return false;
                }
                byid[id] = it.value()["content"].get<std::string>();
            }
            if (!byid.empty()) {
                ojson arr = ojson::array();
                for (const auto& [id, text] : byid) {
                    // warp scans specials.json raw, without unescaping: text
                    // that would need an escape cannot round-trip. UTF-8 is
                    // written unescaped (warp matches raw bytes).
                    if (!plain_text(text) && sink)
                        sink->message("warning: special token " + std::to_string(id) +
                                      " needs JSON escapes; warp would match it literally");
                    ojson o;
                    o["id"] = id;
                    o["text"] = text;
                    arr.push_back(o);
                    specials.push_back(text);
                }
                if (!write_file_atomic(dir + "/specials.json", arr.dump(1, ' ', false), err)) return false;
                written->push_back("specials.json");
            }
        }
    }

    // The release's own template, for other tools (warp never reads it).
    std::string tmpl;
    bool have_tmpl = false;
    if (file_exists(src + "/chat_template.jinja")) {
        if (!read_file(src + "/chat_template.jinja", &tmpl, err)) return false;
        have_tmpl = true;
    } else if (file_exists(src + "/chat_template.json")) {
        if (!read_file(src + "/chat_template.json", &tmpl, err)) return false;
        have_tmpl = true;
    } else if (tc.is_object() && tc.contains("chat_template") && tc["chat_template"].is_string()) {
        tmpl = tc["chat_template"].get<std::string>();
        have_tmpl = true;
    }
    if (have_tmpl) {
        if (!write_file_atomic(dir + "/chat_template.jinja", tmpl, err)) return false;
        written->push_back("chat_template.jinja");
    }

    // vision.json (FORMAT.md 9), only for a multimodal release.
    const ojson outer = mp.config.contains("_outer") ? mp.config["_outer"] : ojson();
    if (outer.is_object() && outer.contains("vision_config") && outer["vision_config"].is_object()) {
        ojson v = ojson::object();
        for (auto it = outer["vision_config"].begin(); it != outer["vision_config"].end(); ++it)
            if (it.key().empty() || it.key()[0] != '_') v[it.key()] = it.value();
        v["vt_rms_eps"] = 1.1920928955078125e-07;
        if (outer.contains("media_placeholder_token_id")) v["media_placeholder_token_id"] = outer["media_placeholder_token_id"];
        v["max_patches"] = 1024;
        ojson pp;
        const std::string ppp = src + "/preprocessor_config.json";
        if (file_exists(ppp)) {
            if (!read_file(ppp, &data, err)) return false;
            try {
                pp = ojson::parse(data);
            } catch (const std::exception& e) {
                *err = ppp + ": not valid JSON: " + e.what();
                return false;
            }
            if (pp.is_object() && pp.contains("media_proc_cfg") && pp["media_proc_cfg"].is_object()) pp = pp["media_proc_cfg"];
        } else if (sink) {
            sink->message("warning: no preprocessor_config.json; vision.json uses image mean/std 0.5");
        }
        for (const char* k : {"image_mean", "image_std", "patch_size", "in_patch_limit", "patch_limit_on_one_side"})
            if (pp.is_object() && pp.contains(k)) v[k] = pp[k];
        for (const char* k : {"image_mean", "image_std"})
            if (!v.contains(k)) v[k] = {0.5, 0.5, 0.5};
        if (!write_file_atomic(dir + "/vision.json", v.dump(1, ' ', true), err)) return false;
        written->push_back("vision.json");
    }

    const std::string chat = builtin_chat_json(mp.family);
    if (!chat.empty()) {
        bool ok = true;
        for (const std::string& m : markers(chat))
            if (!specials.empty() && std::find(specials.begin(), specials.end(), m) == specials.end()) {
                ok = false;
                if (sink) sink->message("note: chat.json not installed: marker " + m + " is not a special token");
                break;
            }
        if (ok) {
            if (!write_file_atomic(dir + "/chat.json", chat, err)) return false;
            written->push_back("chat.json");
        }
    }
    return true;
}

bool write_gguf_side_files(const GgufSource& g, const std::string& dir, const ModelPlan& mp, ProgressSink* sink,
                           std::vector<std::string>* written, std::string* err) {
    std::string ranks, specials_json, tmpl, why;
    if (!g.tokenizer_files(&ranks, &specials_json, &tmpl, &why)) return true;  // noted at open
    if (!write_file_atomic(dir + "/tokenizer.model", ranks, err)) return false;
    written->push_back("tokenizer.model");
    if (!write_file_atomic(dir + "/specials.json", specials_json, err)) return false;
    written->push_back("specials.json");
    if (!tmpl.empty()) {
        if (!write_file_atomic(dir + "/chat_template.jinja", tmpl, err)) return false;
        written->push_back("chat_template.jinja");
    }
    const std::string chat = builtin_chat_json(mp.family);
    if (!chat.empty()) {
        const auto sp = ojson::parse(specials_json, nullptr, false);
        std::vector<std::string> texts;
        if (sp.is_array())
            for (const auto& e : sp) texts.push_back(e.value("text", ""));
        for (const std::string& m : markers(chat))
            if (std::find(texts.begin(), texts.end(), m) == texts.end()) {
                if (sink) sink->message("note: chat.json not installed: marker " + m + " is not a special token");
                return true;
            }
        if (!write_file_atomic(dir + "/chat.json", chat, err)) return false;
        written->push_back("chat.json");
    }
    return true;
}

}  // namespace sluice::convert
