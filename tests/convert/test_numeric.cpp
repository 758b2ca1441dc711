// Number formats, packing and record geometry.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "convert/convert.h"
#include "convert/numeric.h"
#include "convert/trunk.h"
#include "convert/vq.h"
#include "format/container.h"
#include "format/crc32.h"
#include "format/f16.h"

#if defined(__clang__) && __clang_major__ < 15 && defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

using namespace sluice::convert;

namespace {
// The reference half conversion: the compiler's own _Float16 cast, or, where
// the compiler lacks _Float16 on x86 (clang before 15), the F16C instruction
// (also IEEE round-to-nearest-even).
#if defined(__clang__) && __clang_major__ < 15 && defined(__x86_64__)
bool ref_half_available() {  // F16C: CPUID.1:ECX bit 29 (clang 14's __builtin_cpu_supports has no "f16c")
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
__attribute__((target("f16c"))) uint16_t ref_half(float f) {
    return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
#else
bool ref_half_available() { return true; }  // the compiler converts
uint16_t ref_half(float f) {
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
}
#endif
}  // namespace

TEST(ConvertNumeric, F16MatchesCompilerHalfConversion) {
    if (!ref_half_available()) GTEST_SKIP() << "no _Float16 in this compiler and no F16C";
    // _Float16 casts are IEEE round-to-nearest-even: the reference for 12.2.
    std::mt19937 rng(1);
    int64_t checked = 0, bad = 0;
    auto check = [&](float f) {
        const uint16_t want = ref_half(f);
        if (std::isnan(f)) return;
        ++checked;
        bad += f32_to_f16(f) != want;
    };
    for (uint32_t e = 0; e < 256; ++e)
        for (int k = 0; k < 2000; ++k) {
            const uint32_t u = (e << 23) | (rng() & 0x7FFFFFu) | (rng() & 1u ? 0x80000000u : 0u);
            float f;
            std::memcpy(&f, &u, 4);
            check(f);
        }
    // Exact ties at every half exponent, incl. subnormal ties.
    for (int e = -26; e < 17; ++e)
        for (int m = 0; m < 64; ++m) check(std::ldexp(1.0f + (m + 0.5f) / 1024.0f, e));
    std::printf("f16 conversion: %lld values checked, %lld mismatches\n", static_cast<long long>(checked),
                static_cast<long long>(bad));
    EXPECT_EQ(bad, 0);
    // Writer and the engine's reader (format/f16.h) agree on every finite half.
    for (uint32_t h = 0; h < 0x7C00; ++h) EXPECT_EQ(f32_to_f16(sluice::f16_scale(static_cast<uint16_t>(h))), h);
}

TEST(ConvertNumeric, SourceFormats) {
    EXPECT_EQ(fp8_e4m3_to_f32(0x7E), 448.0f);
    EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7F)));
    EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
    EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);
    EXPECT_EQ(fp8_e4m3_to_f32(0xC0), -2.0f);
    EXPECT_EQ(fp8_e5m2_to_f32(0x3C), 1.0f);
    EXPECT_TRUE(std::isinf(fp8_e5m2_to_f32(0x7C)));
    const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int c = 0; c < 16; ++c) EXPECT_EQ(fp4_e2m1_to_f32(static_cast<uint8_t>(c)), (c & 8 ? -1 : 1) * mags[c & 7]);
    EXPECT_EQ(e8m0_to_f32(0), 0.0f);  // warp: a zero scale, not 2^-127
    EXPECT_EQ(e8m0_to_f32(127), 1.0f);
    EXPECT_EQ(e8m0_to_f32(130), 8.0f);
    EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
}

TEST(ConvertNumeric, TrunkGeometryAndRoundTrip) {
    // FORMAT.md 4.7 worked numbers for [128, 520].
    EXPECT_EQ(trunk_row_bytes(kQ4G, 640), 320u);
    EXPECT_EQ(trunk_row_bytes(kQ3G, 640), 241u);
    EXPECT_EQ(trunk_row_bytes(kQ8G, 640), 640u);
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 0.02f);
    const int64_t R = 7, N = 520, ng = 5;
    std::vector<float> x(R * N);
    for (float& v : x) v = nd(rng);
    for (int fmt : {kQ8G, kQ4G, kQ3G}) {
        const uint64_t rb = trunk_row_bytes(fmt, ng * 128);
        std::vector<uint8_t> pay(rb * R);
        std::vector<uint16_t> sc(R * ng);
        quantize_rows(x.data(), R, N, fmt, pay.data(), sc.data());
        double worst = 0;
        std::vector<float> y(N);
        sluice::QTensor desc;  // decoded by the engine's own row reader
        desc.fmt = static_cast<sluice::QFmt>(fmt);
        desc.cols = N;
        desc.group = 128;
        for (int64_t r = 0; r < R; ++r) {
            sluice::dequant_row_f32(desc, &pay[rb * r], reinterpret_cast<const uint8_t*>(&sc[r * ng]), y.data());
            for (int64_t i = 0; i < N; ++i) {
                const float s = sluice::f16_scale(sc[r * ng + i / 128]);
                worst = std::max(worst, static_cast<double>(std::fabs(y[i] - x[r * N + i]) / s));
            }
            if (fmt == kQ4G) {
                EXPECT_EQ(pay[rb * r + rb - 1], 0x88);  // fully padded byte
            }
            if (fmt == kQ3G) {
                EXPECT_EQ(pay[rb * r + rb - 1], 0x00);  // guard byte
            }
        }
        std::printf("fmt %d: worst |err| / scale = %.4f\n", fmt, worst);
        // Codes use the f32 scale, the stored scale is its f16 rounding:
        // half a step plus qmax times f16's relative rounding error.
        const double qmax = fmt == kQ8G ? 127 : fmt == kQ4G ? 7 : 3;
        EXPECT_LE(worst, 0.5 + qmax / 2048.0 + 1e-6);
    }
}

