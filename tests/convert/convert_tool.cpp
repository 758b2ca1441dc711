// Standalone driver for manual runs until `sluice convert` is wired in the CLI:
//   sluice_convert_tool convert SRC DST [options]   (see convert_usage())
//   sluice_convert_tool verify DIR [--source SRC] [--per-expert] [--jobs N]
#include <cstdio>
#include <string>
#include <vector>

#include "convert/convert.h"

int main(int argc, char** argv) {
    const std::string cmd = argc > 1 ? argv[1] : "";
    const std::vector<std::string> args(argv + (argc > 1 ? 2 : 1), argv + argc);
    if (cmd == "convert") return sluice::convert::convert_main(args);
    if (cmd == "verify") return sluice::convert::verify_main(args);
    std::fprintf(stderr, "%s%s", sluice::convert::convert_usage(), sluice::convert::verify_usage());
    return 1;
}
