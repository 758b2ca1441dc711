// Every SIMD kernel against the scalar reference on random data.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "format/f16.h"
#include "quant/kernels.h"

using namespace sluice;

namespace {

QTensor random_tensor(QFmt fmt, int64_t rows, int64_t cols, std::mt19937 &rng) {
    QTensor t;
    t.fmt = fmt;
    t.rows = rows;
    t.cols = cols;
    t.group = 128;
    qtensor_geometry(fmt, cols, 128, &t.ng, &t.rowbytes);
    t.data = aligned_alloc_bytes((size_t)(rows * t.rowbytes));
    std::uniform_int_distribution<int> byte(0, 255);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    if (fmt == QFmt::F32) {
        float *f = reinterpret_cast<float *>(t.data.get());
        for (int64_t i = 0; i < rows * cols; i++) f[i] = nd(rng);
    } else {
        for (int64_t i = 0; i < rows * t.rowbytes; i++) t.data[(size_t)i] = (uint8_t)byte(rng);
        t.scales.resize((size_t)(rows * t.ng));
        for (auto &s : t.scales) s = std::fabs(nd(rng)) * 0.01f + 1e-4f;
    }
    return t;
}

std::vector<const Kernels *> simd_sets() {
    std::vector<const Kernels *> v;
    const Kernels *k = nullptr;
    const char *why = nullptr;
    if (select_kernels(SLUICE_BACKEND_AVX2, &k, &why)) v.push_back(k);
    if (select_kernels(SLUICE_BACKEND_AVX512, &k, &why)) v.push_back(k);
    if (select_kernels(SLUICE_BACKEND_NEON, &k, &why)) v.push_back(k);
    return v;
}

}  // namespace

TEST(Kernels, RowDotMatchesScalar) {
    auto sets = simd_sets();
    if (sets.empty()) GTEST_SKIP() << "no SIMD kernel set runs on this CPU";
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (QFmt fmt : {QFmt::F32, QFmt::Q8G, QFmt::Q4G, QFmt::Q3G}) {
        for (int64_t cols : {128, 520, 2304, 40}) {
            QTensor t = random_tensor(fmt, 9, cols, rng);
            std::vector<float> x((size_t)cols);
            for (auto &v : x) v = nd(rng);
            for (const Kernels *k : sets) {
                double worst = 0;
                int differ = 0;
                for (int64_t r = 0; r < t.rows; r++) {
                    float a = kernels_scalar().row_dot[(int)fmt](t, r, x.data());
                    float b = k->row_dot[(int)fmt](t, r, x.data());
                    worst = std::max(worst, (double)std::fabs(a - b) / std::max(1.0f, std::fabs(a)));
                    differ += std::memcmp(&a, &b, sizeof a) != 0;
                }
                std::printf("%-4s cols %5lld %-7s max rel diff %.3e, %d/%lld rows not bit-identical\n", qfmt_name(fmt),
                            (long long)cols, k->name, worst, differ, (long long)t.rows);
                // Scalar is the reference: every SIMD set reproduces its bits.
                EXPECT_EQ(differ, 0) << k->name;
            }
        }
    }
}

// The batched trunk rows (a prefill's product for many tokens) give each
// token row_dot's bits: odd token counts, more than one 64-token block,
// strided inputs and outputs, and ragged last groups.
TEST(Kernels, RowsDotNBitIdenticalToOneInputAtATime) {
    auto sets = simd_sets();
    sets.push_back(&kernels_scalar());
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    int tested = 0;
    for (QFmt fmt : {QFmt::Q8G, QFmt::Q4G, QFmt::Q3G}) {
        for (int64_t cols : {128, 384, 520, 40}) {
            QTensor t = random_tensor(fmt, 11, cols, rng);
            for (int64_t n : {2, 3, 67, 130}) {
                const int64_t ldx = cols + 3, ldy = t.rows + 2;
                std::vector<float> X((size_t)(n * ldx)), Y((size_t)(n * ldy), -1.0f);
                for (auto &v : X) v = nd(rng);
                for (const Kernels *k : sets) {
                    auto many = k->rows_dot_n[(int)fmt];
                    if (!many) continue;
                    tested++;
                    int differ = 0;
                    // Whole, and ragged row ranges (a set may take rows in blocks).
                    many(t, 0, 2, X.data(), ldx, n, Y.data(), ldy);
                    many(t, 2, 7, X.data(), ldx, n, Y.data(), ldy);
                    many(t, 7, t.rows, X.data(), ldx, n, Y.data(), ldy);
                    for (int64_t r = 0; r < t.rows; r++) {
                        for (int64_t i = 0; i < n; i++) {
                            const float one = k->row_dot[(int)fmt](t, r, X.data() + i * ldx);
                            differ += std::memcmp(&one, &Y[(size_t)(i * ldy + r)], sizeof one) != 0;
                        }
                    }
                    EXPECT_EQ(differ, 0) << k->name << " " << qfmt_name(fmt) << " cols " << cols << " n " << n;
                }
            }
        }
    }
    std::printf("rows_dot_n: %d (set, format, shape, n) cases checked against row_dot\n", tested);
    if (tested == 0) GTEST_SKIP() << "no kernel set on this CPU has batched rows";
}

