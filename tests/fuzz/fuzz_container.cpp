// libFuzzer harness: a WASTE v0 container directory materialised from the
// input: manifest.json, trunk.bin, codebooks.bin and one expert bank (parts
// 0-3, cut by fuzz::kSep), the bank written under every file name the
// manifest's "layers" give (relative, without ".."). Container::open parses
// the manifest and decodes the codebook records; every trunk entry is then
// described and its first rows read and dequantized, and small entries
// loaded whole (the trunk tensor rows).
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "format/container.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    const auto part = fuzz::split(data, size, 4);
    const std::string dir = fuzz::temp_dir() + "/c.waste";
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    fuzz::put("c.waste/manifest.json", part[0]);
    fuzz::put("c.waste/trunk.bin", part[1]);
    fuzz::put("c.waste/codebooks.bin", part[2]);
    const auto j = nlohmann::json::parse(part[0], nullptr, false);
    if (j.is_object() && j.contains("layers") && j["layers"].is_object())
        for (const auto &[k, v] : j["layers"].items()) {
            if (!v.is_object() || !v.contains("file") || !v["file"].is_string()) continue;
            const std::string rel = v["file"].get<std::string>();
            if (rel.empty() || rel[0] == '/' || rel.find("..") != std::string::npos || rel.size() > 200) continue;
            fuzz::put("c.waste/" + rel, part[3]);
        }
    // Issue 32: one input in eight (chosen by its last byte) puts a special
    // file where a container file belongs: a FIFO, a directory, a symlink to
    // a device or to a FIFO. The open must refuse it at once (a FIFO that
    // blocked would be reported as a timeout).
    if (size > 0 && data[size - 1] % 8 == 7) {
        static const char *names[] = {"manifest.json", "trunk.bin", "codebooks.bin", "experts-L1.bin", "experts-L0.bin"};
        const int pick = (data[size - 1] / 8) % 5, kind = (data[size - 1] / 40) % 4;
        const std::string f = dir + "/" + names[pick];
        std::filesystem::remove(f, ec);
        if (kind == 0) (void)::mkfifo(f.c_str(), 0600);
        else if (kind == 1) std::filesystem::create_directory(f, ec);
        else if (kind == 2) std::filesystem::create_symlink("/dev/zero", f, ec);
        else {
            (void)::mkfifo((f + ".fifo").c_str(), 0600);
            std::filesystem::create_symlink(f + ".fifo", f, ec);
        }
    }
    sluice::Container c;
    if (!c.open(dir).is_ok()) return 0;
    (void)c.check_integrity();
    std::vector<float> buf;
    volatile float sink = 0;
    for (int64_t b = 0; b < c.n_books(); b++) sink = sink + c.book(b)[8 * c.book_entries() - 1];
    for (const auto &e : c.manifest().trunk) {
        sluice::QTensor q;
        if (!c.describe_entry(e, nullptr, &q).is_ok()) continue;
        if (q.cols <= 0 || q.cols > (1 << 16) || q.rows <= 0) continue;
        const int64_t r1 = std::min<int64_t>(q.rows, 4);
        buf.assign((size_t)(r1 * q.cols), 0.0f);
        if (c.read_row_f32(q, q.rows - 1, buf.data()).is_ok()) sink = sink + buf[0];
        if (c.read_rows_f32(e, q, 0, r1, buf.data()).is_ok()) sink = sink + buf[(size_t)(r1 * q.cols - 1)];
        if (q.numel() <= (1 << 16)) {
            sluice::QTensor full;
            (void)c.load_entry(e, nullptr, false, &full);
        }
    }
    return 0;
}
