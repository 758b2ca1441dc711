// Line editing and history for `sluice chat` at a terminal, from libedit.
// libedit (BSD licence) rather than GNU readline: readline is GPL, which
// would bind every sluice binary that links it, and the project's library
// and CLI are meant to be usable under permissive terms.
// Used only when stdin is a terminal; piped input keeps chat's plain reads.
#pragma once
#include <memory>
#include <string>

namespace sluice {

class LineEditor {
public:
    LineEditor();
    ~LineEditor();  // saves the history file, if any
    LineEditor(const LineEditor &) = delete;
    LineEditor &operator=(const LineEditor &) = delete;

    // false when no editor could be set up (the caller reads plainly).
    bool ok() const;
    // Shows prompt and reads one line (without its newline). false at end
    // of input, or when a signal interrupts the read: libedit's el_gets
    // returns then (measured with 3.1-20221030: NULL, count -1, after one
    // SIGINT whose handler has no SA_RESTART), so chat's Ctrl-C still ends
    // the chat at the prompt.
    bool read_line(const char *prompt, std::string *line);
    // Adds a line to the history (kept in memory; saved on exit when the
    // history file is writable).
    void remember(const std::string &line);
    // The history file in use; empty when history stays in memory only.
    const std::string &history_file() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

// $XDG_STATE_HOME/sluice/chat_history, else ~/.local/state/sluice/chat_history;
// empty when neither variable is set. Not created here.
std::string chat_history_path();

}  // namespace sluice
