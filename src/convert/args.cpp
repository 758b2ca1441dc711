// Argument parsing and report printing for `sluice convert` / `sluice verify`.
#include <cstdio>
#include <cstdlib>

#include "convert/convert.h"

namespace sluice::convert {

const char* convert_usage() {
    return "usage: sluice convert SRC DST [options]\n"
           "  SRC  Hugging Face checkpoint directory (config.json, *.safetensors), or a GGUF\n"
           "       file (kimi-linear, kimi-k3, deepseek2; tensors f32/f16/bf16, q4_0/q4_1/q5_0/\n"
           "       q5_1/q8_0, q2_k..q6_k, iq4_nl/iq4_xs, mxfp4)\n"
           "  DST  container directory to write (resumed if interrupted)\n"
           "  --trunk-bits 8|4|3   width of large trunk tensors (default 4)\n"
           "  --trunk8             every quantized trunk tensor Q8G\n"
           "  --stages 2|3|4|6     residual VQ stages (default 3)\n"
           "  --entries N          codebook entries 16..256 (default 256)\n"
           "  --index-bits 8|6     6 = VQ4P (needs --stages 4 --entries 64)\n"
           "  --cb-sample N        experts sampled per layer and kind for k-means (default 12)\n"
           "  --kmeans-iters N     Lloyd iterations per stage (default 25)\n"
           "  --train-vectors N    k-means training vectors (default 300000)\n"
           "  --seed N             sampling / k-means seed (default 0)\n"
           "  --jobs N             worker threads (default: all CPUs); never changes the output\n"
           "  --force              start over: remove this converter's files from DST first\n"
           "  --quiet              no progress lines\n";
}

const char* verify_usage() {
    return "usage: sluice verify DIR [--source SRC] [--per-expert] [--jobs N]\n"
           "  checks every expert record header and CRC, codebook headers, trunk bounds;\n"
           "  with --source, prints the dequantized-vs-source error of each tensor\n";
}

static bool to_int(const std::vector<std::string>& a, size_t& i, long long* v, std::string* err) {
    if (i + 1 >= a.size()) {
        *err = a[i] + " needs a value";
        return false;
    }
    char* end = nullptr;
    *v = std::strtoll(a[i + 1].c_str(), &end, 10);
    if (a[i + 1].empty() || *end != '\0') {
        *err = a[i] + ": not an integer: " + a[i + 1];
        return false;
    }
    ++i;
    return true;
}

bool parse_convert_args(const std::vector<std::string>& a, ConvertOptions* o, std::string* err) {
    std::vector<std::string> pos;
    for (size_t i = 0; i < a.size(); ++i) {
        const std::string& s = a[i];
        long long v = 0;
        if (s == "--trunk8") o->trunk8 = true;
        else if (s == "--force") o->force = true;
        else if (s == "--quiet") o->quiet = true;
        else if (s == "--trunk-bits" || s == "--stages" || s == "--entries" || s == "--index-bits" || s == "--cb-sample" ||
                 s == "--kmeans-iters" || s == "--train-vectors" || s == "--seed" || s == "--jobs") {
            if (!to_int(a, i, &v, err)) return false;
            if (s == "--trunk-bits") o->trunk_bits = static_cast<int>(v);
            else if (s == "--stages") o->stages = static_cast<int>(v);
            else if (s == "--entries") o->entries = static_cast<int>(v);
            else if (s == "--index-bits") o->index_bits = static_cast<int>(v);
            else if (s == "--cb-sample") o->cb_sample = static_cast<int>(v);
            else if (s == "--kmeans-iters") o->kmeans_iters = static_cast<int>(v);
            else if (s == "--train-vectors") o->train_vectors = v;
            else if (s == "--seed") o->seed = static_cast<uint64_t>(v);
            else o->jobs = static_cast<int>(v);
        } else if (s.rfind("--", 0) == 0) {
            *err = "unknown option " + s;
            return false;
        } else {
            pos.push_back(s);
        }
    }
    if (pos.size() != 2) {
        *err = "expected SRC and DST";
        return false;
    }
    o->source_dir = pos[0];
    o->output_dir = pos[1];
    return true;
}

bool parse_verify_args(const std::vector<std::string>& a, VerifyOptions* o, std::string* err) {
    std::vector<std::string> pos;
    for (size_t i = 0; i < a.size(); ++i) {
        long long v = 0;
        if (a[i] == "--source") {
            if (i + 1 >= a.size()) {
                *err = "--source needs a directory";
                return false;
            }
            o->source_dir = a[++i];
        } else if (a[i] == "--per-expert") {
            o->per_expert = true;
        } else if (a[i] == "--jobs") {
            if (!to_int(a, i, &v, err)) return false;
            o->jobs = static_cast<int>(v);
        } else if (a[i].rfind("--", 0) == 0) {
            *err = "unknown option " + a[i];
            return false;
        } else {
            pos.push_back(a[i]);
        }
    }
    if (pos.size() != 1) {
        *err = "expected one container directory";
        return false;
    }
    o->container_dir = pos[0];
    return true;
}

std::string format_verify_report(const VerifyReport& r) {
    std::string s;
    char b[512];
    std::snprintf(b, sizeof b, "records checked %lld, header failures %lld, crc failures %lld\n",
                  static_cast<long long>(r.records_checked), static_cast<long long>(r.header_failures),
                  static_cast<long long>(r.crc_failures));
    s += b;
    for (const auto& p : r.problems) s += "problem: " + p + "\n";
    for (const auto& t : r.trunk) {
        std::snprintf(b, sizeof b, "trunk  %-64s rel_frob %.6f max_abs %.6g\n", t.name.c_str(), t.rel_frob, t.max_abs);
        s += b;
    }
    for (const auto& t : r.experts) {
        std::snprintf(b, sizeof b, "expert %-20s rel_frob mean %.6f max %.6f max_abs %.6g\n", t.name.c_str(), t.rel_frob,
                      t.rel_frob_max, t.max_abs);
        s += b;
    }
    return s;
}

int convert_main(const std::vector<std::string>& args) {
    ConvertOptions o;
    std::string err;
    if (!parse_convert_args(args, &o, &err)) {
        std::fprintf(stderr, "convert: %s\n%s", err.c_str(), convert_usage());
        return 1;
    }
    const int rc = run_convert(o, &err, nullptr);
    if (rc != 0) std::fprintf(stderr, "convert: %s\n", err.c_str());
    return rc;
}

int verify_main(const std::vector<std::string>& args) {
    VerifyOptions o;
    std::string err;
    if (!parse_verify_args(args, &o, &err)) {
        std::fprintf(stderr, "verify: %s\n%s", err.c_str(), verify_usage());
        return 1;
    }
    VerifyReport rep;
    const int rc = run_verify(o, &rep, &err, nullptr);
    if (rep.records_checked > 0 || !rep.problems.empty() || !rep.trunk.empty())
        std::fputs(format_verify_report(rep).c_str(), stdout);
    if (rc != 0) std::fprintf(stderr, "verify: %s\n", err.c_str());
    else std::printf("verify: OK\n");
    return rc;
}

}  // namespace sluice::convert
