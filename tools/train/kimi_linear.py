"""Kimi-Linear (../shared/spec/MODEL.md) as a trainable torch module.

The same arithmetic as tools/oracle/model.py, which stays the reference:
that one reads a container, runs in float64 and loops over tokens for the
MoE (written for exactness, not for gradients).  This one is batched
float32 with autograd; its parameter names are the Hugging Face
checkpoint's, so state_dict() is the checkpoint.  tests/train checks the two
agree on the converted container (and the engine against both).

  * KDA (MODEL.md 4): q/k/v projections -> causal depthwise conv (kernel K)
    -> SiLU; q, k L2-normalised, q / sqrt(D); beta = sigmoid(b_proj h);
    per-channel decay g = -exp(A_log) * softplus(f_b(f_a h) + dt_bias);
    state S <- S * exp(g) (decay first), u = S^T k, S <- S + k (beta (v - u))^T,
    o = S^T q; out = o_proj(rmsnorm(o) * sigmoid(g_b(g_a h))).
  * MLA with NoPE (MODEL.md 5): q = q_proj h; [c, k_r] = kv_a h;
    c = rmsnorm(c); [k_nope, v] = kv_b c; scores (q_nope.k_nope + q_r.k_r) /
    sqrt(d_nope + d_rope), causal softmax.
  * FFN: dense SwiGLU in the first layer, then MoE (MODEL.md 7): sigmoid
    scores, top-k on score + e_score_correction_bias, weights = the scores
    of the chosen experts renormalised to sum 1, times routed_scaling_factor;
    plus a shared expert.  The bias is not trained by gradient: it is nudged
    after each step towards equal expert load (update_router_bias).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return rmsnorm(x, self.weight, self.eps)


def lin(i, o):
    return nn.Linear(i, o, bias=False)


class KDA(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, lac = c["hidden_size"], c["linear_attn_config"]
        H, D, K = lac["num_heads"], lac["head_dim"], lac["short_conv_kernel_size"]
        C = H * D
        self.H, self.D, self.K, self.eps = H, D, K, c["rms_norm_eps"]
        self.q_proj, self.k_proj, self.v_proj = lin(d, C), lin(d, C), lin(d, C)
        self.q_conv1d = nn.Parameter(torch.empty(C, 1, K))
        self.k_conv1d = nn.Parameter(torch.empty(C, 1, K))
        self.v_conv1d = nn.Parameter(torch.empty(C, 1, K))
        self.f_a_proj, self.f_b_proj = lin(d, D), lin(D, C)
        self.b_proj = lin(d, H)
        self.A_log = nn.Parameter(torch.zeros(1, 1, H, 1))
        self.dt_bias = nn.Parameter(torch.zeros(C))
        self.g_a_proj, self.g_b_proj = lin(d, D), lin(D, C)
        self.o_norm = RMSNorm(D, self.eps)
        self.o_proj = lin(C, d)

    def conv(self, x, w):          # x [B, T, C]; causal, kernel's last tap = current token
        T = x.shape[1]
        y = F.conv1d(F.pad(x.transpose(1, 2), (self.K - 1, 0)), w, groups=w.shape[0])
        return F.silu(y[..., :T].transpose(1, 2))

    def forward(self, h):
        B, T, _ = h.shape
        H, D = self.H, self.D
        q = self.conv(self.q_proj(h), self.q_conv1d).reshape(B, T, H, D)
        k = self.conv(self.k_proj(h), self.k_conv1d).reshape(B, T, H, D)
        v = self.conv(self.v_proj(h), self.v_conv1d).reshape(B, T, H, D)
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-12) / math.sqrt(D)
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-12)
        beta = torch.sigmoid(self.b_proj(h))                                    # [B, T, H]
        z = self.f_b_proj(self.f_a_proj(h)) + self.dt_bias
        g = -torch.exp(self.A_log.reshape(H))[:, None] * F.softplus(z.reshape(B, T, H, D))
        eg = torch.exp(g)
        S = h.new_zeros(B, H, D, D)
        outs = []
        for t in range(T):
            S = S * eg[:, t, :, :, None]
            u = torch.einsum("bhij,bhi->bhj", S, k[:, t])
            delta = beta[:, t, :, None] * (v[:, t] - u)
            S = S + k[:, t, :, :, None] * delta[:, :, None, :]
            outs.append(torch.einsum("bhij,bhi->bhj", S, q[:, t]))
        o = torch.stack(outs, 1)                                                # [B, T, H, D]
        gam = torch.sigmoid(self.g_b_proj(self.g_a_proj(h))).reshape(B, T, H, D)
        return self.o_proj((self.o_norm(o) * gam).reshape(B, T, H * D))


class MLA(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, nh = c["hidden_size"], c["num_attention_heads"]
        self.nh, self.dn, self.dr, self.dv = nh, c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        self.rkv = c["kv_lora_rank"]
        self.q_proj = lin(d, nh * (self.dn + self.dr))
        self.kv_a_proj_with_mqa = lin(d, self.rkv + self.dr)
        self.kv_a_layernorm = RMSNorm(self.rkv, c["rms_norm_eps"])
        self.kv_b_proj = lin(self.rkv, nh * (self.dn + self.dv))
        self.o_proj = lin(nh * self.dv, d)

    def forward(self, h):
        B, T, _ = h.shape
        nh, dn, dr, dv = self.nh, self.dn, self.dr, self.dv
        q = self.q_proj(h).reshape(B, T, nh, dn + dr)
        a = self.kv_a_proj_with_mqa(h)
        c = self.kv_a_layernorm(a[..., :self.rkv])
        kr = a[..., self.rkv:]                                                  # [B, T, dr], shared by heads
        kv = self.kv_b_proj(c).reshape(B, T, nh, dn + dv)
        k = torch.cat([kv[..., :dn], kr[:, :, None, :].expand(B, T, nh, dr)], -1)
        e = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(dn + dr)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        o = torch.einsum("bhts,bshd->bhtd", torch.softmax(e.masked_fill(mask, float("-inf")), -1), kv[..., dn:])
        return self.o_proj(o.transpose(1, 2).reshape(B, T, nh * dv))


class MLP(nn.Module):
    def __init__(self, d, inter):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = lin(d, inter), lin(d, inter), lin(inter, d)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Expert(nn.Module):
    def __init__(self, d, inter):
        super().__init__()
        self.w1, self.w3, self.w2 = lin(d, inter), lin(d, inter), lin(inter, d)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Gate(nn.Module):
    def __init__(self, d, E):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(E, d))
        self.register_buffer("e_score_correction_bias", torch.zeros(E))


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, E, I = c["hidden_size"], c["num_experts"], c["moe_intermediate_size"]
        self.E, self.k = E, c["num_experts_per_token"]
        self.scale = c["routed_scaling_factor"]
        self.renorm = "moe_renormalize" in c
        self.gate = Gate(d, E)
        self.experts = nn.ModuleList([Expert(d, I) for _ in range(E)])
        self.shared_experts = MLP(d, I * c["num_shared_experts"])
        self.load = torch.zeros(E)

    def forward(self, h):
        shp = h.shape
        x = h.reshape(-1, shp[-1])
        s = torch.sigmoid(x @ self.gate.weight.T)                               # [N, E]
        sel = torch.topk(s.detach() + self.gate.e_score_correction_bias, self.k, dim=-1).indices
        w = torch.gather(s, 1, sel)
        if self.renorm and self.k > 1:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        w = w * self.scale
        y = torch.zeros_like(x)
        load = torch.zeros(self.E)
        for e in range(self.E):
            tok, slot = (sel == e).nonzero(as_tuple=True)
            load[e] = tok.numel()
            if tok.numel():
                y = y.index_add(0, tok, self.experts[e](x[tok]) * w[tok, slot, None])
        self.load = load
        return (y + self.shared_experts(x)).reshape(shp)


class Layer(nn.Module):
    def __init__(self, c, L):
        super().__init__()
        d, eps = c["hidden_size"], c["rms_norm_eps"]
        self.is_kda = (L + 1) in c["linear_attn_config"]["kda_layers"]
        self.input_layernorm = RMSNorm(d, eps)
        self.post_attention_layernorm = RMSNorm(d, eps)
        self.self_attn = KDA(c) if self.is_kda else MLA(c)
        if L < c["first_k_dense_replace"]:
            self.mlp = MLP(d, c["intermediate_size"])
        else:
            self.block_sparse_moe = MoE(c)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        h = self.post_attention_layernorm(x)
        return x + (self.mlp(h) if hasattr(self, "mlp") else self.block_sparse_moe(h))


class Inner(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([Layer(c, L) for L in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class KimiLinear(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.model = Inner(c)
        self.lm_head = lin(c["hidden_size"], c["vocab_size"])

    def init_weights(self, gen):
        """GPT-style init (std 0.02, residual outputs / sqrt(2 L)); KDA decay
        rates start spread over [0.001, 0.1] per step."""
        L = self.config["num_hidden_layers"]
        for name, p in self.named_parameters():
            with torch.no_grad():
                if name.endswith("norm.weight"):
                    p.fill_(1.0)
                elif name.endswith("A_log"):
                    p.zero_()
                elif name.endswith("dt_bias"):
                    dt = torch.exp(torch.rand(p.shape, generator=gen) * (math.log(0.1) - math.log(0.001))
                                   + math.log(0.001))
                    p.copy_(dt + torch.log(-torch.expm1(-dt)))      # softplus^-1
                elif "conv1d" in name:
                    p.uniform_(-0.5, 0.5, generator=gen)
                else:
                    std = 0.02
                    if name.endswith(("o_proj.weight", "down_proj.weight", "w2.weight")):
                        std /= math.sqrt(2 * L)
                    p.normal_(0.0, std, generator=gen)

    def forward(self, ids):
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x)
        return self.lm_head(self.model.norm(x))

    def moe_layers(self):
        return [l.block_sparse_moe for l in self.model.layers if hasattr(l, "block_sparse_moe")]

    @torch.no_grad()
    def update_router_bias(self, rate):
        """Auxiliary-loss-free balancing: raise the bias of under-loaded
        experts, lower that of over-loaded ones, by a fixed step."""
        for m in self.moe_layers():
            m.gate.e_score_correction_bias += rate * torch.sign(m.load.mean() - m.load)
