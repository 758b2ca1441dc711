#include "runtime/hotlist.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/checked_file.h"
#include "format/f16.h"
#include "format/file.h"
#include "format/io_fault.h"

namespace sluice {

static constexpr uint32_t kMagic = 0x47535557u;  // "WUSG"

Status save_hotlist(const std::string &path, uint64_t clock, const std::vector<HotEntry> &entries) {
    std::vector<uint8_t> buf(16 + 16 * entries.size(), 0);
    auto put32 = [&](size_t off, uint32_t v) { std::memcpy(buf.data() + off, &v, 4); };
    auto put16 = [&](size_t off, uint16_t v) { std::memcpy(buf.data() + off, &v, 2); };
    put32(0, kMagic);
    put32(4, 1);
    std::memcpy(buf.data() + 8, &clock, 8);
    for (size_t i = 0; i < entries.size(); i++) {
        const size_t o = 16 + 16 * i;
        put16(o, (uint16_t)entries[i].layer);
        put16(o + 2, (uint16_t)entries[i].expert);
        put32(o + 4, entries[i].hits);
        put32(o + 8, entries[i].last_seen);
        put32(o + 12, 0);
    }
    OutputFile out;
    SLUICE_TRY(out.create(path));
    const std::string tmp = out.temp_path();
    bool ok = out.write(buf.data(), buf.size()).is_ok();
    int werr = ok ? 0 : errno;
    if (ok && (werr = hooked_write_error(tmp)) != 0) ok = false;  // fault injection (tests)
    if (!ok) {
        out.discard();
        return io_error(path + ": cannot write the hotlist" + (werr ? std::string(": ") + std::strerror(werr) : ""));
    }
    return out.commit(false);
}

Status load_hotlist(const std::string &path, std::vector<HotEntry> *out) {
    File f;
    SLUICE_TRY(f.open_read(path));
    if (f.size() < 16 || (f.size() - 16) % 16 != 0 || f.size() > (64ull << 20))
        return format_error(path + ": not a usage file (size " + std::to_string(f.size()) + ")");
    std::vector<uint8_t> buf((size_t)f.size());
    SLUICE_TRY(f.pread_all(buf.data(), buf.size(), 0));
    if (rd32(buf.data()) != kMagic) return format_error(path + ": bad magic (expected WUSG)");
    if (rd32(buf.data() + 4) != 1) return format_error(path + ": usage file version is not 1");
    out->clear();
    for (size_t o = 16; o < buf.size(); o += 16)
        out->push_back({rd16(buf.data() + o), rd16(buf.data() + o + 2), rd32(buf.data() + o + 4), rd32(buf.data() + o + 8)});
    std::sort(out->begin(), out->end(), [](const HotEntry &a, const HotEntry &b) {
        if (a.hits != b.hits) return a.hits > b.hits;
        return a.layer != b.layer ? a.layer < b.layer : a.expert < b.expert;
    });
    return Status::ok();
}

}  // namespace sluice
