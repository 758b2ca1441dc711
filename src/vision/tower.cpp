#include "vision/tower.h"

#include <cmath>
#include <cstring>

#include "format/f16.h"

namespace sluice::vision {
namespace {

// One row of a resident trunk matrix as f32 (the values the kernels multiply).
void row_f32(const QTensor &t, int64_t r, float *out) {
    if (t.fmt == QFmt::F32) {
        std::memcpy(out, t.f32() + r * t.cols, (size_t)t.cols * 4);
        return;
    }
    const uint8_t *row = t.row(r);
    const float *s = t.row_scales(r);
    for (int64_t i = 0; i < t.cols; i++) {
        int q;
        if (t.fmt == QFmt::Q8G) {
            q = (int8_t)row[(size_t)i];
        } else if (t.fmt == QFmt::Q4G) {
            const uint8_t b = row[(size_t)(i >> 1)];
            q = (int)((i & 1) ? (b >> 4) : (b & 15)) - 8;
        } else {
            const int64_t p = 3 * i;
            const unsigned v = row[(size_t)(p >> 3)] | ((unsigned)row[(size_t)(p >> 3) + 1] << 8);
            q = (int)((v >> (p & 7)) & 7) - 4;
        }
        out[i] = (float)q * s[i / t.group];
    }
}

std::string shape_str(const std::vector<int64_t> &s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); i++) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

struct Loader {
    const Container &c;
    VisionTower &t;

    Status entry(const std::string &name, const TrunkEntry **e) {
        *e = c.find_full(name);
        if (!*e) return format_error(c.dir() + "/manifest.json: vision tensor '" + name + "' is missing");
        return Status::ok();
    }
    Status mat(const std::string &name, int64_t rows, int64_t cols, QTensor *out) {
        const TrunkEntry *e;
        SLUICE_TRY(entry(name, &e));
        const std::vector<int64_t> want = {rows, cols};
        SLUICE_TRY(c.load_entry(*e, &want, false, out));
        t.resident_bytes += (uint64_t)(out->rows * out->rowbytes + out->scales.size() * 4);
        return Status::ok();
    }
    Status vec(const std::string &name, int64_t n, std::vector<float> *out) {
        const TrunkEntry *e;
        SLUICE_TRY(entry(name, &e));
        const std::vector<int64_t> want = {n};
        QTensor q;
        // The norm vectors must be F32 (VISION.md §1.2): there is no
        // dequantize path for them in the reference engine.
        SLUICE_TRY(c.load_entry(*e, &want, true, &q));
        out->assign(q.f32(), q.f32() + n);
        t.resident_bytes += (uint64_t)n * 4;
        return Status::ok();
    }
};

}  // namespace

