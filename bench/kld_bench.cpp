// KLD throughput bench (KLD.md §7.8). A program, not a test; driven by
// bench/kld_bench.sh, which also times `sluice kld compare` and the numpy
// baseline (tools/kld_ref.py) on the data generated here.
//
//   bench_kld gen    --out DIR [--windows 8] [--context 512] [--vocab 163840] [--sigma 0.1]
//       a suite plus F32 ref/ and cand/ directories of synthetic logits
//   bench_kld disk   [--streams N] [--chunk BYTES] [--buffered] FILE...
//       sequential read bandwidth (O_DIRECT unless --buffered), N files at once
//   bench_kld kernel [--vocab 163840] [--rows 32] [--seconds 0.5]
//       the per-row kernel in memory, one core: fp64 and every fast ISA,
//       JS on and off, GB/s of input logits (both operands counted)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "kld/kernels/kernel.h"
#include "kld/io/operand.h"
#include "format/safetensors.h"
#include "kld/io/suite.h"

using namespace sluice::kld;
using sluice::Status;
using namespace sluice::st;  // the safetensors reader and writer
namespace fs = std::filesystem;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
// CPU time of this thread: other processes share this machine's cores, and
// a per-core rate should not charge the kernel for time it was not running.
double cpu_now() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

std::string arg(int argc, char** argv, const std::string& k, const std::string& d) {
    for (int i = 0; i + 1 < argc; ++i)
        if (argv[i] == k) return argv[i + 1];
    return d;
}
bool flag(int argc, char** argv, const std::string& k) {
    for (int i = 0; i < argc; ++i)
        if (argv[i] == k) return true;
    return false;
}

inline uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// LLM-like rows: BF16-valued, roughly normal (sigma 3) with one peak per
// row, an occasional tied peak and -inf entries. The candidate adds uniform
// noise of standard deviation `sigma` (it keeps the reference's -inf).
void synth_row(uint64_t seed, int64_t row, int64_t V, float sigma, bool cand, float* out) {
    const uint64_t base = mix(seed * 0x100000001b3ull + uint64_t(row));
    const float k = 3.0f * 3.4641016f / 65536.0f;  // sum of 4 uniforms: variance 1/3 -> sigma 3
    for (int64_t v = 0; v < V; ++v) {
        const uint64_t h = mix(base + uint64_t(v));
        const float s = float(h & 0xffff) + float((h >> 16) & 0xffff) + float((h >> 32) & 0xffff) + float(h >> 48);
        out[v] = bf16_to_f32(f32_to_bf16_rne((s - 131070.0f) * k * 0.5f));
    }
    out[base % uint64_t(V)] = 14.0f;
    if (row % 5 == 0) out[(base >> 20) % uint64_t(V)] = 14.0f;
    if (row % 9 == 0) out[(base >> 40) % uint64_t(V)] = -INFINITY;
    if (!cand) return;
    const float w = sigma * 3.4641016f;
    for (int64_t v = 0; v < V; ++v) {
        if (std::isinf(out[v])) continue;
        const uint64_t h = mix(~base + uint64_t(v));
        out[v] += (float(h & 0xffffff) / 16777216.0f - 0.5f) * w;
    }
}

class SynthEngine : public LogitsEngine {
public:
    SynthEngine(int64_t V, float sigma, bool cand) : V_(V), sigma_(sigma), cand_(cand) {}
    int64_t n_vocab() override { return V_; }
    Status reset() override {
        row_ = 0;
        seed_ = 0;
        return {};
    }
    Status eval(const int32_t* tok, size_t n, float* out) override {
        if (row_ == 0)  // the window's identity: its first tokens
            for (size_t i = 0; i < std::min<size_t>(n, 8); ++i) seed_ = mix(seed_ ^ uint64_t(uint32_t(tok[i])));
        for (size_t i = 0; i < n; ++i) synth_row(seed_, row_ + int64_t(i), V_, sigma_, cand_, out + i * size_t(V_));
        row_ += int64_t(n);
        return {};
    }
    json identity() override { return json{{"engine", "bench_kld synthetic"}}; }

private:
    int64_t V_;
    float sigma_;
    bool cand_;
    int64_t row_ = 0;
    uint64_t seed_ = 0;
};

