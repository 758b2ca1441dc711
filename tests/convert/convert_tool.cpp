// Standalone driver for manual runs until `sluice convert` is wired in the CLI:
//   sluice_convert_tool convert SRC DST [--trunk-bits 8|4|3] [--trunk8]
//       [--stages N] [--entries N] [--index-bits 8|6] [--cb-sample N]
//       [--kmeans-iters N] [--train-vectors N] [--seed N] [--jobs N] [--force] [--quiet]
//   sluice_convert_tool verify DIR [--source SRC] [--per-expert] [--jobs N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "convert/convert.h"

using namespace sluice::convert;

static int usage() {
    std::fprintf(stderr,
                 "usage: sluice_convert_tool convert SRC DST [--trunk-bits 8|4|3] [--trunk8] [--stages 2|3|4|6]\n"
                 "           [--entries N] [--index-bits 8|6] [--cb-sample N] [--kmeans-iters N]\n"
                 "           [--train-vectors N] [--seed N] [--jobs N] [--force] [--quiet]\n"
                 "       sluice_convert_tool verify DIR [--source SRC] [--per-expert] [--jobs N]\n");
    return 1;
}

int main(int argc, char** argv) {
    if (argc < 3) return usage();
    const std::string cmd = argv[1];
    auto num = [&](int& i) -> long long {
        if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", argv[i]); std::exit(1); }
        return std::atoll(argv[++i]);
    };
    if (cmd == "convert") {
        if (argc < 4) return usage();
        ConvertOptions o;
        o.source_dir = argv[2];
        o.output_dir = argv[3];
        for (int i = 4; i < argc; ++i) {
            const std::string a = argv[i];
            if (a == "--trunk-bits") o.trunk_bits = static_cast<int>(num(i));
            else if (a == "--trunk8") o.trunk8 = true;
            else if (a == "--stages") o.stages = static_cast<int>(num(i));
            else if (a == "--entries") o.entries = static_cast<int>(num(i));
            else if (a == "--index-bits") o.index_bits = static_cast<int>(num(i));
            else if (a == "--cb-sample") o.cb_sample = static_cast<int>(num(i));
            else if (a == "--kmeans-iters") o.kmeans_iters = static_cast<int>(num(i));
            else if (a == "--train-vectors") o.train_vectors = num(i);
            else if (a == "--seed") o.seed = static_cast<uint64_t>(num(i));
            else if (a == "--jobs") o.jobs = static_cast<int>(num(i));
            else if (a == "--force") o.force = true;
            else if (a == "--quiet") o.quiet = true;
            else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return usage(); }
        }
        std::string err;
        const int rc = run_convert(o, &err, nullptr);
        if (rc != 0) std::fprintf(stderr, "convert: %s\n", err.c_str());
        return rc;
    }
    if (cmd == "verify") {
        VerifyOptions o;
        o.container_dir = argv[2];
        for (int i = 3; i < argc; ++i) {
            const std::string a = argv[i];
            if (a == "--source" && i + 1 < argc) o.source_dir = argv[++i];
            else if (a == "--per-expert") o.per_expert = true;
            else if (a == "--jobs") o.jobs = static_cast<int>(num(i));
            else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return usage(); }
        }
        VerifyReport rep;
        std::string err;
        const int rc = run_verify(o, &rep, &err, nullptr);
        std::printf("records checked %lld, header failures %lld, crc failures %lld\n",
                    static_cast<long long>(rep.records_checked), static_cast<long long>(rep.header_failures),
                    static_cast<long long>(rep.crc_failures));
        for (const auto& p : rep.problems) std::printf("problem: %s\n", p.c_str());
        for (const auto& t : rep.trunk)
            std::printf("trunk  %-70s rel_frob %.6f max_abs %.6g\n", t.name.c_str(), t.rel_frob, t.max_abs);
        for (const auto& t : rep.experts)
            std::printf("expert %-20s rel_frob mean %.6f max %.6f max_abs %.6g\n", t.name.c_str(), t.rel_frob,
                        t.rel_frob_max, t.max_abs);
        if (rc != 0) std::fprintf(stderr, "verify: %s\n", err.c_str());
        return rc;
    }
    return usage();
}