Status load_tower(const Container &c, const VisionConfig &cfg, VisionTower *out) {
    VisionTower &t = *out;
    t = VisionTower{};
    t.cfg = cfg;
    Loader ld{c, t};
    const int64_t D = cfg.D, Q = cfg.Q, F = cfg.F, T = cfg.T;
    const std::string where = c.trunk_path() + ": tensor '";

    // Patch kernel: a quantized one must have 588-wide rows ([D, 588]); the
    // converter's 4-D [D, 3, 14, 14] quantizes 14-wide rows, which no
    // reader can use (VISION.md §1.2, §10.9). An F32 one may keep its 4-D
    // shape: the bytes are the same.
    {
        const TrunkEntry *e;
        SLUICE_TRY(ld.entry("vision_tower.patch_embed.proj.weight", &e));
        const std::vector<int64_t> flat = {D, kPatchValues}, conv = {D, 3, kPatch, kPatch};
        if (e->shape == conv && e->fmt != 0)
            return format_error(where + e->name + "' is quantized with shape " + shape_str(e->shape) +
                                ": its rows are 14 values wide, so it cannot be used; requantize it as [" +
                                std::to_string(D) + ", 588] (or store it as F32)");
        if (e->shape != flat && e->shape != conv)
            return format_error(where + e->name + "' has shape " + shape_str(e->shape) + ", expected [" +
                                std::to_string(D) + ", 588] or [" + std::to_string(D) + ", 3, 14, 14]");
        SLUICE_TRY(c.load_entry(*e, &e->shape, false, &t.patch));
        if (e->shape == conv) {  // F32: view the same bytes as [D, 588]
            t.patch.rows = D;
            t.patch.cols = kPatchValues;
            t.patch.rowbytes = kPatchValues * 4;
            t.patch.shape = flat;
        }
        t.resident_bytes += (uint64_t)(t.patch.rows * t.patch.rowbytes + t.patch.scales.size() * 4);
    }
    // Position grid: rows of D, over [PH, PW, D] or [PH·PW, D].
    {
        const TrunkEntry *e;
        SLUICE_TRY(ld.entry("vision_tower.patch_embed.pos_emb.weight", &e));
        const std::vector<int64_t> s3 = {cfg.PH, cfg.PW, D}, s2 = {(int64_t)cfg.PH * cfg.PW, D};
        if (e->shape != s3 && e->shape != s2)
            return format_error(where + e->name + "' has shape " + shape_str(e->shape) + ", expected " +
                                shape_str(s3) + " or " + shape_str(s2));
        QTensor q;
        SLUICE_TRY(c.load_entry(*e, &e->shape, false, &q));
        t.pos.resize((size_t)(cfg.PH * cfg.PW * D));
        for (int64_t r = 0; r < q.rows; r++) row_f32(q, r, t.pos.data() + r * D);
        t.resident_bytes += t.pos.size() * 4;
    }
    t.blocks.resize((size_t)cfg.NL);
    for (int b = 0; b < cfg.NL; b++) {
        TowerBlock &k = t.blocks[(size_t)b];
        const std::string P = "vision_tower.encoder.blocks." + std::to_string(b) + ".";
        SLUICE_TRY(ld.vec(P + "norm0.weight", D, &k.norm0));
        SLUICE_TRY(ld.mat(P + "wqkv.weight", 3 * Q, D, &k.wqkv));
        SLUICE_TRY(ld.mat(P + "wo.weight", D, Q, &k.wo));
        SLUICE_TRY(ld.vec(P + "norm1.weight", D, &k.norm1));
        SLUICE_TRY(ld.mat(P + "mlp.fc0.weight", F, D, &k.fc0));
        SLUICE_TRY(ld.mat(P + "mlp.fc1.weight", D, F, &k.fc1));
    }
    SLUICE_TRY(ld.vec("vision_tower.encoder.final_layernorm.weight", D, &t.final_norm));
    SLUICE_TRY(ld.mat("mm_projector.proj.0.weight", 4 * D, 4 * D, &t.proj0));
    SLUICE_TRY(ld.mat("mm_projector.proj.2.weight", T, 4 * D, &t.proj2));
    SLUICE_TRY(ld.vec("mm_projector.post_norm.weight", T, &t.post_norm));
    return Status::ok();
}

