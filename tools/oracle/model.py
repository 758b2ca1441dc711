"""Forward pass of the sluice oracle, written from ../shared/spec/MODEL.md.

Three families: Kimi-Linear (KDA + MLA NoPE + sigmoid MoE), DeepSeek-V3/K2
(MLA with interleaved rotary + YaRN) and Kimi K3 (latent MoE, Attention
Residuals, SiTU, full-rank KDA gate, bounded decay, q-LoRA, gated MLA).

Arithmetic is float64 throughout, except the VQ4P int8 lookup table of
MODEL.md 2.3, which follows its float32 recipe exactly (it is a step
function).  The state (KDA matrices, conv rings, MLA caches, position) is
kept between calls so a prompt followed by single-token steps equals running
the whole sequence token by token (MODEL.md 10).
"""

import math

import numpy as np
import torch

from container import Container, FormatError

# KDA's q/k L2 norm: x / sqrt(sum x^2 + KDA_L2_EPS). 1e-12 is warp's and
# sluice's (MODEL.md 4.2); llama.cpp adds rms_norm_eps there, fla's l2norm
# 1e-6. oracle.py --kda-l2-eps sets it, to attribute a difference between
# engines to this constant alone (tests/llamacpp/differential.py).
KDA_L2_EPS = 1e-12

F64 = torch.float64


