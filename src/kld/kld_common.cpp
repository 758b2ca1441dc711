#include "kld/kld_common.h"

#include "format/file_sha256.h"

#include "common/checked_file.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sluice::kld {

namespace fs = std::filesystem;

Status err(Code c, std::string msg) {
    switch (c) {
        case Code::ok: return {};
        case Code::usage: return {SLUICE_E_ARG, std::move(msg)};
        case Code::identity: return {SLUICE_E_UNSUPPORTED, std::move(msg)};
        case Code::format: return {SLUICE_E_FORMAT, std::move(msg)};
        case Code::io: return {SLUICE_E_IO, std::move(msg)};
        case Code::nonfinite: return {SLUICE_E_RANGE, std::move(msg)};
        case Code::resource: return {SLUICE_E_NOMEM, std::move(msg)};
        case Code::engine: break;
    }
    return {SLUICE_E_STATE, std::move(msg)};
}

Code code_of(const Status& s) {
    switch (s.code()) {
        case SLUICE_OK: return Code::ok;
        case SLUICE_E_ARG: return Code::usage;
        case SLUICE_E_UNSUPPORTED: return Code::identity;
        case SLUICE_E_FORMAT: return Code::format;
        case SLUICE_E_IO: return Code::io;
        case SLUICE_E_RANGE: return Code::nonfinite;
        case SLUICE_E_NOMEM: return Code::resource;
        default: return Code::engine;  // STATE, BUSY: the engine could not run
    }
}

Status from_status(const Status& s) {
    if (s.is_ok()) return {};
    return err(s.code() == SLUICE_E_IO ? Code::io : Code::format, s.message());
}

const char* code_name(Code c) {
    switch (c) {
        case Code::ok: return "ok";
        case Code::usage: return "usage";
        case Code::identity: return "identity mismatch";
        case Code::format: return "format";
        case Code::io: return "I/O";
        case Code::nonfinite: return "non-finite data";
        case Code::resource: return "resource plan over the cap";
        case Code::engine: return "engine";
    }
    return "?";
}

// ---- SHA-256 ----------------------------------------------------------
Status sha256_file(const std::string& path, std::string* hex, uint64_t* size) {
    return from_status(::sluice::sha256_file(path, hex, size));
}

// ---- files ------------------------------------------------------------
// Receipts, suite manifests, token files and sources: regular files only (a
// FIFO must not hang `kld report`), bounded (4 GiB is far above any suite).
Status read_file(const std::string& path, std::string* out) {
    return from_status(::sluice::read_input_file(path, size_t{1} << 32, out));
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
    return from_status(::sluice::write_output_file(path, bytes));
}

Status refuse_failed_integrity(const json& r, const std::string& path) {
    if (!r.is_object() || !r.contains("sluice") || !r["sluice"].is_object()) return {};
    const json& s = r["sluice"];
    if (!s.contains("integrity")) return {};
    const json& i = s["integrity"];
    if (i.is_string() && (i.get<std::string>() == "verified" || i.get<std::string>().rfind("not checked", 0) == 0))
        return {};
    return err(Code::identity, path + ": integrity: " + (i.is_string() ? i.get<std::string>() : i.dump()) +
                                   " (a candidate or reference file did not match its recorded SHA-256): the receipt is "
                                   "refused, not ranked; rerun `kld compare` on intact files");
}

bool file_exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

Status make_dirs(const std::string& path) {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) return err(Code::io, path + ": cannot create directory: " + ec.message());
    return {};
}

std::string join_path(const std::string& a, const std::string& b) {
    if (a.empty()) return b;
    if (a.back() == '/') return a + b;
    return a + "/" + b;
}

void remove_tmp_files(const std::string& dir) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) fs::remove(it->path(), ec);
    }
}

