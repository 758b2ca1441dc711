// Standalone `sluice kld` driver without an engine: everything except
// --model and suite make --tokenizer works from files.
#include <iostream>

#include <unistd.h>

#include "cli/kld/kld_main.h"

int main(int argc, char** argv) {
    argv[0] = const_cast<char*>("kld");
    sluice::kld::KldHooks h;
    h.err_is_tty = ::isatty(STDERR_FILENO) != 0;
    return sluice::kld::main_kld(argc, argv, std::cout, std::cerr, h);
}