int cmd_gen(int argc, char** argv) {
    const std::string out = arg(argc, argv, "--out", "");
    const int W = std::atoi(arg(argc, argv, "--windows", "8").c_str());
    const int T = std::atoi(arg(argc, argv, "--context", "512").c_str());
    const int64_t V = std::atoll(arg(argc, argv, "--vocab", "163840").c_str());
    const float sigma = float(std::atof(arg(argc, argv, "--sigma", "0.1").c_str()));
    if (out.empty() || W < 1 || T < 2 || V < 16) {
        std::fprintf(stderr, "gen --out DIR [--windows W] [--context T] [--vocab V] [--sigma S]\n");
        return 2;
    }
    fs::create_directories(out + "/src");
    MakeOptions m;
    m.out_dir = out + "/suite";
    m.context_length = T;
    m.tokenizer_class = "none (bench_kld synthetic tokens)";
    const char* doms[] = {"prose", "code"};
    for (int d = 0; d < 2; ++d) {
        const int per = W / 2 + (d < W % 2);
        if (per == 0) continue;
        std::vector<int32_t> ids(size_t(T) * per + T / 2 + 7);
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(mix(i * 2 + d) % uint64_t(V));
        const std::string p = out + "/src/" + doms[d] + ".tok";
        std::ofstream(p) << compact_int_array(ids);
        m.sources.push_back({doms[d], p, per, true});
    }
    Suite s;
    if (Status st = make_suite(m, &s); !st.is_ok()) {
        std::fprintf(stderr, "suite: %s\n", st.message().c_str());
        return 1;
    }
    std::vector<int> pos;
    for (size_t i = 0; i < s.windows.size(); ++i) pos.push_back(int(i));
    uint64_t total = 0;
    const double t0 = now();
    for (bool cand : {false, true}) {
        SynthEngine e(V, sigma, cand);
        CaptureOptions co;
        co.chunk_rows = 32;
        co.run_name = cand ? "bench-candidate" : "bench-reference";
        CaptureReport rep;
        if (Status st = capture(&e, s, pos, out + (cand ? "/cand" : "/ref"), co, &rep); !st.is_ok()) {
            std::fprintf(stderr, "capture: %s\n", st.message().c_str());
            return 1;
        }
        total += rep.bytes_written;
    }
    std::printf("generated %d windows x %d rows x V %lld: %.3f GB of F32 logits (both operands) in %.1f s\n", W, T - 1,
                (long long)V, double(total) / 1e9, now() - t0);
    return 0;
}

int cmd_disk(int argc, char** argv) {
    const int streams = std::max(1, std::atoi(arg(argc, argv, "--streams", "1").c_str()));
    const uint64_t chunk = uint64_t(std::atoll(arg(argc, argv, "--chunk", "16777216").c_str()));
    const bool buffered = flag(argc, argv, "--buffered");
    std::vector<std::string> files;
    for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--streams" || a == "--chunk") { ++i; continue; }
        if (a.rfind("--", 0) == 0) continue;
        files.push_back(a);
    }
    if (files.empty()) {
        std::fprintf(stderr, "disk [--streams N] [--chunk BYTES] [--buffered] FILE...\n");
        return 2;
    }
    std::atomic<size_t> next{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<bool> failed{false};
    const double t0 = now();
    auto worker = [&] {
        void* p = nullptr;
        if (posix_memalign(&p, 4096, chunk) != 0) { failed = true; return; }
        for (size_t i; (i = next.fetch_add(1)) < files.size();) {
            int fd = ::open(files[i].c_str(), O_RDONLY | (buffered ? 0 : O_DIRECT));
            if (fd < 0) { failed = true; break; }
            if (buffered) posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
            for (off_t off = 0;;) {
                ssize_t r = ::pread(fd, p, chunk, off);
                if (r <= 0) break;
                bytes += uint64_t(r);
                off += r;
                if (buffered) posix_fadvise(fd, off - r, r, POSIX_FADV_DONTNEED);
                if (size_t(r) < chunk) break;
            }
            ::close(fd);
        }
        std::free(p);
    };
    std::vector<std::thread> th;
    for (int i = 0; i < streams; ++i) th.emplace_back(worker);
    for (auto& t : th) t.join();
    const double s = now() - t0;
    if (failed) {
        std::fprintf(stderr, "disk: open/alloc failed (O_DIRECT unsupported here? try --buffered)\n");
        return 1;
    }
    std::printf("disk %s, %d stream(s), %llu MiB reads: %.3f GB in %.2f s = %.3f GB/s\n", buffered ? "buffered" : "O_DIRECT",
                streams, (unsigned long long)(chunk >> 20), double(bytes) / 1e9, s, double(bytes) / s / 1e9);
    return 0;
}

