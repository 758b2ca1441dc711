#include "kld/kernels/kernel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kld/kernels/kernel_fast.h"
#include "kld/stats/npstats.h"
#include "kld/kernels/torch_f32.h"

namespace sluice::kld {

const fastk::Kernels& fast_kernels(FastIsa isa);  // kernel_fast.cpp

namespace {

constexpr double kLn2 = 0.69314718055994530942;
const double kInf = std::numeric_limits<double>::infinity();

// Fixed 8-lane accumulator: element v goes to lane v % 8 and the lanes merge
// in one fixed tree, so the sum is a function of the data alone.
struct Lanes {
    double l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    double total() const { return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])); }
};

struct RowHead {
    float max;
    int64_t argmax;
    int64_t n_max;
    double lse;  // ln Σ exp(x - max)
};

// Pass 1 for one operand: max, first argmax, tie count, log-sum-exp; refuses
// NaN and +inf (and a row with no finite value).
Status head_fp64(const float* x, int64_t V, RowHead* h, int64_t* bad) {
    float M = -std::numeric_limits<float>::infinity();
    int64_t am = -1, nm = 0;
    for (int64_t v = 0; v < V; ++v) {
        float t = x[v];
        if (!(t < std::numeric_limits<float>::infinity())) {  // NaN or +inf
            *bad = v;
            return err(Code::nonfinite, "");
        }
        if (t > M) { M = t; am = v; nm = 1; }
        else if (t == M) ++nm;
    }
    if (am < 0) {
        *bad = 0;
        return err(Code::nonfinite, "row holds no finite value");
    }
    Lanes s;
    const double Md = M;
    for (int64_t v = 0; v < V; ++v) s.l[v & 7] += std::exp(double(x[v]) - Md);
    h->max = M;
    h->argmax = am;
    h->n_max = nm;
    h->lse = std::log(s.total());
    return {};
}

Status score_fp64(const float* x, const float* y, int64_t V, int32_t tok, bool want_js, RowMetrics* o,
                  int64_t* bad, int* side) {
    RowHead hx, hy;
    if (Status st = head_fp64(x, V, &hx, bad); !st.is_ok()) { *side = 0; return st; }
    if (Status st = head_fp64(y, V, &hy, bad); !st.is_ok()) { *side = 1; return st; }
    const double ox = double(hx.max) + hx.lse, oy = double(hy.max) + hy.lse;  // log-normalisers
    Lanes kl, js, ae;
    double aemax = 0;
    bool kl_inf = false, tie_hit = false;
    for (int64_t v = 0; v < V; ++v) {
        const float xv = x[v], yv = y[v];
        tie_hit |= (xv == hx.max) & (yv == hy.max);
        const bool xf = xv != -std::numeric_limits<float>::infinity();
        const bool yf = yv != -std::numeric_limits<float>::infinity();
        if (!xf && !yf) continue;  // both zero-probability: contributes nothing
        const double a = (double(xv) - double(hx.max)) - hx.lse;
        const double b = (double(yv) - double(hy.max)) - hy.lse;
        if (xf && yf) {  // raw-logit error over entries finite on both sides
            const double d = std::fabs(double(xv) - double(yv));
            ae.l[v & 7] += d;
            if (d > aemax) aemax = d;
        }
        const double p = xf ? std::exp(a) : 0.0;
        if (xf && !yf) kl_inf = true;  // p > 0 exactly, even where exp underflows
        else if (p > 0) kl.l[v & 7] += p * (a - b);
        if (want_js) {
            const double q = yf ? std::exp(b) : 0.0;
            double t;
            if (!yf) t = 0.5 * p * kLn2;        // m = a - ln2
            else if (!xf) t = 0.5 * q * kLn2;   // m = b - ln2
            else {
                // m = max(a,b) + c with c = log1p(exp(-|a-b|)) - ln2; a-m and b-m
                // are formed without the cancellation of (a + c) - a, so equal
                // rows give exactly 0.
                const double c = std::log1p(std::exp(-std::fabs(a - b))) - kLn2;
                const double am = a >= b ? -c : (a - b) - c;
                const double bm = b >= a ? -c : (b - a) - c;
                t = 0.5 * p * am + 0.5 * q * bm;
            }
            js.l[v & 7] += t;
        }
    }
    o->kl = kl_inf ? kInf : kl.total();
    o->js = want_js ? js.total() : 0.0;
    o->abs_err_mean = ae.total() / double(V);
    o->abs_err_max = aemax;
    o->top1_ref = int32_t(hx.argmax);
    o->top1_cand = int32_t(hy.argmax);
    o->top1 = hx.argmax == hy.argmax;
    o->top1_tie_aware = tie_hit;
    o->ref_tied = hx.n_max > 1;
    if (tok >= 0 && tok < V) {
        o->nll_ref = ox - double(x[tok]);
        o->nll_cand = oy - double(y[tok]);
        o->dp = std::exp(-o->nll_cand) - std::exp(-o->nll_ref);
    }
    return {};
}

