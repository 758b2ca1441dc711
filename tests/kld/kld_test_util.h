// Helpers for the KLD tests: temporary directories, synthetic suites and
// logits, table/fake engines, and the numpy oracle runner.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kld/stats/compare.h"
#include "kld/kld_common.h"
#include "cli/kld/kld_main.h"
#include "kld/io/llamakld.h"
#include "kld/io/operand.h"
#include "format/safetensors.h"
#include "kld/io/suite.h"

namespace kt {

using namespace sluice::kld;
using sluice::Status;
using namespace sluice::st;  // the safetensors reader and writer
namespace fs = std::filesystem;

// Scratch directories are removed when the test binary exits (set
// SLUICE_KEEP_TMP=1 to keep them for a post-mortem): ~700 left-over
// directories (1.2 GB) had piled up in /tmp from repeated runs.
struct TmpDirs {
    std::vector<std::string> dirs;
    ~TmpDirs() {
        if (std::getenv("SLUICE_KEEP_TMP")) return;
        std::error_code ec;
        for (const auto& d : dirs) fs::remove_all(d, ec);
    }
};
inline TmpDirs& tmp_dirs() {
    static TmpDirs t;
    return t;
}

inline std::string tmpdir(const std::string& tag) {
    std::string base = fs::temp_directory_path().string() + "/sluice-kld-" + tag + "-" + std::to_string(::getpid());
    fs::remove_all(base);
    fs::create_directories(base);
    tmp_dirs().dirs.push_back(base);
    return base;
}

inline void write_text(const std::string& p, const std::string& s) {
    std::ofstream f(p, std::ios::binary);
    f << s;
}

inline std::string read_text(const std::string& p) {
    std::string s;
    (void)read_file(p, &s);
    return s;
}

// A suite of `domains.size()` domains, each with `per` windows of T tokens,
// built by `suite make` from token-file sources of random ids < V.
inline Suite make_synth_suite(const std::string& dir, int T, int V, const std::vector<std::string>& domains, int per,
                              uint32_t seed = 7) {
    std::mt19937 rng(seed);
    MakeOptions m;
    m.out_dir = dir + "/suite";
    m.context_length = T;
    fs::create_directories(dir + "/src");
    for (const auto& d : domains) {
        std::vector<int32_t> ids(size_t(T * per + T / 2 + 13));
        for (auto& x : ids) x = int32_t(rng() % uint32_t(V));
        const std::string p = dir + "/src/" + d + ".tok";
        write_text(p, compact_int_array(ids));
        m.sources.push_back({d, p, per, true});
    }
    Suite s;
    Status st = make_suite(m, &s);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return s;
}

inline float bf16_round(float f) { return bf16_to_f32(f32_to_bf16_rne(f)); }

// Reference logits: BF16-valued, with ties at the maximum and -inf entries.
inline std::vector<float> synth_ref(int R, int V, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 3.f);
    std::vector<float> x(size_t(R) * V);
    for (int r = 0; r < R; ++r) {
        float* row = x.data() + size_t(r) * V;
        for (int v = 0; v < V; ++v) row[v] = bf16_round(nd(rng));
        row[rng() % V] = 14.f;  // a peaked row most of the time
        if (r % 5 == 0) row[(r * 7) % V] = 14.f;  // tied maxima
        if (r % 3 == 0) row[(r * 13 + 1) % V] = -INFINITY;
    }
    return x;
}

// Candidate = reference + Gaussian perturbation of width sigma (finite
// where the reference is -inf too, so KL stays finite).
inline std::vector<float> perturb(const std::vector<float>& x, float sigma, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, sigma);
    std::vector<float> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = std::isinf(x[i]) ? -20.f : x[i] + nd(rng);
    return y;
}

// Serves fixed logits tables, one per window, identified by its tokens.
class TableEngine : public LogitsEngine {
public:
    TableEngine(const Suite& s, std::vector<std::vector<float>> tables, int V) : s_(s), t_(std::move(tables)), V_(V) {}
    int64_t n_vocab() override { return V_; }
    Status reset() override {
        seen_.clear();
        return {};
    }
    Status eval(const int32_t* tok, size_t n, float* out) override {
        const size_t r0 = seen_.size();
        seen_.insert(seen_.end(), tok, tok + n);
        for (size_t w = 0; w < s_.windows.size(); ++w) {
            const auto& wt = s_.windows[w].tokens;
            if (std::equal(seen_.begin(), seen_.end(), wt.begin())) {
                std::memcpy(out, t_[w].data() + r0 * V_, n * V_ * 4);
                ++calls;
                return {};
            }
        }
        return err(Code::engine, "TableEngine: unknown token prefix");
    }
    json identity() override { return json{{"engine", "table"}}; }
    int calls = 0;
private:
    const Suite& s_;
    std::vector<std::vector<float>> t_;
    int V_;
    std::vector<int32_t> seen_;
};

// Writes a v0 ref/ dir holding `tables` through capture().
inline void write_ref(const Suite& s, const std::vector<std::vector<float>>& tables, int V, const std::string& dir,
                      int chunk = 17) {
    TableEngine e(s, tables, V);
    std::vector<int> pos;
    for (size_t i = 0; i < s.windows.size(); ++i) pos.push_back(int(i));
    CaptureOptions co;
    co.chunk_rows = chunk;
    CaptureReport rep;
    Status st = capture(&e, s, pos, dir, co, &rep);
    ASSERT_TRUE(st.is_ok()) << st.message();
}

inline void write_f64(const std::string& p, const std::vector<double>& v) {
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 8));
}

inline std::string oracle_path() { return KLD_ORACLE; }
inline bool have_numpy() {
    return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}
// Runs the oracle; returns its stdout parsed as JSON.
inline json run_oracle(const std::string& args) {
    const std::string out = tmpdir("oracle-out") + "/o.json";
    const std::string cmd = "/usr/bin/python3 " + oracle_path() + " " + args + " > " + out;
    int rc = std::system(cmd.c_str());
    EXPECT_EQ(rc, 0) << cmd;
    json j;
    (void)parse_json(read_text(out), out, &j);
    return j;
}

// main_kld with a vector of words; returns the exit code, captures streams.
inline int kld(std::vector<std::string> words, std::string* out = nullptr, std::string* errs = nullptr,
               const KldHooks& hooks = {}) {
    words.insert(words.begin(), "kld");
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    std::ostringstream o, e;
    int rc = main_kld(int(argv.size()), argv.data(), o, e, hooks);
    if (out) *out = o.str();
    if (errs) *errs = e.str();
    return rc;
}

}  // namespace kt
