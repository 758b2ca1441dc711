#!/usr/bin/python3
"""Write a random-weight Hugging Face checkpoint (config.json, safetensors
shards, model.safetensors.index.json) of a Kimi-Linear, DeepSeek-V3 or
Kimi K3 shape, at any scale, for `sluice convert` tests and benchmarks.

Usage:
  make_checkpoint.py OUT_DIR --family kimi-linear|deepseek|k3
                     [--scale tiny|full] [--layers N] [--experts E]
                     [--vocab V] [--size-gb G]
                     [--trunk-dtype bf16|fp8] [--expert-dtype bf16|mxfp4|fp8]
                     [--shard-mb M] [--seed S]

* --scale tiny: the shapes of tools/oracle/make_synthetic.py (hidden 128,
  4-6 layers), so a converted container runs in the engine and the oracle.
  --scale full: the released model's widths (Kimi-Linear 48B, DeepSeek-V3
  671B, K3 as MODEL.md 12.2 describes it); --layers, --experts and --vocab
  cut it down to a size that fits on a disk.
* --size-gb G picks the number of experts so that the checkpoint holds at
  least G GB (10^9 bytes) of tensor data.
* --expert-dtype mxfp4 writes every routed expert as an MXFP4 pair
  (`_packed` + `_scale`, as K3 ships them); fp8 writes F8_E4M3 with
  `_scale_inv` tiles of 128 x 128 (DeepSeek / K2 style). --trunk-dtype fp8
  does the same for the large trunk matrices (not the embedding, the head
  or the router), and config.json gets a quantization_config.

The tensor list (names and shapes) is the one make_synthetic.py writes into
containers, so the engine finds every tensor it needs after conversion; only
the HF spellings differ (DeepSeek's `mlp.gate` / `mlp.shared_experts` /
`mlp.experts`, K3's `language_model.` prefix and nested text_config).
Values are uniform in the ranges make_synthetic.py uses (numpy's PCG64,
deterministic in --seed), generated and written in chunks, so memory stays
small whatever the size.  numpy only, no torch.
"""

import argparse
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "oracle"))
import make_synthetic as ms  # noqa: E402

CHUNK = 1 << 24        # elements generated per step
FP8_BLOCK = 128
EXPERT_RANGE = 0.05    # routed expert weights: uniform in +-0.05