// The fast path (§7.4): fp32 exp/log1p, fp64 sums in 16 fixed lanes. Same
// outputs and conventions as score_fp64; pass 1 and pass 2 run in the
// kernel of the chosen ISA, and a non-finite row is re-scanned by the fp64
// head so the error names the same column.
Status score_fast(const float* x, const float* y, int64_t V, int32_t tok, bool want_js, RowMetrics* o, int64_t* bad,
                  int* side, FastIsa isa) {
    const fastk::Kernels& k = fast_kernels(isa);
    fastk::Head hx, hy;
    RowHead rh;
    if (!k.head(x, V, &hx)) {
        *side = 0;
        if (Status st = head_fp64(x, V, &rh, bad); !st.is_ok()) return st;
        return err(Code::nonfinite, "fast and fp64 heads disagree");
    }
    if (!k.head(y, V, &hy)) {
        *side = 1;
        if (Status st = head_fp64(y, V, &rh, bad); !st.is_ok()) return st;
        return err(Code::nonfinite, "fast and fp64 heads disagree");
    }
    const double ox = double(hx.max) + std::log(hx.sum), oy = double(hy.max) + std::log(hy.sum);
    fastk::Pass2 p2;
    k.pass2(x, y, V, hx.max, hy.max, ox, oy, want_js, &p2);
    o->kl = p2.kl_inf ? kInf : p2.kl;
    o->js = want_js ? 0.5 * p2.js2 : 0.0;
    o->abs_err_mean = p2.ae_sum / double(V);
    o->abs_err_max = p2.ae_max;
    o->top1_ref = int32_t(hx.argmax);
    o->top1_cand = int32_t(hy.argmax);
    o->top1 = hx.argmax == hy.argmax;
    o->top1_tie_aware = p2.tie_hit;
    o->ref_tied = hx.n_max > 1;
    if (tok >= 0 && tok < V) {
        o->nll_ref = ox - double(x[tok]);
        o->nll_cand = oy - double(y[tok]);
        o->dp = std::exp(-o->nll_cand) - std::exp(-o->nll_ref);
    }
    return {};
}

// festr2 v0 (§4.2): torch's float32 CPU arithmetic, reproduced in its
// reduction order (kernels/torch_f32.h): log_softmax, exp, logaddexp mixture and
// sum(-1) as torch computes them with `lanes`-wide vectors; no clamping;
// first-index argmax on raw logits. The |x - y| statistics are sluice's own.
Status score_festr2(const float* x, const float* y, int64_t V, int32_t tok, bool want_js, RowMetrics* o,
                    int64_t* bad, int* side, int lanes) {
    RowHead hx, hy;
    if (Status st = head_fp64(x, V, &hx, bad); !st.is_ok()) { *side = 0; return st; }
    if (Status st = head_fp64(y, V, &hy, bad); !st.is_ok()) { *side = 1; return st; }
    if (!torchf32::lanes_supported(lanes)) return err(Code::usage, "torch lanes: 8 or 16");
    thread_local std::vector<float> ta, tb, tk, tj1, tj2, tae;
    const size_t n = size_t(V);
    ta.resize(n); tb.resize(n); tk.resize(n); tae.resize(n);
    torchf32::log_softmax(x, V, hx.max, lanes, ta.data());  // a = log_softmax(x)
    torchf32::log_softmax(y, V, hy.max, lanes, tb.data());  // b = log_softmax(y)
    if (want_js) { tj1.resize(n); tj2.resize(n); }
    torchf32::divergence_terms(ta.data(), tb.data(), V, tk.data(), want_js ? tj1.data() : nullptr,
                               want_js ? tj2.data() : nullptr);
    for (size_t v = 0; v < n; ++v) tae[v] = std::fabs(x[v] - y[v]);
    o->kl = double(torchf32::sum(tk.data(), V, lanes));
    o->js = 0;
    if (want_js) {
        const float s1 = torchf32::sum(tj1.data(), V, lanes);
        const float s2 = torchf32::sum(tj2.data(), V, lanes);
        o->js = double(0.5f * s1 + 0.5f * s2);
    }
    float aemax = 0;
    for (size_t v = 0; v < n; ++v) aemax = std::max(aemax, tae[v]);
    o->abs_err_mean = double(np_pairwise_sum_f32(tae.data(), n)) / double(V);
    o->abs_err_max = aemax;
    o->top1_ref = int32_t(hx.argmax);
    o->top1_cand = int32_t(hy.argmax);
    o->top1 = hx.argmax == hy.argmax;
    bool tie_hit = false;
    for (int64_t v = 0; v < V && !tie_hit; ++v) tie_hit = x[v] == hx.max && y[v] == hy.max;
    o->top1_tie_aware = tie_hit;
    o->ref_tied = hx.n_max > 1;
    if (tok >= 0 && tok < V) {
        o->nll_ref = -double(ta[size_t(tok)]);
        o->nll_cand = -double(tb[size_t(tok)]);
        o->dp = std::exp(-o->nll_cand) - std::exp(-o->nll_ref);
    }
    return {};
}

}  // namespace

Status score_row(const float* x, const float* y, int64_t V, int32_t tok, Numerics mode, bool want_js,
                 RowMetrics* out, int64_t* bad_col, int* bad_side, FastIsa isa, int torch_lanes) {
    *out = RowMetrics{};
    if (mode == Numerics::festr2_v0) return score_festr2(x, y, V, tok, want_js, out, bad_col, bad_side, torch_lanes);
    if (mode == Numerics::fast) return score_fast(x, y, V, tok, want_js, out, bad_col, bad_side, isa);
    return score_fp64(x, y, V, tok, want_js, out, bad_col, bad_side);
}

}  // namespace sluice::kld
