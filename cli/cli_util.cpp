#include "common/checked_file.h"
#include "cli/cli_util.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

namespace sluice {

namespace {
constexpr unsigned long long kMaxPrompt = 1ull << 30;

bool read_stream(std::istream &in, std::string *out) {
    out->clear();
    char buf[65536];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        out->append(buf, (size_t)in.gcount());
        if (out->size() > kMaxPrompt) return false;
    }
    return true;
}
}  // namespace

bool read_text_file(const std::string &path, std::string *out, std::string *err) {
    // A FIFO or device given as --file is refused, not waited on.
    if (Status st = read_input_file(path, kMaxPrompt, out); !st) {
        *err = st.message();
        return false;
    }
    return true;
}

int read_prompt(const std::string &arg, bool arg_given, const std::string &file, std::string *out, std::string *err) {
    if (!file.empty()) {
        if (arg_given) {
            *err = "give the prompt once: PROMPT, or --file F";
            return 2;
        }
        return read_text_file(file, out, err) ? 0 : 1;
    }
    if ((arg_given && arg == "-") || (!arg_given && !::isatty(0))) {
        if (!read_stream(std::cin, out)) {
            *err = "stdin: more than 1 GiB";
            return 1;
        }
        // Nothing given and nothing piped (an empty or closed stdin): a
        // missing prompt, not an empty one. `-` asks for stdin explicitly.
        if (!arg_given && out->empty()) {
            *err = "no prompt: give PROMPT, --file F, or - (or pipe it) for stdin; stdin was empty";
            return 2;
        }
        return 0;
    }
    if (!arg_given) {
        *err = "no prompt: give PROMPT, --file F, or - (or pipe it) for stdin";
        return 2;
    }
    *out = arg;
    return 0;
}

namespace {
bool g_redraw = false;
std::chrono::steady_clock::time_point g_t0;
}  // namespace

void print_startup_progress(void *, const char *stage, double) {
    const std::string s = stage ? stage : "";
    const bool tty = ::isatty(2);
    if (s == "manifest") {
        g_t0 = std::chrono::steady_clock::now();
        g_redraw = false;
        return;
    }
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_t0).count();
    if (s == "ready") {
        if (g_redraw) std::fputs("\r\033[K", stderr);
        g_redraw = false;
        std::fprintf(stderr, "sluice: model ready in %.1f s\n", t);
        return;
    }
    const char *what = s == "trunk"     ? "loading the trunk"
                       : s == "verify"  ? "checking every record's CRC32"
                       : s == "vision"  ? "loading the vision tower"
                       : s == "cache"   ? "reserving the expert cache"
                       : s == "hotlist" ? "pre-warming the cache from the hotlist"
                                        : stage;
    if (tty) {
        std::fprintf(stderr, "\r\033[Ksluice: %s (%.1f s)", what, t);
        std::fflush(stderr);
        g_redraw = true;
    } else if (s == "trunk") {
        std::fprintf(stderr, "sluice: %s\n", what);  // one line in logs; "ready" follows
    }
}

void end_startup_progress() {
    if (g_redraw) std::fputs("\n", stderr);
    g_redraw = false;
}

std::string checkpoint_hint(const std::string &path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(path, ec) || fs::exists(fs::path(path) / "manifest.json", ec)) return {};
    bool safetensors = false;
    for (const auto &e : fs::directory_iterator(path, ec)) {
        const std::string n = e.path().filename().string();
        if (n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0) safetensors = true;
    }
    if (fs::exists(fs::path(path) / "config.json", ec) && safetensors)
        return path + " is a Hugging Face checkpoint, not a container: run `sluice convert --src " + path +
               " --out OUT.waste` first";
    return {};  // the library's open names what is missing
}

const char *newline_if_mid_line(bool stdout_ends_line) {
    if (stdout_ends_line) return "";
    struct stat a, b;
    if (::fstat(1, &a) != 0 || ::fstat(2, &b) != 0) return "";
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino ? "\n" : "";
}

std::string json_quote(const std::string &s) {
    std::string o = "\"";
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = (unsigned char)s[i];
        // Length of a valid UTF-8 sequence at i, 0 if invalid.
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size()) n = 0;
        for (size_t k = 1; k < n; k++)
            if (((unsigned char)s[i + k] >> 6) != 2) n = 0;
        if (n == 0) {
            o += "\\ufffd";
            i++;
            continue;
        }
        if (n == 1) {
            if (c == '"') o += "\\\"";
            else if (c == '\\') o += "\\\\";
            else if (c == '\n') o += "\\n";
            else if (c == '\t') o += "\\t";
            else if (c == '\r') o += "\\r";
            else if (c < 0x20 || c == 0x7f) {
                char b[8];
                std::snprintf(b, sizeof b, "\\u%04x", c);
                o += b;
            } else o += (char)c;
        } else {
            o.append(s, i, n);
        }
        i += n;
    }
    return o + "\"";
}

unsigned long long peak_rss_bytes() {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (unsigned long long)ru.ru_maxrss * 1024ull;
}

}  // namespace sluice