# ------------------------------------------------------------------ configs
def full_config(family):
    """The released model's widths (before --layers/--experts/--vocab)."""
    if family == "kimi-linear":   # MODEL.md 12.1, sluice synth's default
        cfg = dict(model_type="kimi_linear", architectures=["KimiLinearForCausalLM"],
                   hidden_size=2304, vocab_size=163840, num_hidden_layers=27, rms_norm_eps=1e-5,
                   num_attention_heads=32, first_k_dense_replace=1, intermediate_size=9216,
                   moe_intermediate_size=1024, num_experts=256, num_experts_per_token=8,
                   num_shared_experts=1, moe_renormalize=True, routed_scaling_factor=2.446,
                   kv_lora_rank=512, q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64,
                   v_head_dim=128, mla_use_nope=True, bos_token_id=1, eos_token_id=2,
                   linear_attn_config={"head_dim": 128, "num_heads": 32, "short_conv_kernel_size": 4})
        return "kimi_linear", "", cfg
    if family == "deepseek":      # MODEL.md 12.3
        cfg = dict(model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"],
                   hidden_size=7168, vocab_size=129280, num_hidden_layers=61, rms_norm_eps=1e-6,
                   num_attention_heads=128, first_k_dense_replace=3, intermediate_size=18432,
                   moe_intermediate_size=2048, num_experts=256, num_experts_per_token=8,
                   num_shared_experts=1, moe_renormalize=True, routed_scaling_factor=2.5,
                   kv_lora_rank=512, q_lora_rank=1536, qk_nope_head_dim=128, qk_rope_head_dim=64,
                   v_head_dim=128, rope_theta=10000.0, bos_token_id=0, eos_token_id=1,
                   rope_scaling={"type": "yarn", "factor": 40.0, "beta_fast": 32.0,
                                 "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                                 "original_max_position_embeddings": 4096})
        return "deepseek_v3", "", cfg
    if family == "k3":            # MODEL.md 12.2 (intermediate_size assumed)
        cfg = dict(model_type="kimi_k3", hidden_size=7168, vocab_size=163840,
                   num_hidden_layers=93, rms_norm_eps=1e-5, num_attention_heads=96,
                   first_k_dense_replace=1, intermediate_size=18432, moe_intermediate_size=3072,
                   num_experts=896, num_experts_per_token=16, num_shared_experts=2,
                   moe_renormalize=True, routed_scaling_factor=1.0, kv_lora_rank=512,
                   q_lora_rank=1536, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
                   mla_use_nope=True, mla_use_output_gate=True, hidden_act="situ",
                   activation_situ_beta=4.0, activation_situ_linear_beta=25.0,
                   routed_expert_hidden_size=3584, latent_moe_use_norm=True,
                   attn_res_block_size=12, bos_token_id=1, eos_token_id=2,
                   linear_attn_config={"head_dim": 128, "num_heads": 96, "short_conv_kernel_size": 4,
                                       "use_full_rank_gate": True, "gate_lower_bound": -5.0},
                   _outer={"architectures": ["KimiK3ForConditionalGeneration"]})
        return "kimi-k3", "language_model.", cfg
    raise ValueError("unknown family %r" % family)


def set_layers(cfg, layers):
    """num_hidden_layers and, for the KDA families, the 1-based KDA / MLA
    lists: every 4th layer and the last are MLA (Kimi-Linear's pattern)."""
    cfg["num_hidden_layers"] = layers
    cfg["first_k_dense_replace"] = min(cfg["first_k_dense_replace"], layers - 1)
    lac = cfg.get("linear_attn_config")
    if lac is not None:
        lac["kda_layers"] = [i for i in range(1, layers + 1) if i % 4 != 0 and i != layers]
        lac["full_attn_layers"] = [i for i in range(1, layers + 1) if i % 4 == 0 or i == layers]
    if cfg.get("attn_res_block_size"):
        cfg["attn_res_block_size"] = min(cfg["attn_res_block_size"], max(1, layers // 2))


# ------------------------------------------------------------------ tensors
class Spec:
    """A tensor to write: name, shape, dtype ("BF16", "F32", "F8_E4M3",
    "U8") and how to fill it."""

    def __init__(self, name, shape, dtype, fill, lo=0.0, hi=0.0):
        self.name, self.shape, self.dtype, self.fill = name, list(shape), dtype, fill
        self.lo, self.hi = lo, hi

    @property
    def params(self):
        """Logical weights stored here: scale tensors count none, an FP4 byte two."""
        if self.fill in ("fp8scale", "e8m0"):
            return 0
        return int(np.prod(self.shape, dtype=np.int64)) * (2 if self.fill == "fp4" else 1)

    @property
    def nbytes(self):
        return int(np.prod(self.shape, dtype=np.int64)) * (2 if self.dtype == "BF16" else
                                                          4 if self.dtype == "F32" else 1)


def trunk_specs(family, cfg):
    """[(container-style name, shape, lo, hi)] from make_synthetic.trunk_tensors,
    run with its value generator swapped for a recorder: the tensor list is
    then defined in one place for the containers and the checkpoints."""
    saved = ms.uniform
    ms.uniform = lambda seed, name, shape, lo, hi: (list(shape), lo, hi)
    try:
        return [(n, s[0], s[1], s[2]) for n, s in ms.trunk_tensors(family, cfg, 0)]
    finally:
        ms.uniform = saved


def hf_name(family, prefix, name):
    """Container spelling -> the release's spelling (FORMAT.md 4.8, reversed)."""
    if family == "deepseek":
        name = name.replace(".block_sparse_moe.gate.", ".mlp.gate.")
        name = name.replace(".block_sparse_moe.shared_experts.", ".mlp.shared_experts.")
    return prefix + name


def is_fp8_candidate(name, shape):
    """Which trunk tensors a DeepSeek-style fp8 release stores as fp8: the large
    linear weights, not the embedding, the head, the router or small tensors."""
    return (len(shape) == 2 and shape[0] * shape[1] >= 65536 and not name.endswith("embed_tokens.weight")
            and not name.endswith("lm_head.weight") and not name.endswith(".gate.weight"))


def float_specs(name, shape, dtype, lo, hi):
    """One logical float tensor as stored specs (fp8 adds its scale tiles)."""
    if dtype == "fp8":
        M, N = shape
        return [Spec(name, shape, "F8_E4M3", "fp8"),
                Spec(name + "_scale_inv", [-(-M // FP8_BLOCK), -(-N // FP8_BLOCK)], "F32", "fp8scale")]
    if dtype == "mxfp4":
        M, N = shape
        return [Spec(name + "_packed", [M, N // 2], "U8", "fp4"),
                Spec(name + "_scale", [M, -(-N // 32)], "U8", "e8m0")]
    if len(shape) == 1 and "e_score_correction_bias" in name:
        return [Spec(name, shape, "F32", "uniform", lo, hi)]   # the releases keep it F32
    return [Spec(name, shape, "BF16", "uniform", lo, hi)]


def expert_names(family, prefix, L, e):
    if family == "deepseek":
        base = "%smodel.layers.%d.mlp.experts.%d." % (prefix, L, e)
        return [base + k + ".weight" for k in ("gate_proj", "up_proj", "down_proj")]
    base = "%smodel.layers.%d.block_sparse_moe.experts.%d." % (prefix, L, e)
    return [base + k + ".weight" for k in ("w1", "w3", "w2")]


def plan(family, cfg, prefix, trunk_dtype, expert_dtype):
    """Every stored tensor, in layer order (as releases are sharded)."""
    by_layer = {}
    for name, shape, lo, hi in trunk_specs(family, cfg):
        key = int(name.split(".")[2]) if name.startswith("model.layers.") else (
            -1 if "embed_tokens" in name else 1 << 30)
        full = hf_name(family, prefix, name)
        dt = "fp8" if trunk_dtype == "fp8" and is_fp8_candidate(full, shape) else "bf16"
        by_layer.setdefault(key, []).extend(float_specs(full, shape, dt, lo, hi))
    I = cfg["moe_intermediate_size"]
    lat = cfg.get("routed_expert_hidden_size") or cfg["hidden_size"]
    for L in range(cfg["first_k_dense_replace"], cfg["num_hidden_layers"]):
        for e in range(cfg["num_experts"]):
            for name, shape in zip(expert_names(family, prefix, L, e), ([I, lat], [I, lat], [lat, I])):
                by_layer[L].extend(float_specs(name, shape, expert_dtype, -EXPERT_RANGE, EXPERT_RANGE))
    return [s for k in sorted(by_layer) for s in by_layer[k]]


# ------------------------------------------------------------------ values
def to_bf16(x):
    """float32 -> bf16 bits, round to nearest even (as torch's .bfloat16())."""
    u = x.view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype("<u2")


def chunk_bytes(rng, spec, n):
    """n elements of spec's data, as bytes."""
    if spec.fill == "uniform":
        x = rng.random(n, dtype=np.float32) * np.float32(spec.hi - spec.lo) + np.float32(spec.lo)
        return (to_bf16(x) if spec.dtype == "BF16" else x.astype("<f4")).tobytes()
    b = rng.integers(0, 256, n, dtype=np.uint8)
    if spec.fill == "fp8":
        # E4M3 with exponent field 1..8: finite normals up to 3.75, never NaN.
        return ((b & np.uint8(0x87)) | ((((b >> np.uint8(3)) & np.uint8(7)) + np.uint8(1)) << np.uint8(3))).tobytes()
    if spec.fill == "fp8scale":
        return np.full(n, 1.0 / 128, dtype="<f4").tobytes()
    if spec.fill == "e8m0":   # 2^-7 .. 2^-5: FP4 magnitudes up to 6 give |w| <= 0.19
        return (np.uint8(120) + b % np.uint8(3)).tobytes()
    return b.tobytes()        # fp4: any pair of codes


# ------------------------------------------------------------------ writer
def write_shard(path, specs, rng):
    header, off = {}, 0
    for s in specs:
        header[s.name] = {"dtype": s.dtype, "shape": s.shape, "data_offsets": [off, off + s.nbytes]}
        off += s.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for s in specs:
            n = int(np.prod(s.shape, dtype=np.int64))
            for i in range(0, n, CHUNK):
                f.write(chunk_bytes(rng, s, min(CHUNK, n - i)))
    return off


def hf_config(family, cfg, trunk_dtype, expert_dtype):
    c = json.loads(json.dumps(cfg))
    outer = c.pop("_outer", None)
    if family == "deepseek":   # the release's key spellings (the converter aliases them)
        for a, b in (("num_experts", "n_routed_experts"), ("num_experts_per_token", "num_experts_per_tok"),
                     ("num_shared_experts", "n_shared_experts"), ("moe_renormalize", "norm_topk_prob")):
            c[b] = c.pop(a)
    if trunk_dtype == "fp8" or expert_dtype == "fp8":
        c["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                    "weight_block_size": [FP8_BLOCK, FP8_BLOCK]}
    if outer is not None:      # K3: multimodal wrapper around the text config
        return dict(outer, model_type="kimi_k3", text_config=c)
    return c


def build(out, family, scale="tiny", layers=None, experts=None, vocab=None, size_gb=None,
          trunk_dtype="bf16", expert_dtype="bf16", shard_mb=1024, seed=0, log=print):
    if scale == "tiny":
        _, prefix, cfg = ms.family_config(family, vocab or 512)
    else:
        _, prefix, cfg = full_config(family)
    if layers:
        set_layers(cfg, layers)
    elif scale == "full":
        set_layers(cfg, cfg["num_hidden_layers"])
    if vocab:
        cfg["vocab_size"] = vocab
    if experts:
        cfg["num_experts"] = experts
    if size_gb:
        n_moe = cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]
        cfg["num_experts"] = 1
        one = sum(s.nbytes for s in plan(family, cfg, prefix, trunk_dtype, expert_dtype))
        cfg["num_experts"] = 2
        per_expert = sum(s.nbytes for s in plan(family, cfg, prefix, trunk_dtype, expert_dtype)) - one
        if n_moe < 1:
            raise ValueError("--size-gb needs at least one MoE layer")
        cfg["num_experts"] = max(1, math.ceil((size_gb * 1e9 - one) / per_expert) + 1)
    cfg["num_experts_per_token"] = min(cfg["num_experts_per_token"], cfg["num_experts"])
    for d, what in ((cfg["hidden_size"], "hidden_size"), (cfg["moe_intermediate_size"], "moe_intermediate_size")):
        if expert_dtype == "mxfp4" and d % 32:
            raise ValueError("MXFP4 experts need %s to be a multiple of 32" % what)
    specs = plan(family, cfg, prefix, trunk_dtype, expert_dtype)

    os.makedirs(out, exist_ok=True)
    shards, cur, cur_bytes = [], [], 0
    for s in specs:
        if cur and cur_bytes + s.nbytes > shard_mb << 20:
            shards.append(cur)
            cur, cur_bytes = [], 0
        cur.append(s)
        cur_bytes += s.nbytes
    shards.append(cur)
    rng = np.random.Generator(np.random.PCG64(seed))
    weight_map, total = {}, 0
    for i, sh in enumerate(shards):
        fname = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
        total += write_shard(os.path.join(out, fname), sh, rng)
        for s in sh:
            weight_map[s.name] = fname
        log("wrote %s (%d tensors)" % (fname, len(sh)))
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total, "total_parameters": sum(s.params for s in specs)},
                   "weight_map": weight_map}, f, indent=1)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(hf_config(family, cfg, trunk_dtype, expert_dtype), f, indent=1)
    log("%s: %s, %d layers, %d experts, %.3f GB of tensor data (%.1f M weights) in %d shards" % (
        out, family, cfg["num_hidden_layers"], cfg["num_experts"], total / 1e9,
        sum(s.params for s in specs) / 1e6, len(shards)))
    return total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--family", required=True, choices=ms.FAMILIES)
    ap.add_argument("--scale", default="tiny", choices=("tiny", "full"))
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--experts", type=int, default=None)
    ap.add_argument("--vocab", type=int, default=None)
    ap.add_argument("--size-gb", type=float, default=None)
    ap.add_argument("--trunk-dtype", default="bf16", choices=("bf16", "fp8"))
    ap.add_argument("--expert-dtype", default="bf16", choices=("bf16", "mxfp4", "fp8"))
    ap.add_argument("--shard-mb", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.layers is not None and a.layers < 2:
        ap.error("--layers must be >= 2 (a dense layer and a MoE layer)")
    build(a.out, a.family, a.scale, a.layers, a.experts, a.vocab, a.size_gb, a.trunk_dtype,
          a.expert_dtype, a.shard_mb, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
