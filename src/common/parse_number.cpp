#include "common/parse_number.h"

#include <algorithm>

#include "common/checked_math.h"

namespace sluice {

namespace {
std::string quoted(std::string_view s) {
    std::string r(1, '\'');
    r.append(s.data(), std::min<size_t>(s.size(), 40));
    r.append(s.size() > 40 ? "...'" : "'");
    return r;
}
bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
}  // namespace

bool parse_u64(std::string_view s, uint64_t *out, std::string *err, uint64_t max) {
    if (s.empty()) {
        *err = "an empty value is not a non-negative integer";
        return false;
    }
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') {
            *err = quoted(s) + " is not a non-negative integer";
            return false;
        }
        if (!checked_mul<uint64_t>(v, 10, &v) || !checked_add<uint64_t>(v, (uint64_t)(c - '0'), &v) || v > max) {
            *err = quoted(s) + " is larger than " + std::to_string(max);
            return false;
        }
    }
    *out = v;
    return true;
}

bool parse_id_list(std::string_view s, std::vector<int32_t> *ids, std::string *err) {
    const size_t first = ids->size();
    size_t i = 0;
    bool need_element = false;  // after a comma, an id must follow
    while (i < s.size()) {
        if (blank(s[i])) {
            i++;
            continue;
        }
        if (s[i] == ',') {
            if (need_element || ids->size() == first) {
                *err = "empty element in the id list " + quoted(s) + " (a comma with no id before it)";
                return false;
            }
            need_element = true;
            i++;
            continue;
        }
        size_t j = i;
        while (j < s.size() && s[j] != ',' && !blank(s[j])) j++;
        uint64_t v = 0;
        std::string e;
        if (!parse_u64(s.substr(i, j - i), &v, &e, INT32_MAX)) {
            *err = quoted(s.substr(i, j - i)) + " is not a token id: " + e;
            return false;
        }
        ids->push_back((int32_t)v);
        need_element = false;
        i = j;
    }
    if (need_element) {
        *err = "the id list " + quoted(s) + " ends with a comma";
        return false;
    }
    if (ids->size() == first) {
        *err = "no token ids given";
        return false;
    }
    return true;
}

}  // namespace sluice
