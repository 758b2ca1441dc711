"""Hugging Face-style checkpoint writer: config.json, model.safetensors
(bf16 weights, the router bias F32 as the releases keep it), the tokenizer
files.  The layout is tools/make_checkpoint.py's, which `sluice convert`
reads."""

import json
import os
import struct

import numpy as np
import torch


def to_bf16_bits(t):
    """float32 tensor -> uint16 bf16 bits, round to nearest even (= .bfloat16())."""
    return t.detach().to(torch.bfloat16).view(torch.int16).numpy().view("<u2")


def write_safetensors(path, tensors):
    """tensors: [(name, np.ndarray little-endian, dtype tag)]; atomic."""
    header, off, blobs = {}, 0, []
    for name, arr, tag in tensors:
        b = arr.tobytes()
        header[name] = {"dtype": tag, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read_safetensors(path):
    """{name: float32 torch tensor} (bf16 widened exactly)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, h in header.items():
            if name == "__metadata__":
                continue
            a, b = h["data_offsets"]
            f.seek(base + a)
            raw = f.read(b - a)
            if h["dtype"] == "BF16":
                u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
                arr = u.view(np.float32)
            elif h["dtype"] == "F32":
                arr = np.frombuffer(raw, dtype="<f4")
            else:
                raise ValueError("%s: dtype %s not expected" % (name, h["dtype"]))
            out[name] = torch.from_numpy(arr.copy().reshape(h["shape"]))
    return out


def hf_name(name):
    """Module parameter name -> checkpoint name: the conv kernels are bare
    parameters in the module, `..._conv1d.weight` in the releases."""
    return name + ".weight" if name.endswith("_conv1d") else name


def export(model, out_dir, hf_config):
    os.makedirs(out_dir, exist_ok=True)
    tensors = []
    for name, t in model.state_dict().items():
        name = hf_name(name)
        if name.endswith("e_score_correction_bias"):
            tensors.append((name, t.detach().float().numpy().astype("<f4"), "F32"))
        else:
            tensors.append((name, to_bf16_bits(t.float()), "BF16"))
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(hf_config, f, indent=1)


def load_bf16(model, ckpt_dir):
    """The exported (bf16-rounded) weights into model."""
    sd = read_safetensors(os.path.join(ckpt_dir, "model.safetensors"))
    sd = {(n[:-len(".weight")] if n.endswith("_conv1d.weight") else n): t for n, t in sd.items()}
    missing = set(model.state_dict()) - set(sd)
    if missing:
        raise ValueError("%s: missing tensors %s" % (ckpt_dir, sorted(missing)[:5]))
    model.load_state_dict(sd)
    return model
