// Small pieces every subcommand shares: prompt input, start-up progress,
// the checkpoint hint, JSON quoting and stream hygiene.
#pragma once
#include <string>

namespace sluice {

// The prompt of run / eval / tokenize: PROMPT, `-` (stdin), --file F, or
// stdin when it is not a terminal and no PROMPT was given (then it must not
// be empty). Returns 0 with
// *out set, 2 for a usage error (*err: one line), 1 when a file cannot be
// read.
int read_prompt(const std::string &arg, bool arg_given, const std::string &file, std::string *out, std::string *err);

// Reads a whole file (at most 1 GiB); false with *err naming the file.
bool read_text_file(const std::string &path, std::string *out, std::string *err);

// sluice_config.progress for the CLI: what start-up is doing, on stderr
// (one line redrawn on a terminal; "loading" and "ready" lines otherwise).
void print_startup_progress(void *user, const char *stage, double fraction);
// Ends a redrawn progress line (after a failed open).
void end_startup_progress();

// A one-line explanation when path is a Hugging Face checkpoint folder
// (config.json and *.safetensors, no manifest.json); "" otherwise.
std::string checkpoint_hint(const std::string &path);

// "\n" when stdout and stderr are the same file and the text written to
// stdout did not end a line: the next stderr line then starts on its own.
const char *newline_if_mid_line(bool stdout_ends_line);

// A JSON string literal (quotes included) for UTF-8 text; invalid bytes
// become U+FFFD.
std::string json_quote(const std::string &s);

// Peak resident set size of this process in bytes (getrusage).
unsigned long long peak_rss_bytes();

}  // namespace sluice
