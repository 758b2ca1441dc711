#!/usr/bin/python3
"""A GGUF of sluice-mini's bf16 release, as a user's f32 GGUF download of it
would be: the layout and metadata of TEMPLATE.gguf (`sluice export-gguf
models/sluice-mini TEMPLATE.gguf`, all f32) with every tensor's values
replaced by the Hugging Face checkpoint's own, through export_families.cpp's
forward mapping (kimi-linear only). docs/QUALITY.md, "Converting from GGUF".

  gguf_from_hf.py TEMPLATE.gguf models/sluice-mini-hf/model.safetensors OUT.gguf
"""
import os, sys, json, struct, re
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "llamacpp"))
import gguf_import as gi  # noqa: E402  (its GGUF reader)
A, HF, OUT = sys.argv[1:4]
kv, tensors, data, b = gi.read_gguf(A)
raw = open(HF, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; hdr = json.loads(raw[8:8 + n])
def hf(name):
    t = hdr[name]; s, e = t["data_offsets"]; buf = raw[8 + n + s:8 + n + e]
    if t["dtype"] == "BF16":
        v = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        v = np.frombuffer(buf, "<f4")
    return v.reshape(t["shape"]).astype(np.float32)
cfg = json.load(open(HF.rsplit("/", 1)[0] + "/config.json"))
H, dn, dv, r = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["v_head_dim"], cfg["kv_lora_rank"]
E = cfg["num_experts"]
direct = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
          "output.weight": "lm_head.weight"}
per = {"attn_norm.weight": "input_layernorm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
       "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
       "attn_v.weight": "self_attn.v_proj.weight", "ssm_conv1d_q.weight": "self_attn.q_conv1d.weight",
       "ssm_conv1d_k.weight": "self_attn.k_conv1d.weight", "ssm_conv1d_v.weight": "self_attn.v_conv1d.weight",
       "ssm_f_a.weight": "self_attn.f_a_proj.weight", "ssm_f_b.weight": "self_attn.f_b_proj.weight",
       "ssm_beta.weight": "self_attn.b_proj.weight", "ssm_dt.bias": "self_attn.dt_bias",
       "ssm_g_a.weight": "self_attn.g_a_proj.weight", "ssm_g_b.weight": "self_attn.g_b_proj.weight",
       "ssm_norm.weight": "self_attn.o_norm.weight", "attn_output.weight": "self_attn.o_proj.weight",
       "attn_kv_a_mqa.weight": "self_attn.kv_a_proj_with_mqa.weight",
       "attn_kv_a_norm.weight": "self_attn.kv_a_layernorm.weight",
       "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
       "ffn_down.weight": "mlp.down_proj.weight", "ffn_gate_inp.weight": "block_sparse_moe.gate.weight",
       "exp_probs_b.bias": "block_sparse_moe.gate.e_score_correction_bias",
       "ffn_gate_shexp.weight": "block_sparse_moe.shared_experts.gate_proj.weight",
       "ffn_up_shexp.weight": "block_sparse_moe.shared_experts.up_proj.weight",
       "ffn_down_shexp.weight": "block_sparse_moe.shared_experts.down_proj.weight"}
out = bytearray(b)
for name, t in tensors.items():
    assert t["type"] == 0, name
    m = re.match(r"blk\.(\d+)\.(.*)", name)
    P = "model.layers.%s." % m.group(1) if m else ""
    rest = m.group(2) if m else name
    if not m:
        v = hf(direct[name])
    elif rest in per:
        v = hf(P + per[rest])
    elif rest == "ssm_a":
        v = -np.exp(hf(P + "self_attn.A_log").astype(np.float64)).astype(np.float32)
    elif rest in ("attn_k_b.weight", "attn_v_b.weight"):
        kvb = hf(P + "self_attn.kv_b_proj.weight").reshape(H, dn + dv, r)
        v = kvb[:, :dn, :].transpose(0, 2, 1) if rest.startswith("attn_k_b") else kvb[:, dn:, :]
    elif rest.endswith("_exps.weight"):
        w = {"ffn_gate_exps.weight": "w1", "ffn_up_exps.weight": "w3", "ffn_down_exps.weight": "w2"}[rest]
        v = np.stack([hf(P + "block_sparse_moe.experts.%d.%s.weight" % (e, w)) for e in range(E)])
    else:
        raise KeyError(name)
    v = np.ascontiguousarray(v, dtype="<f4").ravel()
    assert v.size == int(np.prod(t["dims"])), name
    o = data + t["offset"]
    out[o:o + 4 * v.size] = v.tobytes()
open(OUT, "wb").write(out)
print("wrote", OUT)
