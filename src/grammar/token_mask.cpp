// The token mask (see token_mask.h).
#include "grammar/token_mask.h"

#include <algorithm>
#include <numeric>

namespace sluice::grammar {

namespace {

// Plain string text: complete, valid UTF-8 with no '"', '\\' or control byte.
bool plain_string_text(const std::string &s) {
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    size_t i = 0, n = s.size();
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            if (c < 0x20 || c == '"' || c == '\\') return false;
            i++;
            continue;
        }
        int len;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else return false;
        if (i + (size_t)len > n) return false;
        if (p[i + 1] < lo || p[i + 1] > hi) return false;
        for (int k = 2; k < len; k++)
            if (p[i + (size_t)k] < 0x80 || p[i + (size_t)k] > 0xBF) return false;
        i += (size_t)len;
    }
    return true;
}

}  // namespace

TokenTable::Order TokenTable::make_order(std::vector<int32_t> ids, const std::vector<std::string> &bytes) {
    Order o;
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
        return bytes[(size_t)a] != bytes[(size_t)b] ? bytes[(size_t)a] < bytes[(size_t)b] : a < b;
    });
    o.ids = std::move(ids);
    o.lcp.assign(o.ids.size(), 0);
    for (size_t i = 1; i < o.ids.size(); i++) {
        const std::string &a = bytes[(size_t)o.ids[i - 1]], &b = bytes[(size_t)o.ids[i]];
        uint32_t k = 0;
        while (k < a.size() && k < b.size() && a[k] == b[k]) k++;
        o.lcp[i] = k;
    }
    return o;
}

TokenTable::TokenTable(std::vector<std::string> bytes, const std::vector<bool> &usable) : bytes_(std::move(bytes)) {
    std::vector<int32_t> all, unsafe;
    for (size_t i = 0; i < bytes_.size(); i++) {
        if (i >= usable.size() || !usable[i] || bytes_[i].empty()) continue;
        all.push_back((int32_t)i);
        if (plain_string_text(bytes_[i])) safe_by_len_.push_back((int32_t)i);
        else unsafe.push_back((int32_t)i);
    }
    std::stable_sort(safe_by_len_.begin(), safe_by_len_.end(),
                     [&](int32_t a, int32_t b) { return bytes_[(size_t)a].size() < bytes_[(size_t)b].size(); });
    for (int32_t id : safe_by_len_) safe_len_.push_back((uint32_t)bytes_[(size_t)id].size());
    std::vector<bool> byte_seen(256, false);
    for (int32_t id : all)
        if (bytes_[(size_t)id].size() == 1) byte_seen[(unsigned char)bytes_[(size_t)id][0]] = true;
    all_bytes_ = std::all_of(byte_seen.begin(), byte_seen.end(), [](bool b) { return b; });
    all_ = make_order(std::move(all), bytes_);
    unsafe_ = make_order(std::move(unsafe), bytes_);
}

size_t TokenTable::walk(const Matcher &m, const Order &o, std::vector<uint8_t> *allowed, uint32_t max_after,
                        uint32_t *min_after) const {
    const bool costed = max_after != kNoLimit || min_after;
    size_t count = 0;
    if (depth_.size() < 2) depth_.resize(2);
    depth_[0] = m.stacks();
    uint32_t valid = 0;  // depth_[0..valid] hold the states of the current prefix
    const size_t n = o.ids.size();
    for (size_t i = 0; i < n; i++) {
        const std::string &t = bytes_[(size_t)o.ids[i]];
        uint32_t k = std::min(i == 0 ? 0u : o.lcp[i], valid);
        if (depth_.size() < t.size() + 1) depth_.resize(t.size() + 1);
        bool ok = true;
        while (k < t.size()) {
            if (!m.step_into(depth_[k], (uint8_t)t[k], &depth_[k + 1])) {
                ok = false;
                break;
            }
            k++;
        }
        valid = k;
        if (ok && costed) {
            const uint32_t after = m.min_bytes_to_accept(depth_[k]);
            if (min_after) *min_after = std::min(*min_after, after);
            ok = after <= max_after;
            if (!ok) continue;  // refused for its cost, not its bytes: the prefix states stay valid
        }
        if (ok) {
            (*allowed)[(size_t)o.ids[i]] = 1;
            count++;
        } else {
            // Every following token that shares the refused prefix fails too.
            while (i + 1 < n && o.lcp[i + 1] > k) i++;
        }
    }
    return count;
}

size_t TokenTable::mask(const Matcher &m, std::vector<uint8_t> *allowed, uint32_t max_after,
                        uint32_t *min_after) const {
    allowed->assign(bytes_.size(), 0);
    if (min_after) *min_after = kNoLimit;
    if (m.dead()) return 0;
    uint32_t room = 0;
    if (m.in_plain_string(&room)) {
        size_t count = 0;
        // Plain text tokens that fit in the string's remaining budget. They
        // leave the string open, so the cost to complete stays what it is.
        const uint32_t after = max_after != kNoLimit || min_after ? m.min_bytes_to_accept() : 0;
        if (min_after && !safe_by_len_.empty() && safe_len_[0] <= room) *min_after = after;
        if (after <= max_after)
            for (size_t i = 0; i < safe_by_len_.size() && safe_len_[i] <= room; i++, count++)
                (*allowed)[(size_t)safe_by_len_[i]] = 1;
        uint32_t walked = kNoLimit;
        count += walk(m, unsafe_, allowed, max_after, min_after ? &walked : nullptr);
        if (min_after) *min_after = std::min(*min_after, walked);
        return count;
    }
    return walk(m, all_, allowed, max_after, min_after);
}

}  // namespace sluice::grammar
