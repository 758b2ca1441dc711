"""Kimi K3's vision tower and projector in float64, from
../shared/spec/VISION.md §5 alone (no code shared with the engine).

    vision.py --container C --pixels P.f32 --grid GH GW [--out E.f32]

reads a [GH*GW][588] float32 patch tensor (§4.3) and writes the
[(GH/2)*(GW/2)][T] embeddings as float32. Everything runs in float64
torch, with the weights dequantized by container.py; the only float32
steps kept are the ones the spec defines in float32 (the position-grid
sampling weights and the rotary angles), so the reference computes the
same function the engine does.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from container import Container  # noqa: E402

TOWER_EPS = 1.1920928955078125e-07  # §2.2: fixed in code, not read from vision.json
PROJ_EPS = 1e-5


def load_config(path):
    with open(os.path.join(path, "vision.json")) as f:
        v = json.load(f)
    return {
        "D": int(v.get("vt_hidden_size", 1024)),
        "nh": int(v.get("vt_num_attention_heads", 12)),
        "Q": int(v.get("qkv_hidden_size", 1536)),
        "F": int(v.get("vt_intermediate_size", 4096)),
        "NL": int(v.get("vt_num_hidden_layers", 27)),
        "PH": int(v.get("init_pos_emb_height", 64)),
        "PW": int(v.get("init_pos_emb_width", 64)),
    }


class Tower:
    def __init__(self, path):
        self.c = Container(path)
        self.cfg = load_config(path)

    def w(self, name, rows=None):
        ent = self.c.entries.get(name)
        if ent is None:
            raise KeyError("vision tensor missing: " + name)
        t = torch.from_numpy(self.c._dequant(ent))
        return t.reshape(rows, -1) if rows is not None else t.reshape(-1)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def position_grid(G, PH, PW, gh, gw):
    """§5.2: bilinear, half-pixel centres, edge clamp; the sampling
    positions and weights in float32 as the spec states them."""
    if (gh, gw) == (PH, PW):
        return G.reshape(gh * gw, -1)
    f32 = np.float32
    out = torch.empty(gh, gw, G.shape[-1], dtype=torch.float64)
    for y in range(gh):
        fy = f32(f32(f32(y) + f32(0.5)) * f32(PH)) / f32(gh) - f32(0.5)
        y0 = int(math.floor(fy)); wy = f32(fy - f32(y0))
        y1 = min(max(y0 + 1, 0), PH - 1); y0 = min(max(y0, 0), PH - 1)
        for x in range(gw):
            fx = f32(f32(f32(x) + f32(0.5)) * f32(PW)) / f32(gw) - f32(0.5)
            x0 = int(math.floor(fx)); wx = f32(fx - f32(x0))
            x1 = min(max(x0 + 1, 0), PW - 1); x0 = min(max(x0, 0), PW - 1)
            wy_, wx_ = float(wy), float(wx)
            out[y, x] = ((1 - wy_) * (1 - wx_) * G[y0, x0] + (1 - wy_) * wx_ * G[y0, x1]
                         + wy_ * (1 - wx_) * G[y1, x0] + wy_ * wx_ * G[y1, x1])
    return out.reshape(gh * gw, -1)


def rotary_tables(gh, gw, hd):
    """§5.4: adjacent pairs; pair j uses frequency j//2, the column for
    even j and the row for odd j. Angles formed in float32."""
    f32 = np.float32
    L, half = gh * gw, hd // 2
    cos = torch.empty(L, half, dtype=torch.float64)
    sin = torch.empty(L, half, dtype=torch.float64)
    freqs = [f32(1.0) / np.power(f32(10000.0), f32(4 * (j // 2)) / f32(hd)) for j in range(half)]
    for p in range(L):
        cx, cy = p % gw, p // gw
        for j in range(half):
            a = float(f32(f32(cx if j % 2 == 0 else cy) * freqs[j]))
            cos[p, j] = math.cos(a)
            sin[p, j] = math.sin(a)
    return cos, sin


def rotate(x, cos, sin):
    # x [L, heads, hd]; pairs (2j, 2j+1)
    a, b = x[..., 0::2], x[..., 1::2]
    c, s = cos[:, None, :], sin[:, None, :]
    out = torch.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out


def encode(tower, pixels, gh, gw):
    c, t = tower.cfg, tower
    D, nh, Q, NL, PH, PW = c["D"], c["nh"], c["Q"], c["NL"], c["PH"], c["PW"]
    hd = Q // nh
    L = gh * gw
    x = pixels @ t.w("vision_tower.patch_embed.proj.weight", D).T            # §5.1
    G = t.w("vision_tower.patch_embed.pos_emb.weight", PH * PW).reshape(PH, PW, D)
    x = x + position_grid(G, PH, PW, gh, gw)                                  # §5.2
    cos, sin = rotary_tables(gh, gw, hd)
    for b in range(NL):                                                       # §5.3
        P = "vision_tower.encoder.blocks.%d." % b
        y = rmsnorm(x, t.w(P + "norm0.weight"), TOWER_EPS)
        qkv = y @ t.w(P + "wqkv.weight", 3 * Q).T
        q = rotate(qkv[:, :Q].reshape(L, nh, hd), cos, sin)
        k = rotate(qkv[:, Q:2 * Q].reshape(L, nh, hd), cos, sin)
        v = qkv[:, 2 * Q:].reshape(L, nh, hd)
        s = torch.einsum("phe,jhe->hpj", q, k) / math.sqrt(hd)                # §5.5
        o = torch.einsum("hpj,jhe->phe", torch.softmax(s, dim=-1), v).reshape(L, Q)
        x = x + o @ t.w(P + "wo.weight", D).T
        y = rmsnorm(x, t.w(P + "norm1.weight"), TOWER_EPS)
        h = torch.nn.functional.gelu(y @ t.w(P + "mlp.fc0.weight", c["F"]).T, approximate="tanh")
        x = x + h @ t.w(P + "mlp.fc1.weight", D).T
    y = rmsnorm(x, t.w("vision_tower.encoder.final_layernorm.weight"), TOWER_EPS)  # §5.6
    y = y.reshape(gh // 2, 2, gw // 2, 2, D).permute(0, 2, 1, 3, 4).reshape(-1, 4 * D)  # §5.7 (dy, dx)
    h = torch.nn.functional.gelu(y @ t.w("mm_projector.proj.0.weight", 4 * D).T)   # §5.8, exact GELU
    u = h @ t.w("mm_projector.proj.2.weight").reshape(-1, 4 * D).T
    return rmsnorm(u, t.w("mm_projector.post_norm.weight"), PROJ_EPS)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--container", required=True)
    ap.add_argument("--pixels", required=True)
    ap.add_argument("--grid", nargs=2, type=int, required=True, metavar=("GH", "GW"))
    ap.add_argument("--out")
    a = ap.parse_args()
    gh, gw = a.grid
    px = np.fromfile(a.pixels, dtype="<f4")
    if px.size != gh * gw * 588 or gh % 2 or gw % 2:
        sys.exit("vision.py: %s holds %d floats, expected %d x 588 for an even grid" % (a.pixels, px.size, gh * gw))
    e = encode(Tower(a.container), torch.from_numpy(px.astype(np.float64).reshape(gh * gw, 588)), gh, gw)
    if a.out:
        e.numpy().astype("<f4").tofile(a.out)
    else:
        print(e.shape)


if __name__ == "__main__":
    main()