// axpy rounds the product before the add on every set: the bits of the
// generic loop it replaces (y[i] += a * x[i] with contraction off).
TEST(Kernels, AxpyBitIdenticalToTheLoop) {
    auto sets = simd_sets();
    sets.push_back(&kernels_scalar());
    std::mt19937 rng(14);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int64_t n : {1, 7, 16, 37, 512}) {
        std::vector<float> x((size_t)n), y0((size_t)n);
        for (auto &v : x) v = nd(rng);
        for (auto &v : y0) v = nd(rng);
        const float a = nd(rng);
        std::vector<float> ref = y0;
        for (int64_t i = 0; i < n; i++) {
            volatile float p = a * x[(size_t)i];  // rounded on its own
            ref[(size_t)i] = ref[(size_t)i] + p;
        }
        for (const Kernels *k : sets) {
            std::vector<float> y = y0;
            k->axpy(a, x.data(), y.data(), n);
            EXPECT_EQ(std::memcmp(y.data(), ref.data(), (size_t)n * 4), 0) << k->name << " n=" << n;
        }
    }
}

// Several kVqTile tiles, ragged row ranges inside 64-row blocks, and 1-3
// stages: the SIMD products keep the scalar kernel's tile order exactly.
TEST(Kernels, VqGemvTilesAndRaggedRangesBitIdentical) {
    auto sets = simd_sets();
    if (sets.empty()) GTEST_SKIP() << "no SIMD kernel set runs on this CPU";
    std::mt19937 rng(12);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t M = 200, N = 8 * 80, nv = N / 8;  // 3 tiles of vector positions, 4 row blocks
    for (int S : {1, 2, 3}) {
        const int E = 256;
        std::vector<float> T((size_t)nv * S * E), scale((size_t)M);
        for (auto &v : T) v = nd(rng);
        for (auto &v : scale) v = nd(rng);
        std::vector<uint8_t> idx((size_t)(4 * nv * 64 * S + 64));
        for (auto &b : idx) b = (uint8_t)(rng() & 255);
        for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, M}, {5, 93}, {64, 72}, {13, 14}, {100, 200}}) {
            std::vector<float> ref((size_t)M, -1.0f), got((size_t)M, -1.0f);
            kernels_scalar().vq_gemv_u8(T.data(), idx.data(), nv, S, E, scale.data(), ref.data(), r0, r1);
            for (const Kernels *k : sets) {
                std::fill(got.begin(), got.end(), -1.0f);
                k->vq_gemv_u8(T.data(), idx.data(), nv, S, E, scale.data(), got.data(), r0, r1);
                EXPECT_EQ(ref, got) << k->name << " S=" << S << " rows [" << r0 << ", " << r1 << ")";
            }
        }
    }
}

TEST(Kernels, VqGemvBitIdenticalToScalar) {
    auto sets = simd_sets();
    if (sets.empty()) GTEST_SKIP() << "no SIMD kernel set runs on this CPU";
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> byte(0, 255);
    const int64_t M = 96, N = 136, nv = N / 8;  // a 32-row tail block
    for (int S : {2, 3}) {
        const int E = 256;
        std::vector<float> books((size_t)S * E * 8), x((size_t)N), T((size_t)nv * S * E), scale((size_t)M);
        for (auto &v : books) v = nd(rng);
        for (auto &v : x) v = nd(rng);
        for (auto &v : scale) v = nd(rng);
        std::vector<uint8_t> idx((size_t)(2 * nv * 64 * S + 64));
        for (auto &b : idx) b = (uint8_t)byte(rng);
        const float *bp[8];
        for (int s = 0; s < S; s++) bp[s] = books.data() + s * E * 8;
        kernels_scalar().vq_table(x.data(), nv, S, E, bp, T.data());
        std::vector<float> ref((size_t)M), got((size_t)M);
        kernels_scalar().vq_gemv_u8(T.data(), idx.data(), nv, S, E, scale.data(), ref.data(), 0, M);
        for (const Kernels *k : sets) {
            std::vector<float> T2(T.size());
            k->vq_table(x.data(), nv, S, E, bp, T2.data());
            double tdiff = 0;
            for (size_t i = 0; i < T.size(); i++) tdiff = std::max(tdiff, (double)std::fabs(T[i] - T2[i]));
            k->vq_gemv_u8(T.data(), idx.data(), nv, S, E, scale.data(), got.data(), 0, M);
            std::printf("VQ S=%d %-7s table max diff %.3e (%s), gemv %s\n", S, k->name, tdiff,
                        T == T2 ? "bit-identical" : "DIFFERENT", ref == got ? "bit-identical" : "DIFFERENT");
            EXPECT_EQ(T, T2);
            EXPECT_EQ(ref, got);
        }
    }
}