namespace {

// Position grid resized to gh x gw (VISION.md §5.2): bilinear, half-pixel
// centres, edge clamp, float32 in the spec's order.
void position_grid(const VisionTower &t, Grid g, std::vector<float> *E) {
    const VisionConfig &c = t.cfg;
    const int64_t D = c.D;
    E->assign((size_t)(g.gh * g.gw * D), 0.0f);
    if (g.gh == c.PH && g.gw == c.PW) {
        std::copy(t.pos.begin(), t.pos.end(), E->begin());
        return;
    }
    for (int y = 0; y < g.gh; y++) {
        const float fy = ((float)y + 0.5f) * (float)c.PH / (float)g.gh - 0.5f;
        int y0 = (int)std::floor(fy);
        const float wy = fy - (float)y0;
        int y1 = std::clamp(y0 + 1, 0, c.PH - 1);
        y0 = std::clamp(y0, 0, c.PH - 1);
        for (int x = 0; x < g.gw; x++) {
            const float fx = ((float)x + 0.5f) * (float)c.PW / (float)g.gw - 0.5f;
            int x0 = (int)std::floor(fx);
            const float wx = fx - (float)x0;
            int x1 = std::clamp(x0 + 1, 0, c.PW - 1);
            x0 = std::clamp(x0, 0, c.PW - 1);
            const float *a = t.pos.data() + ((int64_t)y0 * c.PW + x0) * D, *b = t.pos.data() + ((int64_t)y0 * c.PW + x1) * D;
            const float *d = t.pos.data() + ((int64_t)y1 * c.PW + x0) * D, *e = t.pos.data() + ((int64_t)y1 * c.PW + x1) * D;
            float *o = E->data() + ((int64_t)y * g.gw + x) * D;
            const float w00 = (1 - wy) * (1 - wx), w01 = (1 - wy) * wx, w10 = wy * (1 - wx), w11 = wy * wx;
            for (int64_t i = 0; i < D; i++) o[i] = w00 * a[i] + w01 * b[i] + w10 * d[i] + w11 * e[i];
        }
    }
}

// 2-D rotary (VISION.md §5.4): adjacent pairs (2j, 2j+1); pair j uses
// frequency index j/2, the column for even j and the row for odd j.
void rotate(float *v, int hd, const float *cs, const float *sn) {
    for (int j = 0; j < hd / 2; j++) {
        const double a = v[2 * j], b = v[2 * j + 1];
        v[2 * j] = (float)(a * cs[j] - b * sn[j]);
        v[2 * j + 1] = (float)(a * sn[j] + b * cs[j]);
    }
}

// Elementwise, so any split across threads gives the same bits.
void gelu(const Ops &ops, void (*f)(float *, int64_t), float *x, int64_t n) {
    ops.pool->parallel_for((n + 1023) / 1024, 4, [&](int64_t b0, int64_t b1) {
        const int64_t lo = b0 * 1024, hi = std::min(n, b1 * 1024);
        f(x + lo, hi - lo);
    });
}

}  // namespace

