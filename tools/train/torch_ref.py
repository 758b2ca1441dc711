#!/usr/bin/python3
"""Reference logits of the bf16 torch model for a `sluice kld` suite.

Runs tools/train/kimi_linear.py (the training model, bf16 weights widened
to float64) on every window of SUITE and writes a logits directory in the
layout `sluice kld capture` writes (manifest.json, logits_NNN.safetensors,
../shared/spec/KLD.md §1.8-1.9): the reference against which the quantized
containers of docs/QUALITY.md are ranked. Each window is fed exactly as the
suite stores it (no BOS added), as the engine's capture does; row r holds
the logits after token r, rows 0..T-2.

usage: torch_ref.py SUITE_DIR HF_DIR OUT_DIR

OUT_DIR is written as OUT_DIR.tmp and renamed when complete, so a stopped
run never leaves a directory that looks finished.
"""
import datetime
import hashlib
import json
import os
import shutil
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hfexport  # noqa: E402
from kimi_linear import KimiLinear  # noqa: E402


def write_safetensors(path, logits, meta):
    hdr = {"__metadata__": meta,
           "logits": {"dtype": "F32", "shape": list(logits.shape), "data_offsets": [0, logits.nbytes]}}
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)  # the data section starts 8-byte aligned (KLD.md §2.5)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        f.write(np.ascontiguousarray(logits, dtype="<f4").tobytes())


def sha256_file(path):
    s = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            s.update(b)
    return s.hexdigest()


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: torch_ref.py SUITE_DIR HF_DIR OUT_DIR")
    suite, hf, out = sys.argv[1:4]
    sm = json.load(open(os.path.join(suite, "suite-manifest.json")))
    T = sm["context_length"]
    cfg = json.load(open(os.path.join(hf, "config.json")))
    V = cfg["vocab_size"]
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    m = hfexport.load_bf16(KimiLinear(cfg), hf).double().eval()
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    recs, total = [], 0
    wins = sm["windows"]
    for i, w in enumerate(wins):
        toks = json.load(open(os.path.join(suite, w["token_file"])))
        if len(toks) != T:
            sys.exit("%s: window %d has %d tokens, the suite says %d" % (suite, w["index"], len(toks), T))
        with torch.no_grad():
            lg = m(torch.tensor([toks], dtype=torch.long))[0, :T - 1].float().numpy()
        name = "logits_%03d.safetensors" % w["index"]
        p = os.path.join(tmp, name)
        write_safetensors(p, lg, {
            "format": "sluice-kld-logits-v1", "window_index": str(w["index"]), "domain": w["domain"],
            "context_length": str(T), "vocab_size": str(V), "dtype": "float32",
            "token_ids_json_sha256": w["token_ids_json_sha256"], "model_container": "torch bf16: " + hf})
        size = os.path.getsize(p)
        total += size
        recs.append({"window_index": w["index"], "domain": w["domain"], "file": name, "key": "logits",
                     "shape": [T - 1, V], "dtype": "F32", "size_bytes": size, "sha256": sha256_file(p),
                     "token_ids_json_sha256": w["token_ids_json_sha256"]})
        print("\rtorch reference: window %d/%d" % (i + 1, len(wins)), end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    man = {"format_version": 1, "created_utc": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
           "kind": "sluice KLD logits", "tensor_key": "logits", "dtype": "float32", "vocab_size": V,
           "context_length": T, "window_count": len(recs), "window_range": [0, len(recs)],
           "total_scored_positions": len(recs) * (T - 1), "total_size_bytes": total,
           "suite_token_hash_sha256": sm["suite_token_hash_sha256"], "windows": recs,
           "runtime": {"engine": "torch %s (tools/train/kimi_linear.py, float64 from bf16 weights)" % torch.__version__,
                       "checkpoint": hf}}
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(man, f, indent=2, sort_keys=True)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)


if __name__ == "__main__":
    main()