// ---- JSON in Python's exact text form -----------------------------------
namespace {

// Python float repr: shortest round-trip digits, fixed notation when the
// decimal exponent is in [-4, 16), otherwise d.ddde±XX.
void put_float(std::string& o, double v) {
    if (std::isnan(v)) { o += "NaN"; return; }
    if (std::isinf(v)) { o += v > 0 ? "Infinity" : "-Infinity"; return; }
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string s(buf, r.ptr);
    bool neg = s[0] == '-';
    if (neg) s.erase(0, 1);
    size_t epos = s.find('e');
    int e = std::atoi(s.c_str() + epos + 1);
    std::string digits;
    for (size_t i = 0; i < epos; ++i)
        if (s[i] != '.') digits += s[i];
    if (neg) o += '-';
    if (e < -4 || e >= 16) {
        o += digits[0];
        if (digits.size() > 1) { o += '.'; o.append(digits, 1, std::string::npos); }
        o += 'e';
        o += e < 0 ? '-' : '+';
        int ae = std::abs(e);
        if (ae < 10) o += '0';
        o += std::to_string(ae);
    } else if (e < 0) {
        o += "0.";
        o.append(size_t(-e - 1), '0');
        o += digits;
    } else {
        size_t ip = size_t(e) + 1;
        if (digits.size() <= ip) {
            o += digits;
            o.append(ip - digits.size(), '0');
            o += ".0";
        } else {
            o.append(digits, 0, ip);
            o += '.';
            o.append(digits, ip, std::string::npos);
        }
    }
}

void put_string(std::string& o, const std::string& s, bool ascii) {
    if (!ascii) {
        o += json(s).dump(-1, ' ', false);
        return;
    }
    o += json(s).dump(-1, ' ', true);  // \uXXXX escapes with surrogate pairs, as Python
}

void put(std::string& o, const json& j, int depth, bool ascii) {
    switch (j.type()) {
        case json::value_t::object: {
            if (j.empty()) { o += "{}"; return; }
            o += "{\n";
            size_t i = 0;
            for (auto it = j.begin(); it != j.end(); ++it, ++i) {  // std::map: sorted keys
                o.append(size_t(2 * (depth + 1)), ' ');
                put_string(o, it.key(), ascii);
                o += ": ";
                put(o, it.value(), depth + 1, ascii);
                if (i + 1 < j.size()) o += ',';
                o += '\n';
            }
            o.append(size_t(2 * depth), ' ');
            o += '}';
            return;
        }
        case json::value_t::array: {
            if (j.empty()) { o += "[]"; return; }
            o += "[\n";
            for (size_t i = 0; i < j.size(); ++i) {
                o.append(size_t(2 * (depth + 1)), ' ');
                put(o, j[i], depth + 1, ascii);
                if (i + 1 < j.size()) o += ',';
                o += '\n';
            }
            o.append(size_t(2 * depth), ' ');
            o += ']';
            return;
        }
        case json::value_t::number_float: put_float(o, j.get<double>()); return;
        case json::value_t::string: put_string(o, j.get<std::string>(), ascii); return;
        default: o += j.dump(); return;  // ints, bools, null print alike
    }
}

}  // namespace

std::string dump_py(const json& j, bool ascii) {
    std::string o;
    put(o, j, 0, ascii);
    o += '\n';
    return o;
}

std::string compact_int_array(const std::vector<int32_t>& ids) {
    std::string s = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(ids[i]);
    }
    s += ']';
    return s;
}

Status parse_json(const std::string& text, const std::string& what, json* out) {
    try {
        *out = json::parse(text);
    } catch (const std::exception& e) {
        return err(Code::format, what + ": invalid JSON: " + e.what());
    }
    return {};
}

namespace {
const char* const kPyLiterals[3][2] = {{"-Infinity", "\x01-inf"}, {"Infinity", "\x01+inf"}, {"NaN", "\x01nan"}};

void restore_py_literals(json& j) {
    if (j.is_structured()) {
        for (auto& v : j) restore_py_literals(v);
    } else if (j.is_string()) {
        const std::string& s = j.get_ref<const std::string&>();
        if (s == kPyLiterals[0][1]) j = -INFINITY;
        else if (s == kPyLiterals[1][1]) j = INFINITY;
        else if (s == kPyLiterals[2][1]) j = NAN;
    }
}
}  // namespace

Status parse_json_py(const std::string& text, const std::string& what, json* out) {
    std::string t;
    t.reserve(text.size());
    bool in_str = false, esc = false, any = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_str) {
            t += c;
            if (esc) esc = false;
            else if (c == '\\') esc = true;
            else if (c == '"') in_str = false;
            continue;
        }
        if (c == '"') {
            in_str = true;
            t += c;
            continue;
        }
        bool lit = false;
        for (const auto& l : kPyLiterals) {
            const size_t n = std::strlen(l[0]);
            if (text.compare(i, n, l[0]) == 0) {  // a placeholder string, restored below
                t += "\"\\u0001" + std::string(l[1] + 1) + "\"";
                i += n - 1;
                lit = any = true;
                break;
            }
        }
        if (!lit) t += c;
    }
    SLUICE_TRY(parse_json(t, what, out));
    if (any) restore_py_literals(*out);
    return {};
}

Status parse_window_list(const std::string& spec, int count, std::vector<int>* out) {
    std::set<int> s;
    size_t i = 0;
    auto num = [&](int* v) -> bool {
        size_t j = i;
        while (j < spec.size() && std::isdigit(static_cast<unsigned char>(spec[j]))) ++j;
        if (j == i || j - i > 9) return false;
        *v = std::stoi(spec.substr(i, j - i));
        i = j;
        return true;
    };
    while (i < spec.size()) {
        int a, b;
        if (!num(&a)) return err(Code::usage, "--windows: bad list '" + spec + "'");
        b = a;
        if (i < spec.size() && spec[i] == '-') {
            ++i;
            if (!num(&b) || b < a) return err(Code::usage, "--windows: bad range in '" + spec + "'");
        }
        for (int w = a; w <= b; ++w) {
            if (w >= count)
                return err(Code::usage, "--windows: window " + std::to_string(w) + " >= window count " +
                                            std::to_string(count));
            s.insert(w);
        }
        if (i < spec.size()) {
            if (spec[i] != ',') return err(Code::usage, "--windows: bad list '" + spec + "'");
            ++i;
        }
    }
    if (s.empty()) return err(Code::usage, "--windows: empty selection");
    out->assign(s.begin(), s.end());
    return {};
}

std::string utc_now_iso() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

}  // namespace sluice::kld