TEST(Kernels, Vq4pInt8TableAndGemv) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> byte(0, 255);
    const int64_t M = 80, nv = 40;  // two 32-position blocks, the second partial
    std::vector<float> T((size_t)nv * 4 * 64), scale((size_t)M), lam(2);
    for (auto &v : T) v = nd(rng);
    for (auto &v : scale) v = nd(rng);
    std::vector<int8_t> Tq(T.size() + 64);
    vq_quantize_table_i8(T.data(), nv, Tq.data(), lam.data());
    // The recipe: q = clamp(rint(T * (127/M)), ±127), λ = M/127 per block.
    for (int b = 0; b < 2; b++) {
        float M0 = 0;
        for (int64_t i = b * 32 * 256; i < std::min<int64_t>(nv, (b + 1) * 32) * 256; i++) M0 = std::max(M0, std::fabs(T[(size_t)i]));
        EXPECT_EQ(lam[(size_t)b], M0 / 127.0f);
        for (int64_t i = b * 32 * 256; i < std::min<int64_t>(nv, (b + 1) * 32) * 256; i++)
            ASSERT_EQ(Tq[(size_t)i], (int8_t)std::nearbyint(T[(size_t)i] * (127.0f / M0)));
    }
    std::vector<uint8_t> idx((size_t)(2 * nv * 64 * 3 + 64));
    for (auto &b : idx) b = (uint8_t)byte(rng);
    std::vector<float> ref((size_t)M), got((size_t)M);
    kernels_scalar().vq_gemv_p6(Tq.data(), lam.data(), idx.data(), nv, scale.data(), ref.data(), 0, M);
    for (const Kernels *k : simd_sets()) {
        k->vq_gemv_p6(Tq.data(), lam.data(), idx.data(), nv, scale.data(), got.data(), 0, M);
        std::printf("VQ4P %-7s gemv %s\n", k->name, ref == got ? "bit-identical" : "DIFFERENT");
        EXPECT_EQ(ref, got);
        // Ranges that start and end mid-block (how threads split a matrix).
        for (auto [r0, r1] : {std::pair<int64_t, int64_t>{5, 70}, {16, 64}, {3, 79}, {64, 80}, {1, 15}}) {
            std::vector<float> part((size_t)M, -1.0f);
            k->vq_gemv_p6(Tq.data(), lam.data(), idx.data(), nv, scale.data(), part.data(), r0, r1);
            for (int64_t r = 0; r < M; r++)
                ASSERT_EQ(part[(size_t)r], r >= r0 && r < r1 ? ref[(size_t)r] : -1.0f)
                    << k->name << " rows [" << r0 << "," << r1 << ") row " << r;
        }
    }
}

