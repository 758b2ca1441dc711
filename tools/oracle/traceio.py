"""Trace directory format shared by the oracle and the C++ engine.

DIR/trace.json:
  {"producer": "...", "hidden": d, "n_tokens": n, "n_layers": N,
   "stages": [{"layer": -1, "stage": "embed", "file": "embed.f32"},
              {"layer": 0, "stage": "attn", "file": "L000.attn.f32"},
              {"layer": 0, "stage": "ffn",  "file": "L000.ffn.f32"}, ...,
              {"layer": -1, "stage": "final", "file": "final.f32"}],
   "logits": "logits.f32"}
Every .f32 file is n_tokens x width little-endian float32, one row per
position (width = hidden for stages, vocab for logits).
"""

import json
import os

import numpy as np


def stage_file(layer, stage):
    if layer < 0:
        return "%s.f32" % stage
    return "L%03d.%s.f32" % (layer, stage)


def write_f32(path, arr):
    np.asarray(arr, dtype="<f4").tofile(path)


def read_f32(path):
    return np.fromfile(path, dtype="<f4").astype(np.float64)


def write_trace(dirpath, producer, hidden, n_layers, stages, logits):
    """stages: list of (layer, stage, [n, hidden] array); logits [n, V]."""
    os.makedirs(dirpath, exist_ok=True)
    entries = []
    n_tokens = None
    for layer, stage, arr in stages:
        arr = np.asarray(arr, dtype=np.float64)
        n_tokens = arr.shape[0]
        fname = stage_file(layer, stage)
        write_f32(os.path.join(dirpath, fname), arr)
        entries.append({"layer": int(layer), "stage": stage, "file": fname})
    write_f32(os.path.join(dirpath, "logits.f32"), logits)
    meta = {"producer": producer, "hidden": int(hidden),
            "n_tokens": int(n_tokens if n_tokens is not None else len(logits)),
            "n_layers": int(n_layers), "stages": entries, "logits": "logits.f32"}
    with open(os.path.join(dirpath, "trace.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def read_trace(dirpath):
    """Returns (meta, [(layer, stage, array[n, width])], logits[n, V])."""
    with open(os.path.join(dirpath, "trace.json")) as f:
        meta = json.load(f)
    n = int(meta["n_tokens"])
    out = []
    for ent in meta["stages"]:
        a = read_f32(os.path.join(dirpath, ent["file"]))
        out.append((int(ent["layer"]), ent["stage"], a.reshape(n, -1)))
    logits = None
    if meta.get("logits"):
        p = os.path.join(dirpath, meta["logits"])
        if os.path.exists(p):
            logits = read_f32(p).reshape(n, -1)
    return meta, out, logits
