#include "cli/line_editor.h"

#include <fcntl.h>
#include <histedit.h>
#include <langinfo.h>
#include <sys/stat.h>
#include <unistd.h>

#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/checked_file.h"

namespace sluice {

struct LineEditor::Impl {
    EditLine *el = nullptr;
    History *hist = nullptr;
    HistEvent ev{};
    std::string prompt, history_file, old_locale;
};

namespace {

const char *prompt_of(EditLine *el) {
    LineEditor::Impl *im = nullptr;
    el_get(el, EL_CLIENTDATA, &im);
    return im ? im->prompt.c_str() : "";
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

LineEditor::LineEditor() : impl_(std::make_unique<Impl>()) {
    Impl &im = *impl_;
    // The model reads and writes UTF-8, and libedit decodes input by
    // LC_CTYPE, which is "C" until set: there it drops every non-ASCII
    // character (typing "é!" returned "!"). The user's locale if it is
    // UTF-8, else C.UTF-8; restored on exit.
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
        // The temporary is created by the checked writer (O_EXCL |
        // O_NOFOLLOW: never a link or FIFO planted at its name); libedit
        // then writes into that regular file.
        std::string tmp;
        int fd = -1;
        if (sluice::create_output_temp(im.history_file, &fd, &tmp).is_ok()) {
            ::fchmod(fd, 0600);
            ::close(fd);
            if (history(im.hist, &im.ev, H_SAVE, tmp.c_str()) >= 0) (void)sluice::publish_output_temp(tmp, im.history_file);
            else std::remove(tmp.c_str());
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
