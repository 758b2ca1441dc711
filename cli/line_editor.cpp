#include "cli/line_editor.h"

#include <fcntl.h>
#include <histedit.h>
#include <langinfo.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cwchar>
#include <filesystem>

namespace sluice {

struct LineEditor::Impl {
    EditLine *el = nullptr;
    History *hist = nullptr;
    HistEvent ev{};
    volatile std::sig_atomic_t *interrupted = nullptr;
    std::string prompt, history_file, old_locale;
    std::mbstate_t mb{};
};

namespace {

const char *prompt_of(EditLine *el) {
    LineEditor::Impl *im = nullptr;
    el_get(el, EL_CLIENTDATA, &im);
    return im ? im->prompt.c_str() : "";
}

// Our own character reader: libedit's retries a read that a signal
// interrupted, so a Ctrl-C at the prompt would be swallowed and the chat
// would not end. This one gives up (-1) once chat's SIGINT flag is set and
// decodes the terminal's bytes in the current locale (UTF-8, see below).
int read_char(EditLine *el, wchar_t *wc) {
    LineEditor::Impl *im = nullptr;
    el_get(el, EL_CLIENTDATA, &im);
    for (;;) {
        char b;
        const ssize_t n = ::read(0, &b, 1);
        if (n == 1) {
            const size_t r = std::mbrtowc(wc, &b, 1, &im->mb);
            if (r == (size_t)-2) continue;  // inside a multi-byte character
            if (r == (size_t)-1) {          // an invalid byte: shown as U+FFFD, the line goes on
                im->mb = std::mbstate_t{};
                *wc = 0xFFFD;
            }
            return 1;
        }
        if (n == 0) return 0;
        if (errno == EINTR) {
            if (*im->interrupted) return -1;
            continue;
        }
        return -1;
    }
}

bool utf8_codeset() {
    const char *cs = nl_langinfo(CODESET);
    return cs && (std::strcmp(cs, "UTF-8") == 0 || std::strcmp(cs, "utf8") == 0);
}

}  // namespace

std::string chat_history_path() {
    const char *state = std::getenv("XDG_STATE_HOME");
    if (state && *state) return std::string(state) + "/sluice/chat_history";
    const char *home = std::getenv("HOME");
    if (home && *home) return std::string(home) + "/.local/state/sluice/chat_history";
    return {};
}

LineEditor::LineEditor(volatile std::sig_atomic_t *interrupted) : impl_(std::make_unique<Impl>()) {
    Impl &im = *impl_;
    im.interrupted = interrupted;
    // The model reads and writes UTF-8: libedit measures and decodes
    // characters by LC_CTYPE, which is "C" (ASCII) until set, so accented
    // or CJK input would be garbled. The user's locale if it is UTF-8,
    // else C.UTF-8; restored on exit.
    if (const char *cur = std::setlocale(LC_CTYPE, nullptr)) im.old_locale = cur;
    if (!std::setlocale(LC_CTYPE, "") || !utf8_codeset()) std::setlocale(LC_CTYPE, "C.UTF-8");
    im.el = el_init("sluice", stdin, stdout, stderr);
    im.hist = history_init();
    if (!im.el || !im.hist) return;
    history(im.hist, &im.ev, H_SETSIZE, 1000);
    history(im.hist, &im.ev, H_SETUNIQUE, 1);
    el_set(im.el, EL_CLIENTDATA, &im);
    el_set(im.el, EL_EDITOR, "emacs");
    // libedit's own handlers would catch SIGINT, reset the terminal and
    // re-send the signal with kill(0, ...) to the whole process group; chat
    // keeps its own handler (Ctrl-C stops a reply, at the prompt ends chat).
    el_set(im.el, EL_SIGNAL, 0);
    el_set(im.el, EL_PROMPT, prompt_of);
    el_set(im.el, EL_GETCFN, read_char);
    el_set(im.el, EL_HIST, history, im.hist);
    el_source(im.el, nullptr);  // the user's ~/.editrc, as other libedit programs read it
    // History across sessions when the state folder is writable; otherwise
    // it stays in memory for this chat only.
    const std::string path = chat_history_path();
    if (path.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd < 0) return;
    struct stat st {};
    const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    ::close(fd);
    if (!regular) return;  // never read or replace a FIFO or device named like the history file
    im.history_file = path;
    if (st.st_size > 0) history(im.hist, &im.ev, H_LOAD, path.c_str());
}

LineEditor::~LineEditor() {
    Impl &im = *impl_;
    if (im.hist && !im.history_file.empty()) {
        // Written beside and renamed, so a failed save never leaves a cut
        // history file in place of the old one.
        const std::string tmp = im.history_file + ".tmp";
        if (history(im.hist, &im.ev, H_SAVE, tmp.c_str()) >= 0) {
            ::chmod(tmp.c_str(), 0600);
            if (std::rename(tmp.c_str(), im.history_file.c_str()) != 0) std::remove(tmp.c_str());
        } else {
            std::remove(tmp.c_str());
        }
    }
    if (im.el) el_end(im.el);
    if (im.hist) history_end(im.hist);
    if (!im.old_locale.empty()) std::setlocale(LC_CTYPE, im.old_locale.c_str());
}

bool LineEditor::ok() const { return impl_->el && impl_->hist; }

const std::string &LineEditor::history_file() const { return impl_->history_file; }

bool LineEditor::read_line(const char *prompt, std::string *line) {
    Impl &im = *impl_;
    im.prompt = prompt;
    im.mb = std::mbstate_t{};
    int n = 0;
    const char *s = el_gets(im.el, &n);
    if (!s || n <= 0) {
        line->clear();
        return false;
    }
    line->assign(s, (size_t)n);
    while (!line->empty() && (line->back() == '\n' || line->back() == '\r')) line->pop_back();
    return true;
}

void LineEditor::remember(const std::string &line) {
    if (!line.empty()) history(impl_->hist, &impl_->ev, H_ENTER, line.c_str());
}

}  // namespace sluice
