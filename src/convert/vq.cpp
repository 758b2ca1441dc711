#include "convert/vq.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers build casts from a deliberately undefined register
// and -Wmaybe-uninitialized reports it at the inlined uses below (GCC bug
// 105593, fixed in GCC 13): not a variable of ours.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "convert/numeric.h"
#include "convert/util.h"
#include "format/crc32.h"

namespace sluice::convert {

uint64_t Rng::next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t Rng::below(uint64_t n) {
    if (n <= 1) return 0;
    const uint64_t lim = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
    for (;;) {
        const uint64_t v = next();
        if (v < lim) return v % n;
    }
}

double Rng::unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }

uint64_t mix_seed(uint64_t a, uint64_t b) {
    Rng r(a * 0x2545F4914F6CDD1Dull + b);
    r.next();
    return r.next();
}

std::vector<uint32_t> partial_perm(uint64_t n, uint64_t k, Rng& rng) {
    k = std::min(k, n);
    std::vector<uint32_t> p(n);
    for (uint64_t i = 0; i < n; ++i) p[i] = static_cast<uint32_t>(i);
    for (uint64_t i = 0; i < k; ++i) std::swap(p[i], p[i + rng.below(n - i)]);
    p.resize(k);
    return p;
}

namespace {

constexpr int64_t kChunk = 4096;  // fixed work split: independent of --jobs

// Nearest entry of a transposed book t[d][E] (E a multiple of 16): the
// least f32 squared distance, each entry's sum taken over d = 0..7 in order
// (exactly the scalar sum: the build uses -ffp-contract=off, so no FMA),
// first minimum wins. Entries go in blocks of 16, one lane each; every lane
// keeps its own running minimum and the first block that reached it (strict
// <), so no block needs a horizontal reduction or a branch. At the end the
// least value over the lanes is found and, among lanes holding it, the
// smallest entry index: the same entry the sequential rule picks. The
// AVX-512, AVX2 and generic clones run the same per-lane arithmetic, so the
// result does not depend on which clone the CPU gets.
typedef float v16f __attribute__((vector_size(64)));

// Clones per x86 ISA (the lane arithmetic is the same in each); other
// targets build the generic vector code once.
#if defined(__x86_64__)
#define SLUICE_VQ_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SLUICE_VQ_CLONES
#endif
typedef int32_t v16i __attribute__((vector_size(64)));

SLUICE_VQ_CLONES
int nearest_t(const float* __restrict t, int E, const float* __restrict x) {
    v16f xd[8] = {};
    for (int d = 0; d < 8; ++d)
        for (int k = 0; k < 16; ++k) xd[d][k] = x[d];
    v16f best = {};
    v16i blk = {};
    for (int j0 = 0; j0 < E; j0 += 16) {
        v16f a = {};
        for (int d = 0; d < 8; ++d) {
            v16f r;
            std::memcpy(&r, t + d * E + j0, 64);
            const v16f df = xd[d] - r;
            a += df * df;
        }
        if (j0 == 0) {
            best = a;
        } else {
            const v16i lt = a < best;
            best = lt ? a : best;
            blk = lt ? (v16i{} + j0) : blk;
        }
    }
    float m = best[0];
    for (int k = 1; k < 16; ++k) m = best[k] < m ? best[k] : m;
    int idx = E;
    for (int k = 0; k < 16; ++k)
        if (best[k] == m && blk[k] + k < idx) idx = blk[k] + k;
    return idx < E ? idx : 0;  // only NaN distances (a non-finite source row) find nothing
}

// The same entry as nearest_t, found faster on AVX-512 machines by screening.
// Pass 1 scores every entry with s_j = x.c_j - |c_j|^2/2 (8 fused
// multiply-adds per 16 entries instead of 24 operations): the larger s_j,
// the nearer c_j. Pass 2 computes the exact rule's distance (the lane
// arithmetic of nearest_t, in index order, strict <) only for entries whose
// score is within a slack of the best score. The slack bounds the rounding
// of both computations: with K = (|x| + max_j |c_j|)^2 <= 2 (|x|^2 + cmax^2),
// the exact rule's f32 distance is within 11u K of the real one and 2 s_j
// within 10u K of its real value (u = 2^-24), so any entry whose exact
// distance is <= that of the best-scored entry has s_j >= s_max - 21u K. The
// slack used is 84u x 2 (|x|^2 + cmax^2): at least 4 times that, which also
// absorbs the float rounding of |x|^2 and of the threshold itself (each a
// few u K). Every entry that could win or tie under the exact rule is thus
// rescored exactly, and the result is nearest_t's, bit for bit. NaN scores
// (a non-finite source row) leave no candidate and fall back to nearest_t.
#if defined(__x86_64__)
constexpr float kScreenSlack = 2.0f * 84.0f / 16777216.0f;

__attribute__((target("avx512f")))
int nearest_screened(const float* __restrict t, const float* __restrict nh, int E, float cmax2,
                     const float* __restrict x, float* __restrict s) {
    __m512 xd[8];
    float xx = 0.0f;
    for (int d = 0; d < 8; ++d) {
        xd[d] = _mm512_set1_ps(x[d]);
        xx += x[d] * x[d];
    }
    __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int j0 = 0; j0 < E; j0 += 16) {
        // Two chains of four: half the latency of one chain of eight.
        __m512 a = _mm512_loadu_ps(nh + j0);
        __m512 b = _mm512_mul_ps(xd[4], _mm512_loadu_ps(t + 4 * E + j0));
        for (int d = 0; d < 4; ++d) a = _mm512_fmadd_ps(xd[d], _mm512_loadu_ps(t + d * E + j0), a);
        for (int d = 5; d < 8; ++d) b = _mm512_fmadd_ps(xd[d], _mm512_loadu_ps(t + d * E + j0), b);
        a = _mm512_add_ps(a, b);
        _mm512_storeu_ps(s + j0, a);
        mx = _mm512_max_ps(mx, a);
    }
    // 1e-37 covers products that underflow.
    const __m512 tv = _mm512_set1_ps(_mm512_reduce_max_ps(mx) - (kScreenSlack * (xx + cmax2) + 1e-37f));
    int best = -1;
    float bd = 0.0f;
    for (int j0 = 0; j0 < E; j0 += 16) {
        for (__mmask16 m = _mm512_cmp_ps_mask(_mm512_loadu_ps(s + j0), tv, _CMP_GE_OQ); m; m &= m - 1) {
            const int j = j0 + __builtin_ctz(m);
            float a = 0.0f;
            for (int d = 0; d < 8; ++d) {
                const float df = x[d] - t[d * E + j];
                a += df * df;
            }
            if (best < 0 || a < bd) {
                bd = a;
                best = j;
            }
        }
    }
    return best >= 0 ? best : nearest_t(t, E, x);
}