int cmd_kernel(int argc, char** argv) {
    const int64_t V = std::atoll(arg(argc, argv, "--vocab", "163840").c_str());
    const int R = std::atoi(arg(argc, argv, "--rows", "32").c_str());
    const double min_s = std::atof(arg(argc, argv, "--seconds", "0.5").c_str());
    std::vector<float> x(size_t(R) * V), y(size_t(R) * V);
    for (int r = 0; r < R; ++r) {
        synth_row(7, r, V, 0.1f, false, x.data() + size_t(r) * V);
        synth_row(7, r, V, 0.1f, true, y.data() + size_t(r) * V);
    }
    const double bytes_per_row = double(V) * 8;
    // Plain memory read of the same buffers: the ceiling for cached data.
    double best_mem = 0;
    for (int rep = 0; rep < 5; ++rep) {
        const double t0 = now();
        double acc = 0;
        for (size_t i = 0; i < x.size(); i += 16) acc += double(x[i]) + double(y[i]);
        volatile double sink = acc;
        (void)sink;
        const double t1 = now();
        // A strided sum touches every cache line: the bytes moved are the buffers.
        best_mem = std::max(best_mem, double(R) * bytes_per_row / (t1 - t0) / 1e9);
    }
    std::printf("memory read (one core, every cache line of both operands): %.2f GB/s\n", best_mem);
    struct Mode {
        const char* name;
        Numerics n;
        FastIsa isa;
    };
    std::vector<Mode> modes = {{"fp64 (scalar reference)", Numerics::fp64, FastIsa::automatic}};
    for (FastIsa i : {FastIsa::scalar, FastIsa::avx2, FastIsa::avx512, FastIsa::neon})
        if (fast_isa_available(i)) modes.push_back({fast_isa_name(i), Numerics::fast, i});
    std::printf("%-24s %-4s %14s %14s %12s %8s\n", "kernel", "JS", "GB/s/core cpu", "GB/s wall", "rows/s cpu", "x fp64");
    double base[2] = {0, 0};
    for (const Mode& m : modes)
        for (int js = 1; js >= 0; --js) {
            double best = 1e30, best_wall = 1e30;
            volatile double sink = 0;
            for (int rep = 0; rep < 3; ++rep) {
                int done = 0;
                const double t0 = now(), c0 = cpu_now();
                double t1 = t0;
                while (t1 - t0 < min_s / 3 || done < R) {
                    RowMetrics rm;
                    int64_t col;
                    int side;
                    const int r = done % R;
                    (void)score_row(x.data() + size_t(r) * V, y.data() + size_t(r) * V, V, 5, m.n, js != 0, &rm, &col, &side, m.isa);
                    sink = sink + rm.kl;
                    ++done;
                    t1 = now();
                }
                best = std::min(best, (cpu_now() - c0) / done);
                best_wall = std::min(best_wall, (t1 - t0) / done);
            }
            const double gbs = bytes_per_row / best / 1e9;
            if (m.n == Numerics::fp64) base[js] = gbs;
            std::printf("%-24s %-4s %14.3f %14.3f %12.0f %7.1fx\n", m.name, js ? "on" : "off", gbs, bytes_per_row / best_wall / 1e9,
                        1.0 / best, gbs / base[js]);
        }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "gen") return cmd_gen(argc, argv);
    if (cmd == "disk") return cmd_disk(argc, argv);
    if (cmd == "kernel") return cmd_kernel(argc, argv);
    std::fprintf(stderr, "usage: bench_kld gen|disk|kernel ...\n");
    return 2;
}
