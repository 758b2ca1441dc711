#!/usr/bin/python3
"""Write small synthetic WASTE v0 containers, byte for byte per
../shared/spec/FORMAT.md, for the three model families.

Usage:
  make_synthetic.py OUT_DIR --family kimi-linear|deepseek|k3
                    [--trunk-bits 8|4|3] [--experts vq3r|vq2r|vq4p]
                    [--seed N] [--codebook-seed N] [--vocab V]

Everything is a pure function of the arguments (numpy only, no torch):
the random numbers come from a SplitMix64 stream keyed by (seed, tensor
name), so the bytes do not depend on the numpy version, and

* --trunk-bits changes only how the (same) trunk values are stored: the
  trunk.bin and the trunk entries of manifest.json;
* --codebook-seed changes only codebooks.bin (and the provenance line that
  records it); expert indices and row scales keep coming from --seed.

Layout written (FORMAT sections): trunk F32 / Q8G / Q4G / Q3G with rows
padded to the 128-group (4.3-4.6, 13.3), codebook records with the WCBK
header (5.1), expert records with the 48-byte WEXP header, indices blocked
by 64 rows with zero tail rows, VQ4P 6-bit packing, f16 row scales,
CRC-32 over [48, end of scales) and zero padding to 4 KiB (6.2-6.8), the
manifest last (13.6).  Shapes exercise Q-group row padding (widths that
are not multiples of 128) and expert tail rows (moe_intermediate_size 96).
Weights are small (matrices in +-0.1, expert weights ~1e-2) so that every
activation stays finite and well away from overflow.
"""

import argparse
import hashlib
import json
import os
import struct
import sys
import zlib

import numpy as np

GENERATOR = "tools/oracle/make_synthetic.py"
GENERATOR_VERSION = 1
FAMILIES = ("kimi-linear", "deepseek", "k3")
EXPERT_KINDS = {"vq3r": (3, 256, 8), "vq2r": (2, 256, 8), "vq4p": (4, 64, 6)}
FMT_F32, FMT_Q8G, FMT_Q4G, FMT_Q3G = 0, 2, 3, 7
QMAX = {FMT_Q8G: (127, -127, 127), FMT_Q4G: (7, -8, 7), FMT_Q3G: (3, -4, 3)}
M64 = (1 << 64) - 1


