#include "convert/trunk.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <mutex>

#include "convert/numeric.h"
#include "convert/util.h"

namespace sluice::convert {

static constexpr int64_t kGroup = 128;

uint64_t trunk_row_bytes(int fmt, int64_t n) {
    switch (fmt) {
        case kQ8G: return static_cast<uint64_t>(n);
        case kQ4G: return static_cast<uint64_t>(n / 2);
        case kQ3G: return static_cast<uint64_t>((3 * n + 7) / 8 + 1);  // +1 guard byte
        default: return static_cast<uint64_t>(n * 4);
    }
}

void quantize_rows(const float* x, int64_t rows, int64_t N, int fmt, uint8_t* payload, uint16_t* scales,
                   bool vision_floor) {
    const int64_t ng = (N + kGroup - 1) / kGroup;
    const int64_t n = ng * kGroup;
    const uint64_t rb = trunk_row_bytes(fmt, n);
    const float qmax = fmt == kQ8G ? 127.0f : fmt == kQ4G ? 7.0f : 3.0f;
    const float lo = fmt == kQ8G ? -127.0f : fmt == kQ4G ? -8.0f : -4.0f;
    const float hi = qmax;
    std::vector<int8_t> q(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * N;
        for (int64_t g = 0; g < ng; ++g) {
            const int64_t c0 = g * kGroup, c1 = std::min(N, c0 + kGroup);
            float amax = 0.0f;  // padding elements are 0 and cannot raise it
            for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(xr[c]));
            const float scale = vision_floor ? std::max(amax / qmax, 1e-12f)
                                             : std::max(amax, 1e-8f) / qmax;  // f32 division, as torch does
            for (int64_t c = c0; c < c0 + kGroup; ++c) {
                const float v = c < N ? xr[c] / scale : 0.0f;
                // nearbyint in the default mode is round-half-even (torch.round).
                float rq = std::nearbyint(v);
                rq = std::min(hi, std::max(lo, rq));
                q[static_cast<size_t>(c)] = static_cast<int8_t>(rq);
            }
            scales[r * ng + g] = f32_to_f16(scale);  // codes used the f32 scale
        }
        uint8_t* out = payload + static_cast<uint64_t>(r) * rb;
        if (fmt == kQ8G) {
            std::memcpy(out, q.data(), static_cast<size_t>(n));
        } else if (fmt == kQ4G) {
            for (int64_t j = 0; j < n / 2; ++j)
                out[j] = static_cast<uint8_t>(((q[2 * j] + 8) & 15) | (((q[2 * j + 1] + 8) & 15) << 4));
        } else {
            std::memset(out, 0, rb);  // includes the guard byte
            for (int64_t i = 0; i < n; ++i) {
                const uint32_t field = static_cast<uint32_t>(q[static_cast<size_t>(i)] + 4) & 7u;
                const int64_t p = 3 * i;
                out[p >> 3] |= static_cast<uint8_t>(field << (p & 7));
                if ((p & 7) > 5) out[(p >> 3) + 1] |= static_cast<uint8_t>(field >> (8 - (p & 7)));
            }
        }
    }
}

bool plan_trunk(const Checkpoint& ck, const ModelPlan& mp, int trunk_bits, bool trunk8, std::vector<TrunkEntry>* out,
                uint64_t* total, std::string* err) {
    out->clear();
    uint64_t off = 0;
    // Source names ascending (std::map order = byte order): a renamed router
    // keeps its source position, as in warp.
    for (const std::string& src : ck.names()) {
        if (!is_trunk_tensor(src)) continue;
        TrunkEntry t;
        t.source = src;
        t.name = trunk_rename(src, mp.deepseek_naming);
        if (t.name.size() > 127) {
            *err = "tensor name longer than 127 bytes (warp truncates it): " + t.name;
            return false;
        }
        for (char ch : t.name)
            if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7E || ch == '"' || ch == '\\') {
                *err = "tensor name is not plain ASCII (warp reads manifest strings raw): " + t.name;
                return false;
            }
        if (!ck.logical_shape(src, &t.shape, err)) return false;
        if (t.shape.empty()) t.shape = {1};  // a scalar: the engine refuses shape []
        int64_t numel = 1;
        for (int64_t d : t.shape) numel *= d;
        if (numel == 0) {
            *err = "tensor '" + src + "' has no elements";
            return false;
        }
        t.cols = t.shape.back();
        t.rows = numel / t.cols;
        if (t.shape.size() == 1 || numel < 65536) t.fmt = kF32;
        else if (t.name.ends_with("embed_tokens.weight") || t.name.ends_with("lm_head.weight") || trunk8) t.fmt = kQ8G;
        else t.fmt = trunk_bits == 8 ? kQ8G : trunk_bits == 3 ? kQ3G : kQ4G;
        // K3's vision tower: what the reference's second step
        // (requant_vision.py) does, done here so a converted K3 needs none.
        // Every tower/projector tensor that is quantized or has more than two
        // dimensions becomes Q8G with a flattened shape: 4-D [a,b,c,d] ->
        // [a, b*c*d] (the patch kernel's 588-wide rows), 3-D [a,b,c] ->
        // [a*b, c]. Small F32 matrices and the norms stay F32 (VISION.md §1.3).
        const bool vis = t.name.rfind("vision_tower.", 0) == 0 || t.name.rfind("mm_projector.", 0) == 0;
        if (vis && (t.fmt != kF32 || t.shape.size() > 2) && t.shape.size() <= 4) {
            const int64_t src_cols = t.shape.back();
            if (t.shape.size() == 4) t.shape = {t.shape[0], t.shape[1] * t.shape[2] * t.shape[3]};
            if (t.shape.size() == 3) t.shape = {t.shape[0] * t.shape[1], t.shape[2]};
            t.cols = t.shape.back();
            t.rows = numel / t.cols;
            t.src_rows_per_row = t.cols / src_cols;
            t.fmt = kQ8G;
            t.vision_requant = true;
        }
        t.off = off;
        if (t.fmt == kF32) {
            t.bytes = static_cast<uint64_t>(numel) * 4;
        } else {
            const int64_t ng = (t.cols + kGroup - 1) / kGroup;
            const uint64_t payload = trunk_row_bytes(t.fmt, ng * kGroup) * static_cast<uint64_t>(t.rows);
            t.scale_off = off + payload;
            t.bytes = payload + 2 * static_cast<uint64_t>(t.rows * ng);
        }
        off += t.bytes;
        out->push_back(std::move(t));
    }
    *total = off;
    return true;
}