TEST(ConvertNumeric, RecordGeometryMatchesFormatExamples) {
    const RecordGeom k = record_geometry(1024, 2304, 3, 8);  // Kimi-Linear 48B (6.10)
    EXPECT_EQ(k.off[0], 48u);
    EXPECT_EQ(k.off[1], 884784u);
    EXPECT_EQ(k.off[2], 1769520u);
    EXPECT_EQ(k.off[3], 2654256u);
    EXPECT_EQ(k.stride, 2666496u);
    const RecordGeom s = record_geometry(64, 128, 3, 8);  // synthetic container
    EXPECT_EQ(s.off[1], 3120u);
    EXPECT_EQ(s.off[2], 6192u);
    EXPECT_EQ(s.off[3], 9264u);
    EXPECT_EQ(s.stride, 12288u);
    const RecordGeom k3 = record_geometry(3072, 3584, 3, 8);
    EXPECT_EQ(k3.stride, 12406784u);
}

TEST(ConvertNumeric, BlockedIndicesRoundTripWithTailRows) {
    for (int bits : {8, 6}) {
        const int S = bits == 6 ? 4 : 3;
        const RecordGeom g = record_geometry(96, 128, S, bits);  // 32-row tail block in gate/up
        std::mt19937 rng(5);
        std::vector<uint8_t> idx[3];
        std::vector<uint16_t> sc[3];
        for (int k = 0; k < 3; ++k) {
            idx[k].resize(g.rows[k] * (g.cols[k] / 8) * S);
            for (auto& v : idx[k]) v = static_cast<uint8_t>(rng() % (bits == 6 ? 64 : 256));
            sc[k].assign(g.rows[k], 0x3C00);
        }
        std::vector<uint8_t> rec(g.stride);
        const uint8_t* ip[3] = {idx[0].data(), idx[1].data(), idx[2].data()};
        const uint16_t* sp[3] = {sc[0].data(), sc[1].data(), sc[2].data()};
        build_record(g, 3, 5, 9, ip, sp, rec.data());
        for (int k = 0; k < 3; ++k) {
            std::vector<uint8_t> back(idx[k].size());
            unpack_indices(g, k, rec.data(), back.data());
            EXPECT_EQ(back, idx[k]) << "kind " << k << " bits " << bits;
        }
        // Tail rows 96..127 of the gate's second block are zero bytes.
        const uint64_t u = bits == 6 ? 3 : S;
        const int64_t nv = 16;
        for (int64_t v = 0; v < nv; ++v)
            for (int64_t r = 32; r < 64; ++r)
                for (uint64_t b = 0; b < u; ++b) ASSERT_EQ(rec[g.off[0] + ((1 * nv + v) * 64 + r) * u + b], 0);
        EXPECT_EQ(rec[8], bits == 6 ? 8 : 4);
        uint32_t crc;
        std::memcpy(&crc, &rec[36], 4);
        EXPECT_EQ(crc, sluice::crc32_ieee(rec.data() + 48, g.scale_end - 48));
    }
}

TEST(ConvertArgs, ParsesEveryOption) {
    ConvertOptions o;
    std::string err;
    ASSERT_TRUE(parse_convert_args({"src", "dst", "--trunk-bits", "3", "--trunk8", "--stages", "4", "--entries", "64",
                                    "--index-bits", "6", "--cb-sample", "5", "--kmeans-iters", "7", "--train-vectors",
                                    "1000", "--seed", "9", "--jobs", "2", "--force", "--quiet"},
                                   &o, &err))
        << err;
    EXPECT_EQ(o.source_dir, "src");
    EXPECT_EQ(o.output_dir, "dst");
    EXPECT_EQ(o.trunk_bits, 3);
    EXPECT_TRUE(o.trunk8 && o.force && o.quiet);
    EXPECT_EQ(o.stages, 4);
    EXPECT_EQ(o.entries, 64);
    EXPECT_EQ(o.index_bits, 6);
    EXPECT_EQ(o.cb_sample, 5);
    EXPECT_EQ(o.kmeans_iters, 7);
    EXPECT_EQ(o.train_vectors, 1000);
    EXPECT_EQ(o.seed, 9u);
    EXPECT_EQ(o.jobs, 2);
    EXPECT_FALSE(parse_convert_args({"src", "dst", "--stages"}, &o, &err));
    EXPECT_FALSE(parse_convert_args({"src", "dst", "--stages", "x"}, &o, &err));
    EXPECT_FALSE(parse_convert_args({"src"}, &o, &err));
    EXPECT_FALSE(parse_convert_args({"src", "dst", "--bogus"}, &o, &err));
    VerifyOptions v;
    ASSERT_TRUE(parse_verify_args({"c.waste", "--source", "src", "--per-expert"}, &v, &err)) << err;
    EXPECT_EQ(v.container_dir, "c.waste");
    EXPECT_EQ(v.source_dir, "src");
    EXPECT_TRUE(v.per_expert);
}

