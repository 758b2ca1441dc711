#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/commands.h"

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

static bool write_file(const std::string &path, const float *p, size_t n) {
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    bool ok = std::fwrite(p, 4, n, f) == n;
    return (std::fclose(f) == 0) && ok;
}

bool TraceWriter::finish(const std::vector<float> &logits, int vocab, const std::string &producer, std::string *err) {
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
        if (!write_file(dir_ + "/" + name, e.data.data(), e.data.size())) {
            *err = "cannot write " + dir_ + "/" + name;
            return false;
        }
        stages.push_back({{"layer", e.layer}, {"stage", e.stage}, {"file", name}});
    }
    j["stages"] = stages;
    j["logits"] = "logits.f32";
    if (!write_file(dir_ + "/logits.f32", logits.data(), logits.size())) {
        *err = "cannot write " + dir_ + "/logits.f32";
        return false;
    }
    FILE *f = std::fopen((dir_ + "/trace.json").c_str(), "wb");
    if (!f) {
        *err = "cannot write " + dir_ + "/trace.json";
        return false;
    }
    std::string s = j.dump(1);
    bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
    return (std::fclose(f) == 0) && ok;
}

}  // namespace sluice