// The block-major, tiled and 4-position-unrolled VQ product against the
// definition, one row at a time: y[r] = scale[r] * (sum over v, then s, of
// T[v][s][code]) in f32. Sizes cover a position count that is not a
// multiple of the unroll or the tile, partial row blocks, and row ranges that
// start and end mid-block (how threads split a matrix).
TEST(Kernels, VqGemvMatchesRowAtATimeDefinition) {
    std::mt19937 rng(23);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> byte(0, 255);
    int checked = 0;
    // Every backend this CPU runs: the AVX-512 one has its own product for
    // 256-entry books, which must give the definition's bits too.
    std::vector<const Kernels *> backends{&kernels_scalar()};
    for (sluice_backend b : {SLUICE_BACKEND_AVX2, SLUICE_BACKEND_AVX512, SLUICE_BACKEND_NEON}) {
        const Kernels *k = nullptr;
        const char *why = nullptr;
        if (select_kernels(b, &k, &why)) backends.push_back(k);
    }
    for (int S : {1, 2, 3, 4}) {
        for (int E : {64, 256}) {
            for (int64_t nv : {1, 3, 4, 7, 33, 70}) {
                // 4500 rows once: the AVX512-VBMI product works in passes of 4096.
                const int64_t M = nv == 3 ? 4500 : 150;
                std::vector<float> T((size_t)(nv * S * E)), scale((size_t)M);
                for (auto &v : T) v = nd(rng);
                for (auto &v : scale) v = nd(rng);
                std::vector<uint8_t> idx((size_t)(((M + 63) / 64) * nv * 64 * S));
                for (auto &b : idx) b = (uint8_t)(byte(rng) % E);
                std::vector<float> want((size_t)M);
                for (int64_t r = 0; r < M; r++) {
                    float a = 0.0f;
                    for (int64_t v = 0; v < nv; v++)
                        for (int s = 0; s < S; s++)
                            a += T[(size_t)((v * S + s) * E + idx[(size_t)(vq_unit_index(r, v, nv) * S + s)])];
                    want[(size_t)r] = scale[(size_t)r] * a;
                }
                for (const Kernels *k : backends)
                    for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, M}, {5, 70}, {64, 128}, {100, 150}, {16, 144}, {3, M - 1}}) {
                        std::vector<float> got((size_t)M, -1.0f);
                        k->vq_gemv_u8(T.data(), idx.data(), nv, S, E, scale.data(), got.data(), r0, r1);
                        for (int64_t r = r0; r < r1; r++)
                            ASSERT_EQ(got[(size_t)r], want[(size_t)r]) << k->name << " S=" << S << " E=" << E << " nv="
                                                                       << nv << " rows [" << r0 << "," << r1 << ") row " << r;
                        for (int64_t r = 0; r < M; r++)
                            if (r < r0 || r >= r1) {
                                ASSERT_EQ(got[(size_t)r], -1.0f) << k->name << ": wrote row " << r;
                            }
                        checked++;
                    }
            }
        }
    }
    std::printf("VQ gemv: %d backend/shape/range cases bit-identical to the row-at-a-time definition (%zu backends)\n", checked,
                backends.size());
}

// The shared-code product for several inputs (a prefill chunk's tokens on
// one expert) against vq_gemv_u8 per input: every backend that has one,
// 1-16 inputs (padding lanes at 4, 5 and 9), ragged row ranges, 1-3 stages.
TEST(Kernels, VqTokensBitIdenticalToOneInputAtATime) {
    std::vector<const Kernels *> sets{&kernels_scalar()};
    for (const Kernels *k : simd_sets()) sets.push_back(k);
    std::mt19937 rng(21);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    int checked = 0, fast = 0;
    for (int S : {1, 2, 3})
        for (int E : {64, 256})
            for (int64_t nv : {3, 20}) {
                const int64_t M = 150;
                std::vector<uint8_t> idx((size_t)(((M + 63) / 64) * nv * 64 * S));
                for (auto &b : idx) b = (uint8_t)(rng() % (unsigned)E);
                std::vector<float> scale((size_t)M);
                for (auto &v : scale) v = nd(rng);
                for (int64_t m : {1, 3, 4, 5, 8, 9, 16}) {
                    std::vector<std::vector<float>> T((size_t)m, std::vector<float>((size_t)(nv * S * E)));
                    for (auto &t : T)
                        for (auto &v : t) v = nd(rng);
                    std::vector<const float *> tp;
                    for (auto &t : T) tp.push_back(t.data());
                    for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, M}, {5, 70}, {64, 128}, {13, 14}}) {
                        std::vector<std::vector<float>> want((size_t)m, std::vector<float>((size_t)M, -1.0f));
                        for (int64_t i = 0; i < m; i++)
                            kernels_scalar().vq_gemv_u8(tp[(size_t)i], idx.data(), nv, S, E, scale.data(),
                                                        want[(size_t)i].data(), r0, r1);
                        for (const Kernels *k : sets) {
                            if (!k->vq_gemm_u8_tokens) continue;
                            std::vector<std::vector<float>> got((size_t)m, std::vector<float>((size_t)M, -1.0f));
                            std::vector<float *> yp;
                            for (auto &g : got) yp.push_back(g.data());
                            std::vector<float> scratch((size_t)vq_tokens_scratch(m, r1 - r0, S, E));
                            k->vq_gemm_u8_tokens(tp.data(), m, idx.data(), nv, S, E, scale.data(), yp.data(), r0, r1,
                                                 scratch.data());
                            for (int64_t i = 0; i < m; i++)
                                ASSERT_EQ(got[(size_t)i], want[(size_t)i])
                                    << k->name << " S=" << S << " E=" << E << " nv=" << nv << " m=" << m << " rows ["
                                    << r0 << "," << r1 << ") input " << i;
                            checked++;
                            fast += k != &kernels_scalar();
                        }
                    }
                }
            }
    std::printf("VQ tokens: %d backend/shape/range cases bit-identical to one input at a time (%d on a SIMD set)\n",
                checked, fast);
    EXPECT_GT(checked, 0);
}