const bool kHaveAvx512 = __builtin_cpu_supports("avx512f");
#else
// No screening pass off x86: nearest_t alone gives the same entry.
constexpr bool kHaveAvx512 = false;
inline int nearest_screened(const float* t, const float*, int E, float, const float* x, float*) { return nearest_t(t, E, x); }
#endif

struct BookT {
    int E;
    std::vector<float> t;   // 8 * E, transposed
    std::vector<float> nh;  // -|c_j|^2 / 2, for the screening pass
    float cmax2 = 0.0f;     // max_j |c_j|^2, rounded up
    BookT(const std::vector<float>& c, int e) : E(e), t(static_cast<size_t>(8 * e)), nh(static_cast<size_t>(e)) {
        for (int j = 0; j < e; ++j) {
            double n2 = 0.0;
            for (int d = 0; d < 8; ++d) {
                const float v = c[static_cast<size_t>(j * 8 + d)];
                t[static_cast<size_t>(d * e + j)] = v;
                n2 += static_cast<double>(v) * v;
            }
            nh[static_cast<size_t>(j)] = static_cast<float>(-0.5 * n2);
            cmax2 = std::max(cmax2, static_cast<float>(n2 * (1.0 + 1e-6)));
        }
    }
    // scratch: E floats.
    int nearest(const float* x, float* scratch) const {
        return kHaveAvx512 ? nearest_screened(t.data(), nh.data(), E, cmax2, x, scratch) : nearest_t(t.data(), E, x);
    }
};

float dist8(const float* a, const float* b) {
    float s = 0.0f;
    for (int d = 0; d < 8; ++d) {
        const float t = a[d] - b[d];
        s += t * t;
    }
    return s;
}

bool assign_all(const std::vector<float>& x, int64_t n, const std::vector<float>& c, int E, int jobs,
                std::vector<int32_t>* a, std::string* err) {
    const BookT bt(c, E);
    a->resize(static_cast<size_t>(n));
    const int64_t nchunks = (n + kChunk - 1) / kChunk;
    return parallel_for(nchunks, jobs, [&](int64_t ch, std::string*) {
        std::vector<float> acc(static_cast<size_t>(E));
        const int64_t i1 = std::min(n, (ch + 1) * kChunk);
        for (int64_t i = ch * kChunk; i < i1; ++i) (*a)[static_cast<size_t>(i)] = bt.nearest(&x[static_cast<size_t>(i * 8)], acc.data());
        return true;
    }, err);
}

