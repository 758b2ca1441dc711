// Micro-benchmarks of every kernel slot, per backend, reporting GB/s of
// weights consumed and the speed-up over the scalar kernel in the same run.
//   build/bench/bench_kernels [--benchmark_min_time=0.2]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "quant/kernels.h"

using namespace sluice;

namespace {

// Kimi-Linear's shapes: a 2304-wide trunk projection with 2304 rows, and
// one routed expert's gate matrix (1024 x 2304) with 3-stage VQ codes.
constexpr int64_t kRows = 2304, kCols = 2304, kI = 1024;

QTensor make_tensor(QFmt fmt) {
    QTensor t;
    t.fmt = fmt;
    t.rows = kRows;
    t.cols = kCols;
    t.group = 128;
    qtensor_geometry(fmt, kCols, 128, &t.ng, &t.rowbytes);
    t.data = aligned_alloc_bytes((size_t)(t.rows * t.rowbytes));
    std::mt19937 rng(1);
    for (int64_t i = 0; i < t.rows * t.rowbytes; i++) t.data[(size_t)i] = (uint8_t)rng();
    if (fmt == QFmt::F32) {
        float *f = reinterpret_cast<float *>(t.data.get());
        for (int64_t i = 0; i < t.rows * t.cols; i++) f[i] = (float)(rng() % 1000) * 1e-3f;
    }
    t.scales.assign((size_t)(t.rows * t.ng), 0.01f);
    return t;
}

const Kernels *backend(int id) {
    const Kernels *k = nullptr;
    const char *why = nullptr;
    const sluice_backend b = id == 0   ? SLUICE_BACKEND_SCALAR
                             : id == 1 ? SLUICE_BACKEND_AVX2
                             : id == 2 ? SLUICE_BACKEND_AVX512
                                       : SLUICE_BACKEND_NEON;
    return select_kernels(b, &k, &why) ? k : nullptr;
}

void BM_RowDot(benchmark::State &st) {
    const QFmt fmt = (QFmt)st.range(0);
    const Kernels *k = backend((int)st.range(1));
    if (!k) {
        st.SkipWithError("backend not available on this CPU");
        return;
    }
    static std::map<int, QTensor> cache;
    if (!cache.count((int)fmt)) cache.emplace((int)fmt, make_tensor(fmt));
    const QTensor &t = cache.at((int)fmt);
    std::vector<float> x((size_t)kCols, 0.5f), y((size_t)kRows);
    auto fn = k->row_dot[(int)fmt];
    for (auto _ : st) {
        for (int64_t r = 0; r < t.rows; r++) y[(size_t)r] = fn(t, r, x.data());
        benchmark::DoNotOptimize(y.data());
    }
    st.SetBytesProcessed(st.iterations() * (int64_t)(t.rows * t.rowbytes + t.scales.size() * 2));
    st.SetLabel(std::string(qfmt_name(fmt)) + "/" + k->name);
}

void BM_VqGemv(benchmark::State &st) {
    const bool p6 = st.range(0) == 1;
    const Kernels *k = backend((int)st.range(1));
    if (!k) {
        st.SkipWithError("backend not available on this CPU");
        return;
    }
    const int S = p6 ? 4 : 3, E = p6 ? 64 : 256;
    const int64_t nv = kCols / 8;
    std::mt19937 rng(2);
    std::vector<float> books((size_t)S * E * 8), x((size_t)kCols), T((size_t)(nv * S * E)), scale((size_t)kI, 1.0f),
        y((size_t)kI), lam((size_t)((nv + 31) / 32));
    for (auto &v : books) v = (float)(rng() % 200) * 1e-3f - 0.1f;
    for (auto &v : x) v = (float)(rng() % 200) * 1e-2f - 1.0f;
    const int unit = p6 ? 3 : S;
    // 16 experts' codes (14 MB for VQ3R), used in turn: a real decode streams
    // each expert's codes once, so they are never hot in L2 as one buffer is.
    constexpr int kExperts = 16;
    const size_t per = (size_t)((kI / 64) * nv * 64 * unit + 64);
    std::vector<uint8_t> idx_all(per * kExperts);
    for (auto &b : idx_all) b = (uint8_t)rng();
    int turn = 0;
    std::vector<int8_t> Tq(T.size() + 64);
    const float *bp[4];
    for (int s = 0; s < S; s++) bp[s] = books.data() + s * E * 8;
    for (auto _ : st) {
        const uint8_t *idx_p = idx_all.data() + per * (size_t)(turn++ % kExperts);
        // One expert matrix: build the table from the input, then the product.
        k->vq_table(x.data(), nv, S, E, bp, T.data());
        if (p6) {
            vq_quantize_table_i8(T.data(), nv, Tq.data(), lam.data());
            k->vq_gemv_p6(Tq.data(), lam.data(), idx_p, nv, scale.data(), y.data(), 0, kI);
        } else {
            k->vq_gemv_u8(T.data(), idx_p, nv, S, E, scale.data(), y.data(), 0, kI);
        }
        benchmark::DoNotOptimize(y.data());
    }
    st.SetBytesProcessed(st.iterations() * (int64_t)((kI / 64) * nv * 64 * unit + kI * 2));
    st.SetLabel(std::string(p6 ? "VQ4P" : "VQ3R") + "/" + k->name);
}

// Several tokens through one VQ3R expert matrix (a prefill chunk's tokens
// on one expert): vq_gemm_u8_tokens against vq_gemv_u8 per token, same
// bits. range(0): tokens; range(1): 0 per token, 1 shared codes. "GB/s"
// counts code bytes once per token.
void BM_VqTokens(benchmark::State &st) {
    const int64_t m = st.range(0);
    const bool shared = st.range(1) == 1;
    const Kernels *k = backend((int)st.range(2));
    if (!k || (shared && !k->vq_gemm_u8_tokens)) {
        st.SkipWithError("no shared-code product in this set, or the set does not run on this CPU");
        return;
    }
    const int S = 3, E = 256;
    const int64_t nv = kCols / 8;
    std::mt19937 rng(3);
    std::vector<uint8_t> idx((size_t)((kI / 64) * nv * 64 * S));
    for (auto &b : idx) b = (uint8_t)rng();
    std::vector<float> scale((size_t)kI, 1.0f), scratch((size_t)vq_tokens_scratch(m, kI, S, E));
    std::vector<std::vector<float>> T((size_t)m, std::vector<float>((size_t)(nv * S * E))),
        Y((size_t)m, std::vector<float>((size_t)kI));
    std::vector<const float *> tp;
    std::vector<float *> yp;
    for (auto &t : T) {
        for (auto &v : t) v = (float)(rng() % 1000) * 1e-3f;
        tp.push_back(t.data());
    }
    for (auto &y : Y) yp.push_back(y.data());
    for (auto _ : st) {
        if (shared)
            k->vq_gemm_u8_tokens(tp.data(), m, idx.data(), nv, S, E, scale.data(), yp.data(), 0, kI, scratch.data());
        else
            for (int64_t i = 0; i < m; i++) k->vq_gemv_u8(tp[(size_t)i], idx.data(), nv, S, E, scale.data(), yp[(size_t)i], 0, kI);
        benchmark::DoNotOptimize(yp.data());
    }
    st.SetBytesProcessed(st.iterations() * m * (int64_t)idx.size());
    st.SetLabel(std::string("VQ3Rx") + std::to_string(m) + "/" + (shared ? "shared/" : "per-token/") + k->name);
}

// Prefill rate per kernel set at T tokens (issue 28): T tokens through one
// VQ3R expert matrix (1024 x 2304; their tables built per token, the
// product shared across tokens in groups of kVqTokensMax where the set has
// the shared-code kernel, as model/ffn.cpp runs it) and one Q4G trunk
// matrix (2304 x 2304; rows_dot_n where the set has it, as runtime/ops.h
// runs it). range(0): T; range(1): backend. items/s = tokens/s of this
// pair of products; their per-token cost should fall as T grows.
void BM_PrefillTokens(benchmark::State &st) {
    const int64_t T = st.range(0);
    const Kernels *k = backend((int)st.range(1));
    const int part = (int)st.range(2);  // 0 both products, 1 the expert's, 2 the trunk's
    if (!k) {
        st.SkipWithError("backend not available on this CPU");
        return;
    }
    static QTensor trunk = make_tensor(QFmt::Q4G);
    const int S = 3, E = 256;
    const int64_t nv = kCols / 8;
    std::mt19937 rng(6);
    std::vector<float> books((size_t)S * E * 8), X((size_t)(T * kCols)), Yt((size_t)(T * kRows)),
        scale((size_t)kI, 1.0f);
    for (auto &v : books) v = (float)(rng() % 200) * 1e-3f - 0.1f;
    for (auto &v : X) v = (float)(rng() % 200) * 1e-2f - 1.0f;
    std::vector<uint8_t> idx((size_t)((kI / 64) * nv * 64 * S));
    for (auto &b : idx) b = (uint8_t)rng();
    const float *bp[3] = {books.data(), books.data() + E * 8, books.data() + 2 * E * 8};
    std::vector<float> Tb((size_t)(T * nv * S * E)), Ye((size_t)(T * kI));
    std::vector<float> scratch((size_t)vq_tokens_scratch(kVqTokensMax, kI, S, E));
    const bool shared = k->vq_gemm_u8_tokens && T >= 4;
    auto many = k->rows_dot_n[(int)QFmt::Q4G];
    const int64_t tb = rows_token_block(kCols);
    for (auto _ : st) {
        if (part != 2)
            for (int64_t t = 0; t < T; t++) k->vq_table(X.data() + t * kCols, nv, S, E, bp, Tb.data() + t * nv * S * E);
        if (part == 2) {
        } else if (shared) {
            for (int64_t g0 = 0; g0 < T; g0 += kVqTokensMax) {
                const int64_t m = std::min<int64_t>(kVqTokensMax, T - g0);
                const float *tp[kVqTokensMax];
                float *yp[kVqTokensMax];
                for (int64_t i = 0; i < m; i++) {
                    tp[i] = Tb.data() + (g0 + i) * nv * S * E;
                    yp[i] = Ye.data() + (g0 + i) * kI;
                }
                k->vq_gemm_u8_tokens(tp, m, idx.data(), nv, S, E, scale.data(), yp, 0, kI, scratch.data());
            }
        } else {
            for (int64_t t = 0; t < T; t++)
                k->vq_gemv_u8(Tb.data() + t * nv * S * E, idx.data(), nv, S, E, scale.data(), Ye.data() + t * kI, 0, kI);
        }
        // Token blocks as runtime/ops.h runs them.
        if (part != 1 && many && T > 1)
            for (int64_t t0 = 0; t0 < T; t0 += tb)
                many(trunk, 0, kRows, X.data() + t0 * kCols, kCols, std::min(tb, T - t0), Yt.data() + t0 * kRows, kRows);
        else if (part != 1)
            for (int64_t r = 0; r < kRows; r++)
                for (int64_t t = 0; t < T; t++) Yt[(size_t)(t * kRows + r)] = k->row_dot[(int)QFmt::Q4G](trunk, r, X.data() + t * kCols);
        benchmark::DoNotOptimize(Ye.data());
        benchmark::DoNotOptimize(Yt.data());
    }
    st.SetItemsProcessed(st.iterations() * T);
    static const char *const kPart[] = {"PREFILL", "EXPERT", "TRUNK"};
    st.SetLabel(std::string(kPart[part]) + "x" + std::to_string(T) + "/" + k->name);
}

// The vision tower's attention: 64 query rows of one head over 1024 patches
// (the patch budget), head width 72 (K3's tower: 1152 wide, 16 heads).
// "GB/s" counts the key and value floats each row reads.
void BM_TowerAttn(benchmark::State &st) {
    const Kernels *k = backend((int)st.range(0));
    if (!k) {
        st.SkipWithError("backend not available on this CPU");
        return;
    }
    constexpr int64_t L = 1024, hd = 72, rows = 64;
    std::mt19937 rng(4);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> q((size_t)(rows * hd)), kT((size_t)(hd * L)), v((size_t)(L * hd)), out((size_t)(rows * hd));
    for (auto *a : {&q, &kT, &v})
        for (auto &x : *a) x = nd(rng);
    std::vector<double> scratch((size_t)(L + hd));
    for (auto _ : st) {
        for (int64_t p = 0; p < rows; p++)
            k->attn_row(q.data() + p * hd, kT.data(), L, hd, v.data(), hd, 0.1178511, scratch.data(), out.data() + p * hd);
        benchmark::DoNotOptimize(out.data());
    }
    st.SetBytesProcessed(st.iterations() * rows * 2 * L * hd * 4);
    st.SetLabel(std::string("ATTN/") + k->name);
}

// The two GELUs over 1M activations ("GB/s" of floats in).
void BM_TowerGelu(benchmark::State &st) {
    const bool erf = st.range(0) == 1;
    const Kernels *k = backend((int)st.range(1));
    if (!k) {
        st.SkipWithError("backend not available on this CPU");
        return;
    }
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    std::vector<float> x0((size_t)1 << 20), x;
    for (auto &v : x0) v = nd(rng);
    for (auto _ : st) {
        st.PauseTiming();
        x = x0;
        st.ResumeTiming();
        (erf ? k->gelu_erf : k->gelu_tanh)(x.data(), (int64_t)x.size());
        benchmark::DoNotOptimize(x.data());
    }
    st.SetBytesProcessed(st.iterations() * (int64_t)x0.size() * 4);
    st.SetLabel(std::string(erf ? "GELUerf/" : "GELUtanh/") + k->name);
}

BENCHMARK(BM_RowDot)->ArgsProduct({{0, 2, 3, 7}, {0, 1, 2, 3}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_VqGemv)->ArgsProduct({{0, 1}, {0, 1, 2, 3}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_VqTokens)->ArgsProduct({{4, 8, 16}, {0, 1}, {1, 2}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PrefillTokens)->ArgsProduct({{1, 8, 64, 512}, {0, 1, 2, 3}, {0, 1, 2}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TowerAttn)->ArgsProduct({{0, 1, 2, 3}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TowerGelu)->ArgsProduct({{0, 1}, {0, 1, 2, 3}})->Unit(benchmark::kMicrosecond);

// Collects rates so the summary can print each backend against scalar.
class RatioReporter : public benchmark::ConsoleReporter {
public:
    void ReportRuns(const std::vector<Run> &runs) override {
        for (const Run &r : runs) {
            if (r.error_occurred) continue;
            rates[r.report_label] =
                r.counters.count("bytes_per_second") ? (double)r.counters.at("bytes_per_second") : 0.0;
            if (r.counters.count("items_per_second")) tokens[r.report_label] = (double)r.counters.at("items_per_second");
        }
        ConsoleReporter::ReportRuns(runs);
    }
    std::map<std::string, double> rates, tokens;
};

}  // namespace

int main(int argc, char **argv) {
    benchmark::Initialize(&argc, argv);
    RatioReporter rep;
    benchmark::RunSpecifiedBenchmarks(&rep);
    std::printf("\n%-8s %-8s %10s %10s\n", "kernel", "backend", "GB/s", "vs scalar");
    for (const char *kern : {"F32", "Q8G", "Q4G", "Q3G", "VQ3R", "VQ4P", "ATTN", "GELUtanh", "GELUerf"})
        for (const char *be : {"scalar", "avx2", "avx512", "neon"}) {
            auto it = rep.rates.find(std::string(kern) + "/" + be);
            auto base = rep.rates.find(std::string(kern) + "/scalar");
            if (it == rep.rates.end() || base == rep.rates.end() || base->second <= 0) continue;
            std::printf("%-8s %-8s %10.2f %9.2fx\n", kern, be, it->second / 1e9, it->second / base->second);
        }
    // Prefill tokens/s through one expert matrix and one trunk matrix, per
    // kernel set, and per-token speed-up over T = 1 of the same set.
    // The expert's and the trunk's products alone beside them.
    std::printf("\n%-8s %-8s %8s %12s %12s\n", "product", "backend", "T", "tokens/s", "vs T=1");
    for (const char *part : {"PREFILL", "EXPERT", "TRUNK"})
        for (const char *be : {"scalar", "avx2", "avx512", "neon"})
            for (int T : {1, 8, 64, 512}) {
                auto it = rep.tokens.find(std::string(part) + "x" + std::to_string(T) + "/" + be);
                auto one = rep.tokens.find(std::string(part) + "x1/" + be);
                if (it == rep.tokens.end() || one == rep.tokens.end() || one->second <= 0) continue;
                std::printf("%-8s %-8s %8d %12.1f %11.2fx\n", part, be, T, it->second, it->second / one->second);
            }
    return 0;
}
