// Entry point of `sluice kld ...` (KLD.md §7.2). The CLI calls main_kld with
// the arguments after "sluice" (argv[0] == "kld") and the two hooks below,
// which are its only link to the engine and the tokenizer.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "kld/io/operand.h"
#include "kld/io/suite.h"

namespace sluice::kld {

struct KldHooks {
    // Opens CONTAINER as a logits engine (for --model). Unset: --model refused.
    std::function<Status(const std::string& container, int threads, std::unique_ptr<LogitsEngine>* out)> open_engine;
    // Opens CONTAINER's tokenizer (for suite make --tokenizer). Unset: only token sources.
    std::function<Status(const std::string& container, TokenizeFn* out, std::string* tokenizer_class)> open_tokenizer;
    // Whether the err stream is a terminal: capture, compare, paired and
    // noise then draw a progress bar there unless --no-progress (--progress
    // forces lines).
    bool err_is_tty = false;
};

// Returns the process exit code: 0, or the §7.9 code of the failure
// (2 usage, 3 identity, 4 format, 5 I/O, 6 non-finite, 7 resource, 8 engine).
int main_kld(int argc, char** argv, std::ostream& out, std::ostream& err, const KldHooks& hooks = {});

}  // namespace sluice::kld
