// Shared helpers for the convert tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "convert/convert.h"

namespace ctest {

namespace fs = std::filesystem;

inline std::string fixtures() { return SLUICE_FIXTURES; }
inline std::string source_dir() { return fixtures() + "/hf/tiny-kimi-linear"; }
inline std::string warp_dir(const std::string& recipe) { return fixtures() + "/warp/converted-" + recipe + ".waste"; }
inline bool have_fixtures() { return fs::exists(source_dir() + "/config.json") && fs::exists(warp_dir("default")); }

inline std::string slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// A fresh writable directory under the system temp dir, removed at scope end.
struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/sluice-convert-test-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string sub(const std::string& n) const { return path + "/" + n; }
};

// Options for the recipes warp's fixtures were made with.
inline sluice::convert::ConvertOptions recipe(const std::string& name) {
    sluice::convert::ConvertOptions o;
    o.source_dir = source_dir();
    o.quiet = true;
    if (name == "trunk3") o.trunk_bits = 3;
    if (name == "vq4p") { o.stages = 4; o.entries = 64; o.index_bits = 6; }
    if (name == "vq2r") { o.stages = 2; o.trunk8 = true; }
    return o;
}

// Collects messages; optionally kills the process at a chosen event.
class QuietSink : public sluice::convert::ProgressSink {
public:
    void progress(const std::string&, int64_t, int64_t, const std::string&) override {}
    void message(const std::string& line) override { lines += line + "\n"; }
    std::string lines;
};

// Byte comparison of two files: returns mismatching byte count (size
// difference counts as mismatches) and fills `compared`.
inline int64_t diff_bytes(const std::string& a, const std::string& b, int64_t* compared) {
    const std::string x = slurp(a), y = slurp(b);
    const size_t n = std::min(x.size(), y.size());
    int64_t bad = static_cast<int64_t>(std::max(x.size(), y.size()) - n);
    for (size_t i = 0; i < n; ++i) bad += x[i] != y[i];
    *compared = static_cast<int64_t>(n);
    return bad;
}

struct StTensor {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::string bytes;
};

template <class V>
std::string raw(const std::vector<V>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(V));
}

// Writes a safetensors file; `fix` may edit the header JSON first and `cut`
// drops that many bytes from the end (a truncated download).
inline void write_safetensors(const std::string& path, const std::vector<StTensor>& ts,
                              const std::function<void(nlohmann::json&)>& fix = nullptr, size_t cut = 0) {
    nlohmann::json h = nlohmann::json::object();
    std::string data;
    for (const StTensor& t : ts) {
        h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
        data += t.bytes;
    }
    if (fix) fix(h);
    const std::string hs = h.dump();
    std::string out(8, '\0');
    const uint64_t n = hs.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
    out += hs + data;
    if (cut) out.resize(out.size() - cut);
    std::ofstream(path, std::ios::binary) << out;
}

}  // namespace ctest