# ----------------------------------------------------------------- config
def _num(cfg, key, default):
    if not isinstance(cfg, dict) or key not in cfg:
        return default
    v = cfg[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return default  # wrong JSON type (incl. null) reads as absent
    return v


def _int(cfg, key, default=0):
    return int(_num(cfg, key, default))  # truncation toward zero


class Config:
    """The keys of MODEL.md 1.2, with warp's presence-flag semantics."""

    def __init__(self, cfg):
        self.n_layers = _int(cfg, "num_hidden_layers")
        self.d = _int(cfg, "hidden_size")
        self.vocab = _int(cfg, "vocab_size")
        self.n_heads = _int(cfg, "num_attention_heads")
        if self.n_layers < 1 or self.d < 1 or self.vocab < 1 or self.n_heads < 1:
            raise FormatError("config: layers/hidden/vocab/heads missing")
        self.eps = float(_num(cfg, "rms_norm_eps", 1e-5))
        if not (0.0 < self.eps < 1.0):
            raise FormatError("config: rms_norm_eps out of range")
        self.n_experts = _int(cfg, "num_experts")
        self.top_k = _int(cfg, "num_experts_per_token")
        self.moe_inter = _int(cfg, "moe_intermediate_size")
        self.inter = _int(cfg, "intermediate_size")
        self.n_shared = _int(cfg, "num_shared_experts")
        self.first_dense = _int(cfg, "first_k_dense_replace")
        self.routed_scale = float(_num(cfg, "routed_scaling_factor", 1.0))
        self.renormalize = "moe_renormalize" in cfg                     # presence
        self.q_lora = _int(cfg, "q_lora_rank")
        self.kv_lora = _int(cfg, "kv_lora_rank")
        self.d_nope = _int(cfg, "qk_nope_head_dim")
        self.d_rope = _int(cfg, "qk_rope_head_dim")
        self.d_v = _int(cfg, "v_head_dim")
        nope = cfg.get("mla_use_nope", False)
        if not isinstance(nope, bool):
            raise FormatError("config: mla_use_nope must be a JSON boolean")
        self.use_nope = nope                                             # value
        self.rope_theta = float(_num(cfg, "rope_theta", 10000.0))
        self.out_gate = "mla_use_output_gate" in cfg                     # presence
        self.r_lat = _int(cfg, "routed_expert_hidden_size")
        self.lat_norm = "latent_moe_use_norm" in cfg                     # presence
        self.attn_res = _int(cfg, "attn_res_block_size")
        act = cfg.get("hidden_act", "")
        self.situ = isinstance(act, str) and act == "situ"
        self.situ_b1 = float(_num(cfg, "activation_situ_beta", 1.0))
        self.situ_b2 = float(_num(cfg, "activation_situ_linear_beta", 0.0))
        lac = cfg.get("linear_attn_config")
        lac = lac if isinstance(lac, dict) else {}
        self.kda_H = _int(lac, "num_heads")
        self.kda_D = _int(lac, "head_dim")
        self.conv_k = _int(lac, "short_conv_kernel_size", 4)
        kl = lac.get("kda_layers", [])
        kl = kl if isinstance(kl, list) else []
        self.kda_layers = set(int(v) - 1 for v in kl
                              if isinstance(v, (int, float)) and not isinstance(v, bool))
        self.full_rank_gate = "use_full_rank_gate" in lac                # presence
        self.gate_lb = float(_num(lac, "gate_lower_bound", 0.0))
        self._rope(cfg.get("rope_scaling"))

    def _rope(self, rs):
        """Rotary frequencies (float32, computed in double) and m_att (5.3)."""
        self.rope_freqs = None
        self.m_att = 1.0
        if self.use_nope or self.d_rope <= 0:
            return
        dr, th = self.d_rope, self.rope_theta
        f = np.array([th ** (-2.0 * j / dr) for j in range(dr // 2)], dtype=np.float64)
        if isinstance(rs, dict) and len(rs) > 0:
            typ = rs.get("type", rs.get("rope_type"))
            if typ != "yarn":
                raise FormatError("rope_scaling: only yarn is supported")
            s = float(_num(rs, "factor", 1.0))
            msc = float(_num(rs, "mscale", 1.0))
            msc_all = float(_num(rs, "mscale_all_dim", 0.0))
            if s > 1.0:
                if msc != msc_all:
                    raise FormatError("rope_scaling: mscale != mscale_all_dim refused")
                L0 = float(_num(rs, "original_max_position_embeddings", 4096))
                bf = float(_num(rs, "beta_fast", 32.0))
                bs = float(_num(rs, "beta_slow", 1.0))

                def corr(b):
                    return dr * math.log(L0 / (2.0 * math.pi * b)) / (2.0 * math.log(th))
                lo = max(math.floor(corr(bf)), 0)
                hi = min(math.ceil(corr(bs)), dr - 1)
                lo, hi = float(lo), float(hi)
                if lo == hi:
                    hi += 0.001
                j = np.arange(dr // 2, dtype=np.float64)
                ramp = np.clip((j - lo) / (hi - lo), 0.0, 1.0)
                f = f * ramp / s + f * (1.0 - ramp)
                if msc_all != 0.0:
                    self.m_att = (0.1 * msc_all * math.log(s) + 1.0) ** 2
        self.rope_freqs = f.astype(np.float32)

    def is_kda(self, L):
        return L in self.kda_layers


# ---------------------------------------------------------------- helpers
def rmsnorm(x, w, eps):
    r = 1.0 / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
    return (x * r) * w


def silu(z):
    return z * torch.sigmoid(z)


def softplus(z):
    return torch.where(z > 20.0, z, torch.log1p(torch.exp(torch.clamp(z, max=20.0))))


def attn_res(vs, nw, pw, eps):
    """AR(v; n, pi) of MODEL.md 8.1; vs: list of [n, d] candidates."""
    V = torch.stack(vs, 0)                                   # [m, n, d]
    r = 1.0 / torch.sqrt((V * V).mean(-1, keepdim=True) + eps)
    score = ((V * r) * (nw * pw)).sum(-1)                    # [m, n]
    a = torch.softmax(score, dim=0)
    return (a[..., None] * V).sum(0)


class Model:
    def __init__(self, path, verify=False):
        self.c = Container(path, verify=verify)
        self.cfg = Config(self.c.config)
        self._experts = {}
        self.vq4p_force = {}
        self.reset()

    # ------------------------------------------------------------ weights
    def W(self, L, name):
        return self.c.get("model.layers.%d.%s" % (L, name))

    def has(self, L, name):
        return self.c.has("model.layers.%d.%s" % (L, name))

    def reset(self):
        """Fresh session state.  Margin diagnostics restart too; vq4p_force
        (call index -> [((v, s, c), q)] overrides) is kept: see vq4p()."""
        self.pos = 0
        self.state = {}
        self.min_router_gap = math.inf     # smallest k-th/(k+1)-th router key gap
        self.vq4p_calls = 0                # tables built since reset()
        self.vq4p_margin = math.inf        # smallest distance of T*127/M to a .5
        self.vq4p_ties = []                # entries closer than TIE_BAND to a .5

    # ------------------------------------------------------------ forward
    def forward(self, ids, trace=None, rows=None):
        """Feed ids at positions pos, pos+1, ...; return logits [n, V] (f64).

        trace: optional list; (layer, stage, [n, d] tensor) tuples are appended.
        rows: optional {index in ids: [d] vector} input rows that replace the
        embedding row there (the image splice, VISION.md 6.3).
        """
        cfg = self.cfg
        n = len(ids)
        positions = list(range(self.pos, self.pos + n))
        emb = self.c.get("model.embed_tokens.weight")
        idx = torch.tensor([t if 0 <= t < emb.shape[0] else 0 for t in ids],
                           dtype=torch.long)
        x = emb[idx].clone()
        for i, v in (rows or {}).items():
            x[i] = torch.as_tensor(v, dtype=x.dtype)
        rec = (lambda L, st, v: trace.append((L, st, v.clone()))) if trace is not None \
            else (lambda L, st, v: None)
        rec(-1, "embed", x)
        eps = cfg.eps
        B = cfg.attn_res
        R = []
        for L in range(cfg.n_layers):
            if B > 0:
                P = x
                if not R:
                    a_in = x
                else:
                    a_in = attn_res(R + [P], self.W(L, "self_attention_res_norm.weight"),
                                    self.W(L, "self_attention_res_proj.weight").reshape(-1),
                                    eps)
                if L % B == 0:
                    R.append(P)
                    P = None
                alpha = self.mixer(L, rmsnorm(a_in, self.W(L, "input_layernorm.weight"),
                                              eps), positions)
                P = alpha if P is None else P + alpha
                rec(L, "attn", P)
                f_in = attn_res(R + [P], self.W(L, "mlp_res_norm.weight"),
                                self.W(L, "mlp_res_proj.weight").reshape(-1), eps)
                P = P + self.ffn(L, rmsnorm(f_in, self.W(L, "post_attention_layernorm.weight"),
                                            eps))
                x = P
            else:
                h = rmsnorm(x, self.W(L, "input_layernorm.weight"), eps)
                x = x + self.mixer(L, h, positions)
                rec(L, "attn", x)
                h = rmsnorm(x, self.W(L, "post_attention_layernorm.weight"), eps)
                x = x + self.ffn(L, h)
            rec(L, "ffn", x)
        if B > 0 and R:
            x = attn_res(R + [x], self.c.get("model.output_attn_res_norm.weight"),
                         self.c.get("model.output_attn_res_proj.weight").reshape(-1), eps)
        rec(-1, "final", x)
        h = rmsnorm(x, self.c.get("model.norm.weight"), eps)
        logits = h @ self.c.get("lm_head.weight").T
        self.pos += n
        return logits

    def mixer(self, L, h, positions):
        if self.cfg.is_kda(L):
            return self.kda(L, h)
        return self.mla(L, h, positions)

    # --------------------------------------------------------------- KDA
    def kda(self, L, h):
        cfg = self.cfg
        H, D, K = cfg.kda_H, cfg.kda_D, cfg.conv_k
        C = H * D
        n = h.shape[0]
        st = self.state.get(L)
        if st is None:
            st = {"S": torch.zeros(H, D, D, dtype=F64),
                  "ring": {k: torch.zeros(K - 1, C, dtype=F64) for k in "qkv"}}
            self.state[L] = st
        conv = {}
        for k in "qkv":
            pi = h @ self.W(L, "self_attn.%s_proj.weight" % k).T            # [n, C]
            w = self.W(L, "self_attn.%s_conv1d.weight" % k).reshape(-1)[:C * K].reshape(C, K)
            buf = torch.cat([st["ring"][k], pi], 0)                         # [K-1+n, C]
            z = torch.zeros(n, C, dtype=F64)
            for j in range(K):
                z += buf[j:j + n] * w[:, j]
            st["ring"][k] = buf[buf.shape[0] - (K - 1):].clone() if K > 1 else buf[:0]
            conv[k] = silu(z).reshape(n, H, D)
        q = conv["q"] / torch.sqrt((conv["q"] ** 2).sum(-1, keepdim=True) + KDA_L2_EPS) / math.sqrt(D)
        kk = conv["k"] / torch.sqrt((conv["k"] ** 2).sum(-1, keepdim=True) + KDA_L2_EPS)
        v = conv["v"]
        beta = torch.sigmoid(h @ self.W(L, "self_attn.b_proj.weight").T)        # [n, H]
        z = (h @ self.W(L, "self_attn.f_a_proj.weight").T) @ self.W(L, "self_attn.f_b_proj.weight").T
        z = (z + self.W(L, "self_attn.dt_bias").reshape(-1)[:C]).reshape(n, H, D)
        a = torch.exp(self.W(L, "self_attn.A_log").reshape(-1)[:H])[None, :, None]
        if cfg.gate_lb < 0:
            g = cfg.gate_lb * torch.sigmoid(a * z)
        else:
            g = -a * softplus(z)
        eg = torch.exp(g)
        S = st["S"]
        outs = []
        for t in range(n):
            S = S * eg[t][:, :, None]                                     # decay first
            u = torch.einsum("hij,hi->hj", S, kk[t])                      # decayed state
            delta = beta[t][:, None] * (v[t] - u)
            S = S + kk[t][:, :, None] * delta[:, None, :]
            outs.append(torch.einsum("hij,hi->hj", S, q[t]))             # after update
        st["S"] = S
        o = torch.stack(outs, 0)                                          # [n, H, D]
        if cfg.full_rank_gate:
            gam = h @ self.W(L, "self_attn.g_proj.weight").T
        else:
            gam = (h @ self.W(L, "self_attn.g_a_proj.weight").T) @ self.W(L, "self_attn.g_b_proj.weight").T
        o = rmsnorm(o, self.W(L, "self_attn.o_norm.weight").reshape(-1), cfg.eps) \
            * torch.sigmoid(gam.reshape(n, H, D))
        return o.reshape(n, C) @ self.W(L, "self_attn.o_proj.weight").T

    # --------------------------------------------------------------- MLA
    def _rotate(self, x, positions):
        """Interleaved rotary on the last axis (pairs 2j, 2j+1); x: [n, ..., d_r]."""
        f = torch.from_numpy(self.cfg.rope_freqs)                       # float32
        p = torch.tensor(positions, dtype=torch.float32)
        phi = (p[:, None] * f[None, :]).to(F64)                         # float32 product
        cos, sin = torch.cos(phi), torch.sin(phi)
        shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (cos.shape[1],)
        cos, sin = cos.reshape(shape), sin.reshape(shape)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = x0 * cos - x1 * sin
        out[..., 1::2] = x0 * sin + x1 * cos
        return out

    def mla(self, L, h, positions):
        cfg = self.cfg
        nh, dn, dr, dv, rkv = cfg.n_heads, cfg.d_nope, cfg.d_rope, cfg.d_v, cfg.kv_lora
        n = h.shape[0]
        if cfg.q_lora > 0:
            q = rmsnorm(h @ self.W(L, "self_attn.q_a_proj.weight").T,
                        self.W(L, "self_attn.q_a_layernorm.weight"), cfg.eps)
            q = q @ self.W(L, "self_attn.q_b_proj.weight").T
        else:
            q = h @ self.W(L, "self_attn.q_proj.weight").T
        q = q.reshape(n, nh, dn + dr)
        q_nope, q_rope = q[..., :dn], q[..., dn:]
        a = h @ self.W(L, "self_attn.kv_a_proj_with_mqa.weight").T
        c = rmsnorm(a[:, :rkv], self.W(L, "self_attn.kv_a_layernorm.weight"), cfg.eps)
        kap = a[:, rkv:rkv + dr]
        if cfg.rope_freqs is not None:
            q_rope = self._rotate(q_rope, positions)
            kap = self._rotate(kap, positions)
        st = self.state.get(L)
        if st is None:
            st = {"c": c[:0], "k": kap[:0]}
        st = {"c": torch.cat([st["c"], c], 0), "k": torch.cat([st["k"], kap], 0)}
        self.state[L] = st
        T = st["c"].shape[0]
        kv = (st["c"] @ self.W(L, "self_attn.kv_b_proj.weight").T).reshape(T, nh, dn + dv)
        k_nope, val = kv[..., :dn], kv[..., dn:]
        tau = cfg.m_att / math.sqrt(dn + dr)
        e = torch.einsum("thd,shd->ths", q_nope, k_nope) \
            + torch.einsum("thd,sd->ths", q_rope, st["k"])
        e = e * tau
        p0 = positions[0]
        mask = torch.arange(T)[None, :] > (p0 + torch.arange(n))[:, None]   # [n, T]
        e = e.masked_fill(mask[:, None, :], -math.inf)
        alpha = torch.softmax(e, dim=-1)
        o = torch.einsum("ths,shd->thd", alpha, val).reshape(n, nh * dv)
        if cfg.out_gate:
            o = o * torch.sigmoid(h @ self.W(L, "self_attn.g_proj.weight").T)
        return o @ self.W(L, "self_attn.o_proj.weight").T

    # --------------------------------------------------------------- FFN
    def act(self, a, b):
        cfg = self.cfg
        if cfg.situ:
            first = cfg.situ_b1 * torch.tanh(a / cfg.situ_b1) * torch.sigmoid(a)
            second = cfg.situ_b2 * torch.tanh(b / cfg.situ_b2) if cfg.situ_b2 > 0 else b
            return first * second
        return silu(a) * b

    def ffn(self, L, h):
        if self.has(L, "block_sparse_moe.gate.weight"):
            return self.moe(L, h)
        return self.act(h @ self.W(L, "mlp.gate_proj.weight").T,
                        h @ self.W(L, "mlp.up_proj.weight").T) @ self.W(L, "mlp.down_proj.weight").T

    def expert(self, L, e):
        key = (L, e)
        ex = self._experts.get(key)
        if ex is None:
            cfg = self.cfg
            n_in = cfg.r_lat if cfg.r_lat > 0 else cfg.d
            ex = self.c.expert(L, e, n_in, cfg.moe_inter)
            if self.c.index_bits == 8:
                for kind in ("gate", "up", "down"):
                    ex["W_" + kind] = self.c.dense_expert(ex, kind)
            self._experts[key] = ex
        return ex

    def route(self, L, ht):
        """Top-k selection (MODEL.md 7.1) for one token; returns [(e, w)]."""
        cfg = self.cfg
        s = torch.sigmoid(self.W(L, "block_sparse_moe.gate.weight") @ ht)
        bname = "block_sparse_moe.gate.e_score_correction_bias"
        key = s.clone()
        if self.has(L, bname):
            ent = self.c.entries[self.c.prefix + "model.layers.%d.%s" % (L, bname)]
            if ent.get("fmt") == 0:           # ignored if quantized (FORMAT 4.10)
                key = key + self.W(L, bname).reshape(-1)[:key.shape[0]]
        kl = key.tolist()
        order = sorted(range(len(kl)), key=lambda i: (-kl[i], i))
        k = cfg.top_k
        sel = order[:k]
        if len(order) > k:
            self.min_router_gap = min(self.min_router_gap, kl[order[k - 1]] - kl[order[k]])
        w = [float(s[e]) for e in sel]
        if cfg.renormalize and k > 1:
            tot = sum(w) + 1e-20
            w = [x / tot for x in w]
        return [(e, x * cfg.routed_scale) for e, x in zip(sel, w)]

    def moe(self, L, h):
        cfg = self.cfg
        lat = cfg.r_lat > 0
        if lat:
            x_lat = h @ self.W(L, "block_sparse_moe.routed_expert_down_proj.weight").T
        out = []
        vq4p = self.c.index_bits == 6
        for t in range(h.shape[0]):
            sel = self.route(L, h[t])
            xin = x_lat[t] if lat else h[t]
            y = torch.zeros(xin.shape[0], dtype=F64)
            if vq4p:   # gate/up tables from the FIRST selected expert's books
                first = self.expert(L, sel[0][0])
                tg = self.vq4p(L, t, sel[0][0], first["cbid"], 0, xin)
                tu = self.vq4p(L, t, sel[0][0], first["cbid"], 1, xin)
            for e, w in sel:
                ex = self.expert(L, e)
                if vq4p:
                    a = self.act(vq4p_apply(ex["gate"], ex["gate_scale"], tg),
                                 vq4p_apply(ex["up"], ex["up_scale"], tu))
                    td = self.vq4p(L, t, e, ex["cbid"], 2, a)
                    y = y + w * vq4p_apply(ex["down"], ex["down_scale"], td)
                else:
                    a = self.act(ex["W_gate"] @ xin, ex["W_up"] @ xin)
                    y = y + w * (ex["W_down"] @ a)
            out.append(y)
        y = torch.stack(out, 0)
        if lat:
            if cfg.lat_norm:
                y = rmsnorm(y, self.W(L, "block_sparse_moe.routed_expert_norm.weight"), cfg.eps)
            y = y @ self.W(L, "block_sparse_moe.routed_expert_up_proj.weight").T
        if self.has(L, "block_sparse_moe.shared_experts.gate_proj.weight"):
            y = y + self.act(h @ self.W(L, "block_sparse_moe.shared_experts.gate_proj.weight").T,
                             h @ self.W(L, "block_sparse_moe.shared_experts.up_proj.weight").T) \
                @ self.W(L, "block_sparse_moe.shared_experts.down_proj.weight").T
        return y


    def vq4p(self, L, t, e, cbid, kind, x):
        """Build one int8 table, recording rounding near-ties (diagnostics) and
        applying any override in self.vq4p_force for this call index."""
        call = self.vq4p_calls
        self.vq4p_calls += 1
        q, lam, y = vq4p_table(x, self.c.books(), cbid, kind, self.c.stages)
        dist = (y - torch.floor(y) - 0.5).abs()
        if dist.numel():
            self.vq4p_margin = min(self.vq4p_margin, float(dist.min()))
            _, S, E = q.shape
            for v, s, c in (dist < TIE_BAND).nonzero().tolist():
                self.vq4p_ties.append({"call": call, "layer": L, "token": t, "expert": e,
                                       "kind": ("gate", "up", "down")[kind],
                                       "entry": (v, s, c), "index": (v * S + s) * E + c,
                                       "y": float(y[v, s, c]), "q": float(q[v, s, c])})
        for (v, s, c), val in self.vq4p_force.get(call, []):
            q[v, s, c] = val
        return q, lam


# ------------------------------------------------------------ VQ4P int8 path
# Half-width (in units of the int8 code, i.e. of M/127) of the band around a
# rounding boundary inside which warp's or the engine's float32 table entry
# and this oracle's float64-derived one may round differently.  Measured
# differences of T*127/M: median ~1e-6, 99th percentile ~7e-5, up to 7.6e-4
# on K3-shaped containers.  The band is deliberately narrow: the
# margin-aware comparisons only touch entries inside it, so it can miss a
# genuine tie but never treats a clear-cut entry as one (README, Numerics).
TIE_BAND = 1e-4


def vq4p_table(x, books, cbid, kind, S):
    """int8 lookup table of MODEL.md 2.3 for input x (length N = 8*nv).

    T[v][s][c] = sum_j x[8v+j] * B_{kind,s}[c][j], formed from float32 x and
    the float32 codebook values and rounded once to float32; quantised per
    block of 32 vector positions: M = max|T| (f32), factor = f32(127/M),
    q = clamp(rint(f32(T*factor)), -127, 127) (half-to-even), lambda = f32(M/127).
    Returns (q [nv, S, E] float64 integers, lam [n_blocks] float64,
    y [nv, S, E] = f32(T*factor) before rounding, float64).
    """
    nv = x.shape[0] // 8
    xv = x.to(torch.float32).to(F64).reshape(nv, 8)
    bk = books[cbid + kind * S: cbid + kind * S + S]                    # [S, E, 8]
    T = torch.einsum("vj,sej->vse", xv, bk).to(torch.float32)          # [nv, S, E]
    nblk = -(-nv // 32)
    q = torch.zeros_like(T)
    y = torch.zeros_like(T)
    lam = torch.zeros(nblk, dtype=torch.float32)
    for b in range(nblk):
        blk = T[32 * b:32 * b + 32]
        M = blk.abs().max()
        if float(M) == 0.0:
            continue                                                    # q = 0, lambda = 0
        fac = torch.tensor(127.0, dtype=torch.float32) / M              # float32
        yb = blk * fac                                                  # float32 product
        y[32 * b:32 * b + 32] = yb
        q[32 * b:32 * b + 32] = torch.clamp(torch.round(yb), -127.0, 127.0)  # half-even
        lam[b] = M / torch.tensor(127.0, dtype=torch.float32)
    return q.to(F64), lam.to(F64), y.to(F64)


def vq4p_apply(codes, scale, table):
    """y_r = rho[r] * sum_b lam_b * sum_{v in b} sum_s q[v][s][c[r][v][s]]."""
    q, lam = table[0], table[1]
    M, nv, S = codes.shape
    vi = torch.arange(nv)[None, :, None]
    si = torch.arange(S)[None, None, :]
    g = q[vi, si, codes].sum(-1)                                        # [M, nv]
    nblk = lam.shape[0]
    pad = nblk * 32 - nv
    if pad:
        g = torch.cat([g, torch.zeros(M, pad, dtype=F64)], 1)
    per_block = g.reshape(M, nblk, 32).sum(-1)                          # exact integers
    return scale * (per_block @ lam)