Status encode(const VisionTower &t, const Ops &ops, const float *pixels, Grid g, std::vector<float> *emb) {
    const VisionConfig &c = t.cfg;
    if (g.gh < 2 || g.gw < 2 || g.gh % 2 || g.gw % 2 || (int64_t)g.gh * g.gw > c.max_patches)
        return arg_error("vision: patch grid " + std::to_string(g.gh) + "x" + std::to_string(g.gw) +
                         " is not even, at least 2x2 and within max_patches " + std::to_string(c.max_patches));
    const int64_t L = (int64_t)g.gh * g.gw, D = c.D, Q = c.Q, F = c.F, T = c.T, nh = c.nh, hd = c.hd();
    std::vector<float> x((size_t)(L * D)), y((size_t)(L * D)), qkv((size_t)(L * 3 * Q)), o((size_t)(L * Q)),
        h((size_t)(L * std::max(F, D))), kT((size_t)(L * Q)), E;
    ops.matmul(t.patch, pixels, kPatchValues, L, x.data(), D);
    position_grid(t, g, &E);
    for (int64_t i = 0; i < L * D; i++) x[(size_t)i] = x[(size_t)i] + E[(size_t)i];

    // Rotary tables per patch: cos/sin of (float)pos · f_i, f_i in float32.
    const int half = (int)hd / 2;
    std::vector<float> cs((size_t)(L * half)), sn((size_t)(L * half));
    for (int64_t p = 0; p < L; p++) {
        const int cx = (int)(p % g.gw), cy = (int)(p / g.gw);
        for (int j = 0; j < half; j++) {
            const int i = j / 2;
            const float f = 1.0f / std::pow(10000.0f, (float)(4 * i) / (float)hd);
            const float angle = (float)(j % 2 == 0 ? cx : cy) * f;
            cs[(size_t)(p * half + j)] = (float)std::cos((double)angle);
            sn[(size_t)(p * half + j)] = (float)std::sin((double)angle);
        }
    }
    const double scale = 1.0 / std::sqrt((double)hd);
    for (const TowerBlock &b : t.blocks) {
        for (int64_t p = 0; p < L; p++) rmsnorm(x.data() + p * D, b.norm0.data(), D, kTowerEps, y.data() + p * D);
        ops.matmul(b.wqkv, y.data(), D, L, qkv.data(), 3 * Q);
        for (int64_t p = 0; p < L; p++)
            for (int64_t hh = 0; hh < nh; hh++) {
                float *row = qkv.data() + p * 3 * Q;
                rotate(row + hh * hd, (int)hd, cs.data() + p * half, sn.data() + p * half);          // q
                rotate(row + Q + hh * hd, (int)hd, cs.data() + p * half, sn.data() + p * half);      // k
            }
        // Full bidirectional attention within the image, per head
        // (quant/tower_math.h): each (head, patch) row is computed in a
        // fixed order by one thread, identically on every backend, so
        // neither the thread count nor the backend changes it. Keys are
        // transposed per head first so the scores vectorise across keys.
        ops.pool->parallel_for(nh * hd, 16, [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; i++) {
                const int64_t hh = i / hd, e = i % hd;
                float *dst = kT.data() + (hh * hd + e) * L;
                const float *src = qkv.data() + Q + hh * hd + e;
                for (int64_t j = 0; j < L; j++) dst[j] = src[j * 3 * Q];
            }
        });
        ops.pool->parallel_for(nh * L, 4, [&](int64_t i0, int64_t i1) {
            std::vector<double> scratch((size_t)(L + hd));
            for (int64_t i = i0; i < i1; i++) {
                const int64_t hh = i / L, p = i % L;
                ops.k->attn_row(qkv.data() + p * 3 * Q + hh * hd, kT.data() + hh * hd * L, L, hd,
                                qkv.data() + 2 * Q + hh * hd, 3 * Q, scale, scratch.data(), o.data() + p * Q + hh * hd);
            }
        });
        ops.matmul(b.wo, o.data(), Q, L, y.data(), D);
        for (int64_t i = 0; i < L * D; i++) x[(size_t)i] = x[(size_t)i] + y[(size_t)i];
        for (int64_t p = 0; p < L; p++) rmsnorm(x.data() + p * D, b.norm1.data(), D, kTowerEps, y.data() + p * D);
        ops.matmul(b.fc0, y.data(), D, L, h.data(), F);
        gelu(ops, ops.k->gelu_tanh, h.data(), L * F);
        ops.matmul(b.fc1, h.data(), F, L, y.data(), D);
        for (int64_t i = 0; i < L * D; i++) x[(size_t)i] = x[(size_t)i] + y[(size_t)i];
    }
    for (int64_t p = 0; p < L; p++) rmsnorm(x.data() + p * D, t.final_norm.data(), D, kTowerEps, y.data() + p * D);

    // 2x2 merge (VISION.md §5.7): top-left, top-right, bottom-left,
    // bottom-right of each tile, tiles row-major.
    const int64_t mh = g.gh / 2, mw = g.gw / 2, N = mh * mw;
    std::vector<float> m((size_t)(N * 4 * D)), hp((size_t)(N * 4 * D)), u((size_t)(N * T));
    for (int64_t a = 0; a < mh; a++)
        for (int64_t cc = 0; cc < mw; cc++) {
            float *dst = m.data() + (a * mw + cc) * 4 * D;
            const int64_t src[4] = {(2 * a) * g.gw + 2 * cc, (2 * a) * g.gw + 2 * cc + 1, (2 * a + 1) * g.gw + 2 * cc,
                                    (2 * a + 1) * g.gw + 2 * cc + 1};
            for (int k = 0; k < 4; k++) std::memcpy(dst + k * D, y.data() + src[k] * D, (size_t)D * 4);
        }
    ops.matmul(t.proj0, m.data(), 4 * D, N, hp.data(), 4 * D);
    gelu(ops, ops.k->gelu_erf, hp.data(), (int64_t)hp.size());
    ops.matmul(t.proj2, hp.data(), 4 * D, N, u.data(), T);
    emb->resize((size_t)(N * T));
    for (int64_t n = 0; n < N; n++) rmsnorm(u.data() + n * T, t.post_norm.data(), T, kProjectorEps, emb->data() + n * T);
    return Status::ok();
}

}  // namespace sluice::vision