typedef float v8f __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));

// Per-centroid sums for the Lloyd update, in double, each vector added in
// index order (serial, fixed order: the means do not depend on --jobs). One
// 8-lane add per vector does per lane exactly what eight scalar adds did.
SLUICE_VQ_CLONES
void accumulate(const float* __restrict x, const int32_t* __restrict a, int64_t n, double* __restrict sum,
                int64_t* __restrict cnt) {
    for (int64_t i = 0; i < n; ++i) {
        const int64_t j = a[i];
        v8f xv;
        v8d s;
        std::memcpy(&xv, x + i * 8, 32);
        std::memcpy(&s, sum + j * 8, 64);
        s += __builtin_convertvector(xv, v8d);
        std::memcpy(sum + j * 8, &s, 64);
        ++cnt[j];
    }
}

// d2[i] = min(d2[i], dist8(x_i, ck)) for i in [i0, i1), 16 vectors at a time
// from the dimension-major copy xt[d][n]; per lane the same sum, in the same
// order, as dist8.
SLUICE_VQ_CLONES
void update_d2(const float* __restrict xt, const float* __restrict x, int64_t n, int64_t i0, int64_t i1,
               const float* __restrict ck, float* __restrict d2) {
    v16f cd[8] = {};
    for (int d = 0; d < 8; ++d)
        for (int k = 0; k < 16; ++k) cd[d][k] = ck[d];
    int64_t i = i0;
    for (; i + 16 <= i1; i += 16) {
        v16f s = {};
        for (int d = 0; d < 8; ++d) {
            v16f xv;
            std::memcpy(&xv, xt + d * n + i, 64);
            const v16f t = xv - cd[d];
            s += t * t;
        }
        v16f old;
        std::memcpy(&old, d2 + i, 64);
        old = s < old ? s : old;
        std::memcpy(d2 + i, &old, 64);
    }
    for (; i < i1; ++i) {
        const float dd = dist8(x + i * 8, ck);
        if (dd < d2[i]) d2[i] = dd;
    }
}

// prefix[i] = d2[0] + ... + d2[i] in double, serially in index order
// (deterministic); returns the total. A function of its own so the running
// sum stays in a register: inlined into seed_pp, GCC kept it on the stack and
// the loop ran at store-forwarding latency (2.5x slower).
__attribute__((noinline)) double running_sums(const float* __restrict d2, int64_t n, double* __restrict prefix) {
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        total += d2[i];
        prefix[i] = total;
    }
    return total;
}

// k-means++ seeding (D^2 sampling): fewer bad starts than picking random
// rows, which matters for the 10-iteration budget.
bool seed_pp(const std::vector<float>& x, int64_t n, int E, Rng& rng, int jobs, std::vector<float>* c,
             std::string* err) {
    c->assign(static_cast<size_t>(E * 8), 0.0f);
    std::vector<float> d2(static_cast<size_t>(n), std::numeric_limits<float>::max());
    std::vector<float> xt(static_cast<size_t>(n * 8));  // dimension-major: 16-lane distance updates
    for (int64_t i = 0; i < n; ++i)
        for (int d = 0; d < 8; ++d) xt[static_cast<size_t>(d * n + i)] = x[static_cast<size_t>(i * 8 + d)];
    std::vector<double> prefix(static_cast<size_t>(n));
    int64_t pick = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n)));
    const int64_t nchunks = (n + kChunk - 1) / kChunk;
    for (int k = 0; k < E; ++k) {
        std::memcpy(&(*c)[static_cast<size_t>(k * 8)], &x[static_cast<size_t>(pick * 8)], 32);
        if (k + 1 == E) break;
        const float* ck = &(*c)[static_cast<size_t>(k * 8)];
        if (!parallel_for(nchunks, jobs, [&](int64_t ch, std::string*) {
                update_d2(xt.data(), x.data(), n, ch * kChunk, std::min(n, (ch + 1) * kChunk), ck, d2.data());
                return true;
            }, err))
            return false;
        const double total = running_sums(d2.data(), n, prefix.data());
        if (!(total > 0.0)) {
            pick = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n)));
            continue;
        }
        // The first index whose running sum exceeds the target. The running
        // sums of non-negative terms never decrease, so a binary search over
        // them finds the index a linear scan would stop at.
        const double target = rng.unit() * total;
        const auto it = std::upper_bound(prefix.begin(), prefix.end(), target);
        pick = it == prefix.end() ? n - 1 : static_cast<int64_t>(it - prefix.begin());
    }
    return true;
}

}  // namespace

