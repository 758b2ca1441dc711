// End-to-end prefill and decode through the C API on a fixture container,
// per backend and thread count, with ratios against the scalar, 1-thread run
// measured in the same process.
//   build/bench/bench_decode [CONTAINER] [decode_tokens]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sluice/sluice.h"

namespace {

struct Result {
    double prefill_tps = 0, decode_tps = 0;
    bool ok = false;
};

Result run(const std::string &model, int backend, int threads, int n_decode) {
    Result r;
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.backend = backend;
    cfg.n_threads = threads;
    sluice_ctx *ctx = nullptr;
    if (sluice_open(model.c_str(), &cfg, &ctx) != SLUICE_OK) {
        sluice_close(ctx);
        return r;
    }
    const int V = sluice_n_vocab(ctx);
    std::vector<int32_t> prompt(64);
    for (size_t i = 0; i < prompt.size(); i++) prompt[i] = (int32_t)((i * 7 + 3) % (size_t)V);
    std::vector<float> lg((size_t)V);
    double best_pf = 1e30, best_dec = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        sluice_reset(ctx);
        auto t0 = std::chrono::steady_clock::now();
        sluice_eval(ctx, prompt.data(), prompt.size(), lg.data());
        auto t1 = std::chrono::steady_clock::now();
        for (int i = 0; i < n_decode; i++) {
            int32_t t = (int32_t)(std::max_element(lg.begin(), lg.end()) - lg.begin());
            sluice_eval(ctx, &t, 1, lg.data());
        }
        auto t2 = std::chrono::steady_clock::now();
        best_pf = std::min(best_pf, std::chrono::duration<double>(t1 - t0).count());
        best_dec = std::min(best_dec, std::chrono::duration<double>(t2 - t1).count());
    }
    r.prefill_tps = prompt.size() / best_pf;
    r.decode_tps = n_decode / best_dec;
    r.ok = true;
    sluice_close(ctx);
    return r;
}

}  // namespace

int main(int argc, char **argv) {
    std::string model = argc > 1 ? argv[1] : std::string(SLUICE_FIXTURES_DIR) + "/warp/k3-tiny.waste";
    int n_decode = argc > 2 ? std::atoi(argv[2]) : 64;
    std::printf("model %s, prompt 64 tokens, decode %d tokens, best of 3\n", model.c_str(), n_decode);
    const Result base = run(model, SLUICE_BACKEND_SCALAR, 1, n_decode);
    if (!base.ok) {
        std::fprintf(stderr, "cannot open %s\n", model.c_str());
        return 1;
    }
    std::printf("%-8s %7s %12s %12s %10s %10s\n", "backend", "threads", "prefill t/s", "decode t/s", "pf ratio",
                "dec ratio");
    const char *names[] = {"auto", "scalar", "avx2", "avx512"};
    for (int be : {SLUICE_BACKEND_SCALAR, SLUICE_BACKEND_AVX2, SLUICE_BACKEND_AVX512})
        for (int th : {1, 2}) {
            Result r = (be == SLUICE_BACKEND_SCALAR && th == 1) ? base : run(model, be, th, n_decode);
            if (!r.ok) continue;
            std::printf("%-8s %7d %12.1f %12.1f %9.2fx %9.2fx\n", names[be], th, r.prefill_tps, r.decode_tps,
                        r.prefill_tps / base.prefill_tps, r.decode_tps / base.decode_tps);
        }
    return 0;
}
