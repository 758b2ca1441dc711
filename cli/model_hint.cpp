// A model-taking command run without a model gets a usage line that names
// the model shipped in the repository, instead of CLI11's bare
// "model is required".
#include <cstdio>
#include <string>

#include "cli/commands.h"

namespace sluice {

bool missing_model_usage(int argc, char **argv, int *rc) {
    if (argc < 2) return false;
    const std::string cmd = argv[1];
    const char *rest = cmd == "run"          ? " MODEL PROMPT [-n N] [--raw]"
                       : cmd == "chat"       ? " MODEL [--system TEXT]"
                       : cmd == "serve"      ? " MODEL [--port N]"
                       : cmd == "perplexity" ? " MODEL FILE [--ctx N] [--json]"
                                             : nullptr;
    if (!rest) return false;
    for (int i = 2; i < argc; i++) {
        const std::string a = argv[i];
        if (a.empty() || a[0] != '-' || a == "-h" || a == "--help") return false;  // a positional, or help
    }
    std::fprintf(stderr,
                 "usage: sluice %s%s\n"
                 "  MODEL is a container directory; the repository ships one: models/sluice-mini\n"
                 "  e.g. sluice %s models/sluice-mini%s\n"
                 "  (sluice %s --help for every option)\n",
                 cmd.c_str(), rest, cmd.c_str(),
                 cmd == "run" ? " \"In the beginning God created the heaven and the earth.\""
                 : cmd == "perplexity" ? " models/kjv-heldout.txt --ctx 128" : "",
                 cmd.c_str());
    *rc = 2;
    return true;
}

}  // namespace sluice
