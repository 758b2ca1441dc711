#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/checked_file.h"

namespace sluice {

bool TraceWriter::begin(const std::string &dir, int n_tokens, std::string *err) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
        *err = "cannot create trace directory " + dir + ": " + ec.message();
        return false;
    }
    dir_ = dir;
    n_ = n_tokens;
    return true;
}

void TraceWriter::callback(void *user, int layer, const char *stage, int pos, const float *x, int hidden) {
    auto *tw = static_cast<TraceWriter *>(user);
    tw->hidden_ = hidden;
    if (layer + 1 > tw->n_layers_) tw->n_layers_ = layer + 1;
    auto key = std::make_pair(layer, std::string(stage));
    auto it = tw->index_.find(key);
    if (it == tw->index_.end()) {
        it = tw->index_.emplace(key, tw->entries_.size()).first;
        tw->entries_.push_back({layer, stage, std::vector<float>((size_t)tw->n_ * hidden, 0.0f)});
    }
    if (pos < 0 || pos >= tw->n_) return;
    std::copy(x, x + hidden, tw->entries_[it->second].data.begin() + (size_t)pos * hidden);
}

// Each file through PATH.tmp and a rename (common/checked_file.h): a FIFO
// or a link to a device at a stage's name is refused, a symlink is replaced
// rather than written through, and a failed write leaves no partial file.
static bool write_file(const std::string &path, const void *p, size_t bytes, std::string *err) {
    Status st = write_output_file(path, std::string_view(static_cast<const char *>(p), bytes), false);
    if (!st) *err = st.message();
    return st.is_ok();
}

bool TraceWriter::finish(const std::vector<float> &logits, int vocab, const std::string &producer, std::string *err) {
    // A trace.json from an earlier run would describe the files this one is
    // replacing; it goes first, and a failure removes what this run wrote,
    // so a failed trace leaves no partial set that looks complete.
    std::vector<std::string> written;
    const std::string index = dir_ + "/trace.json";
    if (std::string why = nonregular_output_reason(index); !why.empty()) {
        *err = why;
        return false;
    }
    std::remove(index.c_str());
    auto undo = [&] {
        for (const std::string &w : written) std::remove(w.c_str());
        return false;
    };
    nlohmann::json j;
    j["producer"] = producer;
    j["hidden"] = hidden_;
    j["n_tokens"] = n_;
    j["n_layers"] = n_layers_;
    j["vocab"] = vocab;
    nlohmann::json stages = nlohmann::json::array();
    for (const Entry &e : entries_) {
        char name[64];
        if (e.layer < 0) std::snprintf(name, sizeof name, "%s.f32", e.stage.c_str());
        else std::snprintf(name, sizeof name, "L%03d.%s.f32", e.layer, e.stage.c_str());
        if (!write_file(dir_ + "/" + name, e.data.data(), e.data.size() * 4, err)) return undo();
        written.push_back(dir_ + "/" + name);
        stages.push_back({{"layer", e.layer}, {"stage", e.stage}, {"file", name}});
    }
    j["stages"] = stages;
    j["logits"] = "logits.f32";
    if (!write_file(dir_ + "/logits.f32", logits.data(), logits.size() * 4, err)) return undo();
    written.push_back(dir_ + "/logits.f32");
    // trace.json last: its presence says every file it names is complete.
    const std::string s = j.dump(1);
    return write_file(dir_ + "/trace.json", s.data(), s.size(), err) || undo();
}

}  // namespace sluice