bool train_rvq(std::vector<float>& x, int S, int E, int iters, uint64_t seed, int jobs,
               std::vector<std::vector<float>>* books, std::string* err) {
    const int64_t n = static_cast<int64_t>(x.size() / 8);
    if (n < E) {
        *err = "only " + std::to_string(n) + " training vectors for " + std::to_string(E) +
               " codebook entries (use fewer --entries or a larger --cb-sample)";
        return false;
    }
    books->assign(static_cast<size_t>(S), {});
    std::vector<int32_t> a;
    for (int s = 0; s < S; ++s) {
        Rng rng(mix_seed(seed, static_cast<uint64_t>(s)));
        std::vector<float> c;
        if (!seed_pp(x, n, E, rng, jobs, &c, err)) return false;
        for (int it = 0; it < iters; ++it) {
            if (!assign_all(x, n, c, E, jobs, &a, err)) return false;
            std::vector<double> sum(static_cast<size_t>(E * 8), 0.0);
            std::vector<int64_t> cnt(static_cast<size_t>(E), 0);
            accumulate(x.data(), a.data(), n, sum.data(), cnt.data());
            for (int j = 0; j < E; ++j)
                if (cnt[static_cast<size_t>(j)] > 0)  // empty clusters keep their centroid
                    for (int d = 0; d < 8; ++d)
                        c[static_cast<size_t>(j * 8 + d)] =
                            static_cast<float>(sum[static_cast<size_t>(j * 8 + d)] / static_cast<double>(cnt[static_cast<size_t>(j)]));
        }
        if (!assign_all(x, n, c, E, jobs, &a, err)) return false;
        for (int64_t i = 0; i < n; ++i)
            for (int d = 0; d < 8; ++d)
                x[static_cast<size_t>(i * 8 + d)] -= c[static_cast<size_t>(a[static_cast<size_t>(i)] * 8 + d)];
        (*books)[static_cast<size_t>(s)] = std::move(c);
    }
    return true;
}

void encode_rvq(const float* x, int64_t n, const std::vector<std::vector<float>>& books, int E, uint8_t* idx) {
    const int S = static_cast<int>(books.size());
    std::vector<BookT> bt;
    for (const auto& b : books) bt.emplace_back(b, E);
    std::vector<float> acc(static_cast<size_t>(E));
    // Stage by stage over a batch of vectors: stage s + 1 of a vector needs
    // stage s's entry, but the searches of different vectors are independent
    // and overlap in the CPU; vector by vector they ran one at a time. Each
    // vector sees the same operations in the same order either way.
    constexpr int64_t kBatch = 64;
    float r[kBatch * 8];
    for (int64_t i0 = 0; i0 < n; i0 += kBatch) {
        const int64_t nb = std::min(kBatch, n - i0);
        std::memcpy(r, x + i0 * 8, static_cast<size_t>(nb) * 32);
        for (int s = 0; s < S; ++s)
            for (int64_t b = 0; b < nb; ++b) {
                float* rb = r + b * 8;
                const int j = bt[static_cast<size_t>(s)].nearest(rb, acc.data());
                idx[(i0 + b) * S + s] = static_cast<uint8_t>(j);
                const float* c = &books[static_cast<size_t>(s)][static_cast<size_t>(j * 8)];
                for (int d = 0; d < 8; ++d) rb[d] -= c[d];
            }
    }
}

RecordGeom record_geometry(int64_t I, int64_t lat, int S, int index_bits) {
    RecordGeom g;
    g.S = S;
    g.index_bits = index_bits;
    g.rows[0] = g.rows[1] = I; g.cols[0] = g.cols[1] = lat;
    g.rows[2] = lat; g.cols[2] = I;
    const uint64_t u = index_bits == 6 ? 3 : static_cast<uint64_t>(S);
    uint64_t off = 48;
    for (int k = 0; k < 3; ++k) {
        const uint64_t nb = static_cast<uint64_t>((g.rows[k] + kIndexBlock - 1) / kIndexBlock);
        g.idx_bytes[k] = nb * static_cast<uint64_t>(g.cols[k] / kVecDim) * kIndexBlock * u;
        g.off[k] = static_cast<uint32_t>(off);
        off += g.idx_bytes[k];
    }
    g.off[3] = static_cast<uint32_t>(off);
    g.scale_end = off + 2 * static_cast<uint64_t>(2 * I + lat);
    g.stride = (g.scale_end + 4095) / 4096 * 4096;
    return g;
}