// The encoder's rule, written plainly: per stage the entry with the least
// f32 squared distance summed over d = 0..7 in order, first minimum wins.
static std::vector<uint8_t> scalar_rule_encode(const std::vector<float>& x, int64_t n,
                                               const std::vector<std::vector<float>>& books, int E) {
    const int S = static_cast<int>(books.size());
    std::vector<uint8_t> idx(static_cast<size_t>(n * S));
    for (int64_t i = 0; i < n; ++i) {
        float r[8];
        for (int d = 0; d < 8; ++d) r[d] = x[i * 8 + d];
        for (int s = 0; s < S; ++s) {
            int best = 0;
            float bd = 0;
            for (int j = 0; j < E; ++j) {
                float acc = 0;
                for (int d = 0; d < 8; ++d) {
                    const float t = r[d] - books[s][j * 8 + d];
                    acc += t * t;
                }
                if (j == 0 || acc < bd) { bd = acc; best = j; }
            }
            idx[static_cast<size_t>(i * S + s)] = static_cast<uint8_t>(best);
            for (int d = 0; d < 8; ++d) r[d] -= books[s][best * 8 + d];
        }
    }
    return idx;
}

TEST(ConvertVq, EncoderMatchesScalarRuleIncludingTies) {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int S = 3, E = 64;
    std::vector<std::vector<float>> books(S, std::vector<float>(E * 8));
    for (auto& b : books) {
        for (float& v : b) v = u(rng) * 0.5f;
        for (int j = 48; j < 64; ++j)  // exact duplicates of earlier entries: ties
            for (int d = 0; d < 8; ++d) b[j * 8 + d] = b[(j - 40) * 8 + d];
    }
    const int64_t n = 20000;
    std::vector<float> x(n * 8);
    for (int64_t i = 0; i < n; ++i)
        for (int d = 0; d < 8; ++d)  // some vectors sit exactly on an entry
            x[i * 8 + d] = (i % 7 == 0) ? books[0][(i % E) * 8 + d] : u(rng);
    std::vector<uint8_t> idx(n * S);
    encode_rvq(x.data(), n, books, E, idx.data());
    const std::vector<uint8_t> want = scalar_rule_encode(x, n, books, E);
    int64_t bad = 0;
    for (size_t i = 0; i < idx.size(); ++i) bad += idx[i] != want[i];
    std::printf("encoder vs scalar rule: %lld indices compared, %lld differ\n", static_cast<long long>(n * S),
                static_cast<long long>(bad));
    EXPECT_EQ(bad, 0);
}

// Near-ties: vectors at the midpoint of two entries (plus noise of a few
// ulps), at several magnitudes and book sizes. On AVX-512 machines the
// encoder screens entries with a dot-product score before the exact rule;
// the screening slack must keep every entry that can win or tie.
TEST(ConvertVq, EncoderMatchesScalarRuleOnNearTies) {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    int64_t compared = 0, bad = 0;
    for (int E : {16, 64, 256})
        for (float mag : {1e-3f, 1.0f, 40.0f}) {
            const int S = 2;
            std::vector<std::vector<float>> books(S, std::vector<float>(E * 8));
            for (auto& b : books)
                for (float& v : b) v = u(rng) * mag;
            const int64_t n = 4000;
            std::vector<float> x(n * 8);
            for (int64_t i = 0; i < n; ++i) {
                const int a = static_cast<int>(rng() % E), b = static_cast<int>(rng() % E);
                const float eps = (i % 3 == 0) ? 0.0f : (i % 3 == 1 ? 1e-7f : 1e-6f) * mag;
                for (int d = 0; d < 8; ++d)
                    x[i * 8 + d] = 0.5f * (books[0][a * 8 + d] + books[0][b * 8 + d]) + eps * u(rng);
            }
            std::vector<uint8_t> idx(n * S);
            encode_rvq(x.data(), n, books, E, idx.data());
            const std::vector<uint8_t> want = scalar_rule_encode(x, n, books, E);
            for (size_t i = 0; i < idx.size(); ++i) bad += idx[i] != want[i];
            compared += static_cast<int64_t>(idx.size());
        }
    std::printf("near ties: %lld indices compared, %lld differ\n", static_cast<long long>(compared),
                static_cast<long long>(bad));
    EXPECT_EQ(bad, 0);
}
