#!/usr/bin/env python3
# Seeds for the multi-file fuzz harnesses, cut from the warp fixtures at run
# time (so nothing large is committed): a tokenizer triple, a shrunken
# container (small trunk entries repacked, one expert, the layer's books) and
# expert records behind the geometry prefix fuzz_expert_record reads.
#   fixture_seeds.py FIXTURES_DIR BUILD_FUZZ_DIR
import hashlib, json, os, struct, sys

SEP = b"\n@@sluice-fuzz@@\n"
fix, out = sys.argv[1], sys.argv[2]


def put(harness, data):
    d = os.path.join(out, "corpus-" + harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "fx-" + hashlib.md5(data).hexdigest()[:12]), "wb") as f:
        f.write(data)


def read(p):
    with open(p, "rb") as f:
        return f.read()


for name in sorted(os.listdir(os.path.join(fix, "warp"))):
    if not name.endswith(".waste"):
        continue
    d = os.path.join(fix, "warp", name)
    m = json.loads(read(os.path.join(d, "manifest.json")))
    tok = [os.path.join(d, f) for f in ("tokenizer.model", "tiktoken.model") if os.path.exists(os.path.join(d, f))]
    if tok:
        parts = [read(tok[0])]
        parts.append(read(os.path.join(d, "specials.json")) if os.path.exists(os.path.join(d, "specials.json")) else b"")
        parts.append(read(os.path.join(d, "chat.json")) if os.path.exists(os.path.join(d, "chat.json")) else b"")
        put("fuzz_tokenizer", SEP.join(parts))
    eq = m["expert_quant"]
    trunk = read(os.path.join(d, "trunk.bin"))
    keep, blob = [], b""
    for e in m["trunk"]:
        if e["bytes"] > 4096 or len(keep) >= 12:
            continue
        e = dict(e)
        base = len(blob)
        if "scale_off" in e:
            e["scale_off"] = base + (e["scale_off"] - e["off"])
        blob += trunk[e["off"]:e["off"] + e["bytes"]]
        e["off"] = base
        keep.append(e)
    L, bank = sorted(m["layers"].items(), key=lambda kv: int(kv[0]))[0]
    stride = bank["bytes"] // bank["experts"]
    rec = 16 + 2 * eq["entries"] * eq["vec_dim"]
    books = read(os.path.join(d, "codebooks.bin"))[bank["codebook_base"] * rec:(bank["codebook_base"] + 3 * eq["stages"]) * rec]
    first = read(os.path.join(d, bank["file"]))[:stride]
    small = dict(m)
    small["trunk"] = keep
    small["layers"] = {L: dict(bank, experts=1, bytes=stride, codebook_base=0)}
    small.pop("integrity", None)
    # The record names its books by absolute id; the shrunken file starts at 0.
    rec0 = bytearray(first)
    struct.pack_into("<H", rec0, 10, 0)
    put("fuzz_container", SEP.join([json.dumps(small).encode(), blob, books, bytes(rec0)]))
    # Issue 32: dimension extremes, each factor inside its bound where one
    # exists but the product past int64 (or the bound), and counts at their
    # limits; the same for the manifest harness.
    extremes = [[1 << 20, 1 << 20, 1 << 26], [1 << 26] * 4, [1 << 26, 1 << 14, 1 << 26, 1 << 26],
                [1, 1 << 26, 1 << 14, 1 << 26], [(1 << 31) - 1, (1 << 31) - 1], [(1 << 63) - 1], [0, 5], [-1, 8],
                [1 << 40, 1], [4294967296, 4294967296]]
    for i, shape in enumerate(extremes):
        v = json.loads(json.dumps(small))
        if v["trunk"]:
            v["trunk"][i % len(v["trunk"])]["shape"] = shape
        body = json.dumps(v).encode()
        put("fuzz_container", SEP.join([body, blob, books, bytes(rec0)]))
        put("fuzz_manifest", body)
    for key, val in (("hidden_size", (1 << 31) - 1), ("num_experts", 1 << 20), ("moe_intermediate_size", 1 << 26),
                     ("num_hidden_layers", 100000), ("vocab_size", (1 << 31) - 1), ("num_attention_heads", 1 << 20)):
        v = json.loads(json.dumps(small))
        v["config"][key] = val
        body = json.dumps(v).encode()
        put("fuzz_container", SEP.join([body, blob, books, bytes(rec0)]))
        put("fuzz_manifest", body)
    # Special files in place of each container file: the harness reads the
    # choice from the input's last byte (b % 8 == 7).
    for b in (7, 15, 23, 31, 39, 47, 87, 127, 167, 207):
        put("fuzz_container", SEP.join([json.dumps(small).encode(), blob, books, bytes(rec0) + bytes([b])]))
    cfg = m["config"]
    I, n_in = cfg["moe_intermediate_size"], cfg["hidden_size"]
    geo = struct.pack("<HHBBBBHHHH", I // 8 - 1, n_in // 8 - 1, eq["stages"] - 1, 1 if eq.get("index_bits", 8) == 6 else 0,
                      stride // 4096 - 1, int(L), 0, bank["codebook_base"], 3 * eq["stages"] + bank["codebook_base"], 0)
    put("fuzz_expert_record", geo + first)