static void put16(uint8_t* p, uint32_t v) { p[0] = v & 0xFF; p[1] = (v >> 8) & 0xFF; }
static void put32(uint8_t* p, uint32_t v) { for (int i = 0; i < 4; ++i) p[i] = (v >> (8 * i)) & 0xFF; }

void build_record(const RecordGeom& g, int layer, int expert, int codebook_id, const uint8_t* const idx[3],
                  const uint16_t* const scales[3], uint8_t* rec) {
    std::memset(rec, 0, g.stride);
    const int S = g.S;
    const uint64_t u = g.index_bits == 6 ? 3 : static_cast<uint64_t>(S);
    for (int k = 0; k < 3; ++k) {
        const int64_t M = g.rows[k], nv = g.cols[k] / kVecDim;
        uint8_t* base = rec + g.off[k];
        for (int64_t r = 0; r < M; ++r) {
            for (int64_t v = 0; v < nv; ++v) {
                const uint8_t* s = idx[k] + (r * nv + v) * S;
                uint8_t* dst = base + ((static_cast<uint64_t>(r / kIndexBlock) * nv + v) * kIndexBlock + r % kIndexBlock) * u;
                if (g.index_bits == 6) {  // four 6-bit fields, little-endian 24-bit
                    dst[0] = static_cast<uint8_t>(s[0] | (s[1] << 6));
                    dst[1] = static_cast<uint8_t>((s[1] >> 2) | (s[2] << 4));
                    dst[2] = static_cast<uint8_t>((s[2] >> 4) | (s[3] << 2));
                } else {
                    std::memcpy(dst, s, static_cast<size_t>(S));
                }
            }
        }
    }
    uint8_t* sc = rec + g.off[3];
    for (int k = 0; k < 3; ++k)
        for (int64_t r = 0; r < g.rows[k]; ++r, sc += 2) put16(sc, scales[k][r]);
    put32(rec + 0, 0x50584557u);  // "WEXP"
    put16(rec + 4, static_cast<uint32_t>(layer));
    put16(rec + 6, static_cast<uint32_t>(expert));
    rec[8] = g.index_bits == 6 ? 8 : 4;  // VQ4P or VQ3R (also for 2 stages)
    rec[9] = 0;
    put16(rec + 10, static_cast<uint32_t>(codebook_id));
    put32(rec + 16, static_cast<uint32_t>(g.stride / 4096));
    put32(rec + 20, g.off[0]);
    put32(rec + 24, g.off[1]);
    put32(rec + 28, g.off[2]);
    put32(rec + 32, g.off[3]);
    put32(rec + 36, crc32_ieee(rec + 48, g.scale_end - 48));
}

void unpack_indices(const RecordGeom& g, int kind, const uint8_t* rec, uint8_t* idx) {
    const int S = g.S;
    const uint64_t u = g.index_bits == 6 ? 3 : static_cast<uint64_t>(S);
    const int64_t M = g.rows[kind], nv = g.cols[kind] / kVecDim;
    const uint8_t* base = rec + g.off[kind];
    for (int64_t r = 0; r < M; ++r)
        for (int64_t v = 0; v < nv; ++v) {
            const uint8_t* p = base + ((static_cast<uint64_t>(r / kIndexBlock) * nv + v) * kIndexBlock + r % kIndexBlock) * u;
            uint8_t* s = idx + (r * nv + v) * S;
            if (g.index_bits == 6) {
                s[0] = p[0] & 63;
                s[1] = ((p[0] >> 6) | (p[1] << 2)) & 63;
                s[2] = ((p[1] >> 4) | (p[2] << 4)) & 63;
                s[3] = p[2] >> 2;
            } else {
                std::memcpy(s, p, static_cast<size_t>(S));
            }
        }
}

std::vector<uint8_t> codebook_record(uint32_t id, const std::vector<float>& entries, int E) {
    std::vector<uint8_t> r(codebook_record_size(E), 0);
    put32(&r[0], 0x4B424357u);  // "WCBK"
    put16(&r[4], id & 0xFFFFu);
    r[6] = 4;  // always VQ3R
    r[7] = kVecDim;
    put32(&r[8], static_cast<uint32_t>(E));
    for (int i = 0; i < E * kVecDim; ++i) put16(&r[16 + 2 * static_cast<size_t>(i)], f32_to_f16(entries[static_cast<size_t>(i)]));
    return r;
}

}  // namespace sluice::convert
