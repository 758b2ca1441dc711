// libFuzzer harness: a festr2 v0 KLD suite (KLD.md §1.5-§1.7) materialised
// from the input: part 0 is suite-manifest.json, part i+1 the token file of
// window i when the manifest parses far enough to name one (a relative path
// without ".."). load_suite then checks everything; a loaded suite is
// checked against a vocabulary and its windows selected.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "kld/io/suite.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    const auto part = fuzz::split(data, size, 9);
    const std::string dir = fuzz::temp_dir() + "/suite";
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    fuzz::put("suite/suite-manifest.json", part[0]);
    const auto j = nlohmann::json::parse(part[0], nullptr, false);
    if (j.is_object() && j.contains("windows") && j["windows"].is_array())
        for (size_t i = 0; i < j["windows"].size() && i + 1 < part.size(); i++) {
            const auto &w = j["windows"][i];
            if (!w.is_object() || !w.contains("token_file") || !w["token_file"].is_string()) continue;
            const std::string rel = w["token_file"].get<std::string>();
            if (rel.empty() || rel[0] == '/' || rel.find("..") != std::string::npos || rel.size() > 200) continue;
            fuzz::put("suite/" + rel, part[i + 1]);
        }
    sluice::kld::Suite s;
    if (!sluice::kld::load_suite(dir, {}, &s).is_ok()) return 0;
    (void)sluice::kld::check_suite_vocab(s, 1000);
    std::vector<int> pos;
    sluice::kld::WindowSel sel;
    sel.quick = true;
    (void)sluice::kld::select_windows(s, sel, &pos);
    sel = {};
    sel.list = "0-3,7";
    (void)sluice::kld::select_windows(s, sel, &pos);
    return 0;
}
