// Shared by the libFuzzer harnesses whose parser only takes a path: one
// private temp directory per process (mkdtemp once, removed at exit), and a
// splitter that cuts one fuzz input into the several files a parser reads.
#pragma once
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace fuzz {

inline const std::string &temp_dir() {
    static const std::string dir = [] {
        std::string tmpl = std::filesystem::temp_directory_path().string() + "/sluice-fuzz-XXXXXX";
        if (!::mkdtemp(tmpl.data())) std::abort();
        static std::string keep = tmpl;
        std::atexit([] { std::error_code ec; std::filesystem::remove_all(keep, ec); });
        return tmpl;
    }();
    return dir;
}

// Writes bytes to temp_dir()/name and returns the full path.
inline std::string put(const std::string &name, std::string_view bytes) {
    const std::string path = temp_dir() + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();
    if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
    std::fclose(f);
    return path;
}

// The parts of an input separated by kSep (a marker no parser gives meaning
// to), so the fuzzer mutates several files at once; missing parts are empty.
inline constexpr std::string_view kSep = "\n@@sluice-fuzz@@\n";
inline std::vector<std::string_view> split(const uint8_t *data, size_t size, size_t parts) {
    std::string_view in(reinterpret_cast<const char *>(data), size);
    std::vector<std::string_view> out;
    while (out.size() + 1 < parts) {
        const size_t at = in.find(kSep);
        if (at == std::string_view::npos) break;
        out.push_back(in.substr(0, at));
        in.remove_prefix(at + kSep.size());
    }
    out.push_back(in);
    out.resize(parts);
    return out;
}

}  // namespace fuzz