# ------------------------------------------------------------------ random
def _splitmix(seed_u64, n):
    """n uint64 values of SplitMix64 started at seed_u64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        ctr = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = ctr + np.uint64(seed_u64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _key(seed, name):
    h = hashlib.sha256(("%d|%s" % (seed, name)).encode()).digest()
    return int.from_bytes(h[:8], "little")


def uniform(seed, name, shape, lo, hi):
    """float32 array, uniform in [lo, hi), deterministic in (seed, name)."""
    n = int(np.prod(shape))
    u = (_splitmix(_key(seed, name), n) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    return (lo + (hi - lo) * u).astype(np.float32).reshape(shape)


def randint(seed, name, shape, n_values):
    n = int(np.prod(shape))
    return (_splitmix(_key(seed, name), n) % np.uint64(n_values)).astype(np.int64).reshape(shape)


def f16_bits(a):
    return np.asarray(a, dtype=np.float32).astype(np.float16).view("<u2")


# ------------------------------------------------------------------ configs
def family_config(family, vocab):
    """(arch, tensor_prefix, config) of a tiny model of the family."""
    base = {"hidden_size": 128, "vocab_size": vocab, "rms_norm_eps": 1e-5,
            "num_attention_heads": 4, "first_k_dense_replace": 1,
            "intermediate_size": 200, "moe_intermediate_size": 96,
            "num_experts": 8, "num_experts_per_token": 2, "num_shared_experts": 1,
            "moe_renormalize": True, "kv_lora_rank": 32, "qk_nope_head_dim": 16,
            "qk_rope_head_dim": 8, "v_head_dim": 16, "bos_token_id": 1, "eos_token_id": 2}
    if family == "kimi-linear":
        cfg = dict(base, model_type="kimi_linear", architectures=["KimiLinearForCausalLM"],
                   num_hidden_layers=4, routed_scaling_factor=2.446, q_lora_rank=None,
                   mla_use_nope=True,
                   linear_attn_config={"head_dim": 32, "num_heads": 4,
                                       "short_conv_kernel_size": 4,
                                       "kda_layers": [1, 2, 4], "full_attn_layers": [3]})
        return "kimi_linear", "", cfg
    if family == "deepseek":
        cfg = dict(base, model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"],
                   num_hidden_layers=4, routed_scaling_factor=2.5, q_lora_rank=48,
                   qk_rope_head_dim=16, rope_theta=50000.0,
                   rope_scaling={"type": "yarn", "factor": 32.0, "beta_fast": 1.0,
                                 "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                                 "original_max_position_embeddings": 4096})
        return "deepseek_v3", "", cfg
    if family == "k3":
        cfg = dict(base, model_type="kimi_k3", num_hidden_layers=6, num_experts_per_token=3,
                   num_shared_experts=2, routed_scaling_factor=1.5, q_lora_rank=48,
                   mla_use_nope=True, mla_use_output_gate=True, hidden_act="situ",
                   activation_situ_beta=4.0, activation_situ_linear_beta=25.0,
                   routed_expert_hidden_size=64, latent_moe_use_norm=True,
                   attn_res_block_size=2,
                   linear_attn_config={"head_dim": 32, "num_heads": 4,
                                       "short_conv_kernel_size": 4,
                                       "kda_layers": [1, 2, 4, 5], "full_attn_layers": [3, 6],
                                       "use_full_rank_gate": True, "gate_lower_bound": -5.0},
                   _outer={"architectures": ["KimiK3ForConditionalGeneration"]})
        return "kimi-k3", "language_model.", cfg
    raise ValueError("unknown family %r (one of %s)" % (family, ", ".join(FAMILIES)))


# ------------------------------------------------------------------ tensors
def trunk_tensors(family, cfg, seed):
    """[(name without prefix, float32 array)] of the text model."""
    d, V = cfg["hidden_size"], cfg["vocab_size"]
    out = []

    def w(name, shape, lo=-0.1, hi=0.1):
        out.append((name, uniform(seed, name, shape, lo, hi)))

    def norm(name, n):
        w(name, [n], 0.5, 1.5)

    lac = cfg.get("linear_attn_config") or {}
    kda = set(v - 1 for v in lac.get("kda_layers", []))
    H, D, K = lac.get("num_heads", 0), lac.get("head_dim", 0), lac.get("short_conv_kernel_size", 4)
    C = H * D
    nh, dn, dr, dv = (cfg["num_attention_heads"], cfg["qk_nope_head_dim"],
                      cfg["qk_rope_head_dim"], cfg["v_head_dim"])
    rkv, rq = cfg["kv_lora_rank"], cfg.get("q_lora_rank") or 0
    I, E = cfg["moe_intermediate_size"], cfg["num_experts"]
    sh = I * max(cfg["num_shared_experts"], 1)
    lat = cfg.get("routed_expert_hidden_size", 0)
    B = cfg.get("attn_res_block_size", 0)
    w("model.embed_tokens.weight", [V, d], -1.6, 1.6)
    for L in range(cfg["num_hidden_layers"]):
        P = "model.layers.%d." % L
        norm(P + "input_layernorm.weight", d)
        norm(P + "post_attention_layernorm.weight", d)
        a = P + "self_attn."
        if L in kda:
            for k in "qkv":
                w(a + "%s_proj.weight" % k, [C, d])
                w(a + "%s_conv1d.weight" % k, [C, 1, K], -0.5, 0.5)
            w(a + "f_a_proj.weight", [D, d])
            w(a + "f_b_proj.weight", [C, D])
            w(a + "b_proj.weight", [H, d])
            # Kimi-Linear stores H values; K3 pads to D (non-zero padding
            # here, which a reader must ignore: MODEL.md 4.4).
            w(a + "A_log", [1, 1, H, 1] if "use_full_rank_gate" not in lac else [1, 1, 1, D],
              -1.0, 1.0)
            w(a + "dt_bias", [C], -0.5, 0.5)
            if "use_full_rank_gate" in lac:
                w(a + "g_proj.weight", [C, d])
            else:
                w(a + "g_a_proj.weight", [D, d])
                w(a + "g_b_proj.weight", [C, D])
            norm(a + "o_norm.weight", D)
            w(a + "o_proj.weight", [d, C])
        else:
            if rq > 0:
                w(a + "q_a_proj.weight", [rq, d])
                norm(a + "q_a_layernorm.weight", rq)
                w(a + "q_b_proj.weight", [nh * (dn + dr), rq])
            else:
                w(a + "q_proj.weight", [nh * (dn + dr), d])
            w(a + "kv_a_proj_with_mqa.weight", [rkv + dr, d])
            norm(a + "kv_a_layernorm.weight", rkv)
            w(a + "kv_b_proj.weight", [nh * (dn + dv), rkv])
            if "mla_use_output_gate" in cfg:
                w(a + "g_proj.weight", [nh * dv, d])
            w(a + "o_proj.weight", [d, nh * dv])
        if B > 0:
            for r in ("self_attention_res", "mlp_res"):
                norm(P + r + "_norm.weight", d)
                w(P + r + "_proj.weight", [1, d], -0.3, 0.3)
        if E > 0 and L >= cfg["first_k_dense_replace"]:
            m = P + "block_sparse_moe."
            w(m + "gate.weight", [E, d])
            w(m + "gate.e_score_correction_bias", [E], -0.05, 0.05)
            w(m + "shared_experts.gate_proj.weight", [sh, d])
            w(m + "shared_experts.up_proj.weight", [sh, d])
            w(m + "shared_experts.down_proj.weight", [d, sh])
            if lat > 0:
                w(m + "routed_expert_down_proj.weight", [lat, d])
                w(m + "routed_expert_up_proj.weight", [d, lat])
                if "latent_moe_use_norm" in cfg:
                    norm(m + "routed_expert_norm.weight", lat)
        else:
            Id = cfg["intermediate_size"]
            w(P + "mlp.gate_proj.weight", [Id, d])
            w(P + "mlp.up_proj.weight", [Id, d])
            w(P + "mlp.down_proj.weight", [d, Id])
    if B > 0:
        norm("model.output_attn_res_norm.weight", d)
        w("model.output_attn_res_proj.weight", [1, d], -0.3, 0.3)
    norm("model.norm.weight", d)
    w("lm_head.weight", [V, d], -1.6, 1.6)
    return out


def trunk_format(name, arr, trunk_bits):
    """F32 for vectors, [1, d] AttnRes projections and 3-D/4-D tensors (conv
    kernels, A_log: F32 is required there, FORMAT 4.10); Q8G for the
    embedding and the head; the --trunk-bits width for every other matrix."""
    if arr.ndim != 2 or arr.shape[0] == 1:
        return FMT_F32
    if name.endswith("embed_tokens.weight") or name.endswith("lm_head.weight"):
        return FMT_Q8G
    return {8: FMT_Q8G, 4: FMT_Q4G, 3: FMT_Q3G}[trunk_bits]


def quantize(arr, fmt, g=128):
    """(payload bytes, scale bytes) per FORMAT 13.3 (f32 arithmetic)."""
    qmax, lo, hi = QMAX[fmt]
    N = arr.shape[-1]
    R = arr.size // N
    ng = -(-N // g)
    n = ng * g
    x = np.zeros((R, n), dtype=np.float32)
    x[:, :N] = arr.reshape(R, N)
    xg = x.reshape(R, ng, g)
    amax = np.maximum(np.abs(xg).max(-1), np.float32(1e-8)).astype(np.float32)
    scale = (amax / np.float32(qmax)).astype(np.float32)
    q = np.clip(np.rint((xg / scale[..., None]).astype(np.float32)), lo, hi).astype(np.int64)
    q = q.reshape(R, n)
    if fmt == FMT_Q8G:
        payload = q.astype(np.int8).tobytes()
    elif fmt == FMT_Q4G:
        nib = (q + 8).astype(np.uint8)
        payload = (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8).tobytes()
    else:
        rowbytes = -(-3 * n // 8) + 1
        rows = np.zeros((R, rowbytes), dtype=np.uint8)
        field = (q + 4).astype(np.uint8)
        for i in range(n):
            p = 3 * i
            b, sft = p >> 3, p & 7
            v = field[:, i].astype(np.uint16) << sft
            rows[:, b] |= (v & 0xFF).astype(np.uint8)
            rows[:, b + 1] |= (v >> 8).astype(np.uint8)
        payload = rows.tobytes()
    return payload, f16_bits(scale).tobytes()


# ------------------------------------------------------------------ experts
def codebooks(cb_seed, n_layers_moe, S, E):
    """[n_layers_moe * 3 * S, E, 8] float32 centroids (f16-representable);
    later stages are finer, as in a residual quantizer."""
    books = []
    for i in range(n_layers_moe):
        for kind in range(3):
            for s in range(S):
                a = 0.3 * 0.5 ** s
                c = uniform(cb_seed, "codebook/%d/%d/%d" % (i, kind, s), [E, 8], -a, a)
                books.append(c.astype(np.float16).astype(np.float32))
    return books


def codebook_bytes(books):
    out = bytearray()
    for i, c in enumerate(books):
        E = c.shape[0]
        out += struct.pack("<IHBBII", 0x4B424357, i & 0xFFFF, 4, 8, E, 0)
        out += f16_bits(c).tobytes()
    return bytes(out)


def index_block(codes, index_bits):
    """codes [M, nv, S] -> blocked bytes [row_block][v][row_in_block][unit]."""
    M, nv, S = codes.shape
    nb = -(-M // 64)
    if index_bits == 6:
        c = codes.astype(np.uint32)
        v24 = c[..., 0] | (c[..., 1] << 6) | (c[..., 2] << 12) | (c[..., 3] << 18)
        unit = np.stack([v24 & 0xFF, (v24 >> 8) & 0xFF, v24 >> 16], -1).astype(np.uint8)
    else:
        unit = codes.astype(np.uint8)
    u = unit.shape[-1]
    full = np.zeros((nb * 64, nv, u), dtype=np.uint8)
    full[:M] = unit
    return full.reshape(nb, 64, nv, u).transpose(0, 2, 1, 3).tobytes()


def expert_record(seed, layer, e, cbid, I, n_in, S, E, index_bits):
    """One record (bytes, a 4 KiB multiple) of FORMAT 6."""
    blocks, scales = [], []
    for kind, (M, N) in enumerate(((I, n_in), (I, n_in), (n_in, I))):
        tag = "expert/%d/%d/%d" % (layer, e, kind)
        blocks.append(index_block(randint(seed, tag + "/codes", [M, N // 8, S], E), index_bits))
        scales.append(uniform(seed, tag + "/scale", [M], 0.01, 0.05))
    offs = [48]
    for b in blocks:
        offs.append(offs[-1] + len(b))
    body = b"".join(blocks) + f16_bits(np.concatenate(scales)).tobytes()
    n4k = -(-(48 + len(body)) // 4096)
    crc = zlib.crc32(body) & 0xFFFFFFFF
    hdr = struct.pack("<IHHBBHHHIIIIIIII", 0x50584557, layer, e, 8 if index_bits == 6 else 4, 0,
                      cbid, 0, 0, n4k, offs[0], offs[1], offs[2], offs[3], crc, 0, 0)
    rec = hdr + body
    return rec + bytes(n4k * 4096 - len(rec))


# ------------------------------------------------------------------ writer
def _clear(out_dir):
    """Empty out_dir of a previous synthetic container (manifest first); refuse
    to touch a folder holding anything else."""
    os.makedirs(out_dir, exist_ok=True)
    names = os.listdir(out_dir)
    mpath = os.path.join(out_dir, "manifest.json")
    if os.path.exists(mpath):
        try:
            with open(mpath) as f:
                ours = json.load(f).get("provenance", {}).get("converter") == GENERATOR
        except (ValueError, AttributeError):
            ours = False
        if not ours:
            raise ValueError("%s holds a container not written by %s; not overwriting"
                             % (out_dir, GENERATOR))
        os.unlink(mpath)
    for n in names:
        if n in ("trunk.bin", "codebooks.bin", "manifest.json.tmp") or (
                n.startswith("experts-L") and n.endswith(".bin")):
            os.unlink(os.path.join(out_dir, n))
        elif n != "manifest.json":
            raise ValueError("%s: unexpected file %s; not overwriting" % (out_dir, n))


def build(out_dir, family, trunk_bits=4, experts="vq3r", seed=1, codebook_seed=None,
          vocab=160):
    """Write the container; returns its directory.  codebook_seed defaults
    to seed."""
    if trunk_bits not in (8, 4, 3):
        raise ValueError("trunk_bits must be 8, 4 or 3")
    if experts not in EXPERT_KINDS:
        raise ValueError("experts must be one of %s" % ", ".join(EXPERT_KINDS))
    cb_seed = seed if codebook_seed is None else codebook_seed
    arch, prefix, cfg = family_config(family, vocab)
    S, E, index_bits = EXPERT_KINDS[experts]
    _clear(out_dir)

    tensors = trunk_tensors(family, cfg, seed)
    if prefix:   # a tensor outside the prefix: readers must skip it (FORMAT 4.8)
        tensors.append(("__outside__vision_tower.patch_embed.weight",
                        uniform(seed, "vision", [8, 8], -0.1, 0.1)))
    trunk, entries = bytearray(), []
    named = []
    for name, arr in tensors:
        full = name[len("__outside__"):] if name.startswith("__outside__") else prefix + name
        named.append((full, arr))
    for full, arr in sorted(named, key=lambda t: t[0].encode()):
        fmt = trunk_format(full, arr, trunk_bits)
        ent = {"name": full, "fmt": fmt, "off": len(trunk), "shape": list(arr.shape)}
        if fmt == FMT_F32:
            trunk += arr.astype("<f4").tobytes()
            ent["bytes"] = 4 * arr.size
        else:
            payload, sc = quantize(arr, fmt)
            trunk += payload
            ent["group"] = 128
            ent["scale_off"] = len(trunk)
            trunk += sc
            ent["bytes"] = len(payload) + len(sc)
        entries.append(ent)

    moe_layers = [L for L in range(cfg["num_hidden_layers"]) if L >= cfg["first_k_dense_replace"]]
    books = codebooks(cb_seed, len(moe_layers), S, E)
    I = cfg["moe_intermediate_size"]
    n_in = cfg.get("routed_expert_hidden_size") or cfg["hidden_size"]
    layers = {}
    for i, L in enumerate(moe_layers):
        base = 3 * S * i
        fname = "experts-L%d.bin" % L
        with open(os.path.join(out_dir, fname), "wb") as f:
            total = 0
            for e in range(cfg["num_experts"]):
                rec = expert_record(seed, L, e, base, I, n_in, S, E, index_bits)
                f.write(rec)
                total += len(rec)
        layers[str(L)] = {"file": fname, "experts": cfg["num_experts"], "bytes": total,
                          "codebook_base": base}
    with open(os.path.join(out_dir, "codebooks.bin"), "wb") as f:
        f.write(codebook_bytes(books))
    with open(os.path.join(out_dir, "trunk.bin"), "wb") as f:
        f.write(bytes(trunk))

    fmt_name = {"vq3r": "VQ3R", "vq2r": "VQ2R", "vq4p": "VQ4P"}[experts]
    manifest = {
        "format_version": 0, "arch": arch, "tensor_prefix": prefix, "config": cfg,
        "expert_quant": {"fmt": fmt_name, "stages": S, "vec_dim": 8, "entries": E,
                         "index_block": 64, "index_bits": index_bits,
                         "bits_per_weight": S * index_bits / 8},
        "layers": layers, "trunk": entries,
        "provenance": {"converter": GENERATOR, "version": GENERATOR_VERSION,
                       "settings": {"family": family, "trunk_bits": trunk_bits,
                                    "experts": experts, "seed": seed,
                                    "codebook_seed": cb_seed, "vocab": vocab}},
    }
    text = json.dumps(manifest, indent=1, ensure_ascii=True)
    tmp = os.path.join(out_dir, "manifest.json.tmp")
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.replace(tmp, os.path.join(out_dir, "manifest.json"))   # the commit point
    return out_dir


def recipe_args(settings):
    """build() keyword arguments from a provenance "settings" object."""
    return {"family": settings["family"], "trunk_bits": int(settings["trunk_bits"]),
            "experts": settings["experts"], "seed": int(settings["seed"]),
            "codebook_seed": int(settings["codebook_seed"]), "vocab": int(settings["vocab"])}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--family", required=True, choices=FAMILIES)
    ap.add_argument("--trunk-bits", type=int, default=4, choices=(8, 4, 3))
    ap.add_argument("--experts", default="vq3r", choices=sorted(EXPERT_KINDS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--codebook-seed", type=int, default=None)
    ap.add_argument("--vocab", type=int, default=160)
    a = ap.parse_args(argv)
    build(a.out, a.family, a.trunk_bits, a.experts, a.seed, a.codebook_seed, a.vocab)
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
