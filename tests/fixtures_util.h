// Shared helpers for tests that read ../shared/fixtures.
#pragma once
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sluice_test {

inline std::string fixtures_dir() {
    if (const char *e = std::getenv("SLUICE_FIXTURES")) return e;
    return SLUICE_FIXTURES_DIR;
}
inline std::string warp_dir() { return fixtures_dir() + "/warp"; }
inline bool have_fixtures() { return std::filesystem::exists(warp_dir()); }

struct FixtureCase {
    std::string container;  // NAME
    int index = 0;
    std::vector<int32_t> ids;
    std::string logits, logits_chunked;
    std::vector<int32_t> greedy_next8;
    int vocab = 0;
};

inline std::vector<float> read_f32(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    std::vector<char> b((std::istreambuf_iterator<char>(f)), {});
    std::vector<float> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), v.size() * 4);
    return v;
}

inline std::vector<std::string> fixture_names() {
    std::vector<std::string> names;
    if (!have_fixtures()) return names;
    for (auto &e : std::filesystem::directory_iterator(warp_dir()))
        if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
    std::sort(names.begin(), names.end());
    return names;
}

inline std::vector<FixtureCase> fixture_cases(const std::string &name) {
    std::ifstream f(warp_dir() + "/" + name + ".json");
    nlohmann::json j = nlohmann::json::parse(f);
    std::vector<FixtureCase> out;
    int i = 0;
    for (auto &c : j["cases"]) {
        FixtureCase fc;
        fc.container = name;
        fc.index = i++;
        fc.ids = c["ids"].get<std::vector<int32_t>>();
        fc.logits = warp_dir() + "/" + c["logits"].get<std::string>();
        fc.logits_chunked = warp_dir() + "/" + c["logits_chunked"].get<std::string>();
        fc.greedy_next8 = c["greedy_next8"].get<std::vector<int32_t>>();
        fc.vocab = j["vocab"].get<int>();
        out.push_back(fc);
    }
    return out;
}

inline std::string container_path(const std::string &name) { return warp_dir() + "/" + name + ".waste"; }

struct DiffStats {
    double max_abs = 0, mean_abs = 0, corr = 0;
    int argmax_a = -1, argmax_b = -1;
};

inline DiffStats diff_stats(const std::vector<float> &a, const std::vector<float> &b) {
    DiffStats d;
    const size_t n = std::min(a.size(), b.size());
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    float ma = -INFINITY, mb = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        double x = a[i], y = b[i], e = std::fabs(x - y);
        d.max_abs = std::max(d.max_abs, e);
        d.mean_abs += e;
        sa += x, sb += y, saa += x * x, sbb += y * y, sab += x * y;
        if (a[i] > ma) ma = a[i], d.argmax_a = (int)i;
        if (b[i] > mb) mb = b[i], d.argmax_b = (int)i;
    }
    d.mean_abs /= (double)n;
    double cov = sab / n - (sa / n) * (sb / n), va = saa / n - (sa / n) * (sa / n), vb = sbb / n - (sb / n) * (sb / n);
    d.corr = cov / std::sqrt(va * vb);
    return d;
}

}  // namespace sluice_test