bool write_trunk(const Checkpoint& ck, const std::vector<TrunkEntry>& plan, uint64_t total, const std::string& dir,
                 int jobs, ProgressSink* sink, std::string* err) {
    std::string tmp;
    int fd = -1;
    if (!create_temp(dir + "/trunk.bin", &fd, &tmp, err)) return false;
    // Work items: row chunks of at most ~1M elements, so a huge embedding
    // never needs to be resident at once.
    struct Item { size_t t; int64_t r0, r1; };
    std::vector<Item> items;
    for (size_t i = 0; i < plan.size(); ++i) {
        const int64_t step = std::max<int64_t>(1, (1 << 20) / std::max<int64_t>(1, plan[i].cols));
        for (int64_t r = 0; r < plan[i].rows; r += step) items.push_back({i, r, std::min(plan[i].rows, r + step)});
    }
    std::mutex mu;
    uint64_t written = 0;
    const bool ok = parallel_for(static_cast<int64_t>(items.size()), jobs, [&](int64_t k, std::string* e) {
        const Item& it = items[static_cast<size_t>(k)];
        const TrunkEntry& t = plan[it.t];
        const int64_t rows = it.r1 - it.r0;
        std::vector<float> x(static_cast<size_t>(rows * t.cols));
        const int64_t per = t.src_rows_per_row;
        if (!ck.read_rows_f32(t.source, it.r0 * per, it.r1 * per, x.data(), e)) return false;
        uint64_t nbytes;
        if (t.fmt == kF32) {
            nbytes = x.size() * 4;
            if (!pwrite_all(fd, x.data(), nbytes, t.off + static_cast<uint64_t>(it.r0 * t.cols) * 4, tmp, e)) return false;
        } else {
            const int64_t ng = (t.cols + kGroup - 1) / kGroup;
            const uint64_t rb = trunk_row_bytes(t.fmt, ng * kGroup);
            std::vector<uint8_t> payload(static_cast<size_t>(rb * rows));
            std::vector<uint16_t> sc(static_cast<size_t>(rows * ng));
            quantize_rows(x.data(), rows, t.cols, t.fmt, payload.data(), sc.data(), t.vision_requant);
            std::vector<uint8_t> scb(sc.size() * 2);
            for (size_t i = 0; i < sc.size(); ++i) { scb[2 * i] = sc[i] & 0xFF; scb[2 * i + 1] = sc[i] >> 8; }
            if (!pwrite_all(fd, payload.data(), payload.size(), t.off + rb * static_cast<uint64_t>(it.r0), tmp, e)) return false;
            if (!pwrite_all(fd, scb.data(), scb.size(), t.scale_off + 2 * static_cast<uint64_t>(it.r0 * ng), tmp, e)) return false;
            nbytes = payload.size() + scb.size();
        }
        std::lock_guard<std::mutex> lk(mu);
        written += nbytes;
        if (sink) sink->progress("trunk", static_cast<int64_t>(written), static_cast<int64_t>(total), "trunk.bin bytes");
        return true;
    }, err);
    if (!ok) {
        ::close(fd);
        return false;
    }
    if (::ftruncate(fd, static_cast<off_t>(total)) != 0) {
        *err = tmp + ": ftruncate failed";
        ::close(fd);
        return false;
    }
    if (!fsync_and_close(fd, tmp, err)) return false;
    return rename_file(tmp, dir + "/trunk.bin", err);
}

}  // namespace sluice::convert
