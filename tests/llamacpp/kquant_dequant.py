#!/usr/bin/python3
"""sluice's GGUF dequantizers against ggml's own (issue 29: `sluice convert`
from the GGUF files users download, which hold K-quants).

  kquant_dequant.py --sluice BIN --probe PROBE --work DIR [--driver-dir DIR]

For each quantized type sluice reads from a GGUF (q4_0, q4_1, q5_0, q5_1,
iq4_nl, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_xs, mxfp4) a GGUF file is written holding one tensor of random blocks (every byte
random, the f16 scales replaced by random finite values, 3 x 4096 blocks of
32 or 3 x 512 super-blocks of 256), read back by gguf_dequant_probe (sluice's
gguf::Reader::read_rows_f32) and by llama.cpp's ggml (the npm prebuilt's
libggml-base, ggml_get_type_traits(type)->to_float, through
llamacpp_logits.cpp --dequant) from the same block bytes. Printed per type:
max |diff|, that relative to max |value|, and how many of the values are
bit-identical.

Threshold: max |diff| <= 2^-20 of the tensor's max |value|. Why not
bit-exact: ggml may be compiled with floating-point contraction, turning
`d1 * q - m1` into one fused multiply-add (one rounding instead of two);
every other difference (a wrong shift, mask, scale index or sign) moves
values by whole quantization steps, at least 2^-8 of max |value| for these
formats. A K-quant tensor whose rows are not whole super-blocks is refused
when the file is opened; one of a type sluice does not read (IQ2_XXS) when
it is read; both name the file and the tensor.
SKIP (77) where numpy or the npm package is absent.
"""
import os, struct, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from llamacpp_prep import driver_args, finish, numpy  # noqa: E402

# ggml type number, block values, block bytes, offsets of the f16 fields.
TYPES = {
    "q4_0": (2, 32, 18, [0]),
    "q4_1": (3, 32, 20, [0, 2]),
    "q5_0": (6, 32, 22, [0]),
    "q5_1": (7, 32, 24, [0, 2]),
    "iq4_nl": (20, 32, 18, [0]),
    "q8_0": (8, 32, 34, [0]),
    "q2_k": (10, 256, 84, [80, 82]),
    "q3_k": (11, 256, 110, [108]),
    "q4_k": (12, 256, 144, [0, 2]),
    "q5_k": (13, 256, 176, [0, 2]),
    "q6_k": (14, 256, 210, [208]),
    "iq4_xs": (23, 256, 136, [0]),
    "mxfp4": (39, 32, 17, []),
}
# E8M0 exponents (byte offsets): kept in 2^-28 .. 2^12, so no value overflows (and 0, 1, 2 once each).
E8M0_AT = {"mxfp4": [0]}
REL_TOL = 2.0 ** -20


def gguf_bytes(tensors):
    """A GGUF v3 file: no metadata, the given (name, type, ne0, rows, data) tensors."""
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 0)
    off, infos, blobs = 0, b"", []
    for name, t, ne0, rows, data in tensors:
        infos += s(name) + struct.pack("<I", 2) + struct.pack("<QQ", ne0, rows) + struct.pack("<IQ", t, off)
        pad = (-len(data)) % 32
        blobs.append(data + b"\0" * pad)
        off += len(data) + pad
    body = head + infos
    return body + b"\0" * ((-len(body)) % 32) + b"".join(blobs)


def random_blocks(np, rng, nblocks, size, f16_at, e8m0_at):
    b = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint8)
    for at in f16_at:
        h = rng.uniform(-0.05, 0.05, size=nblocks).astype(np.float16).view(np.uint8).reshape(nblocks, 2)
        b[:, at:at + 2] = h
    for at in e8m0_at:
        b[:, at] = rng.integers(100, 141, size=nblocks, dtype=np.uint8)
        b[:3, at] = [0, 1, 2]  # the subnormal scales 2^-128 and 2^-127, and the first normal one
    return b.tobytes()


def main():
    np = numpy()
    a, ddir = driver_args("--probe")  # --sluice unused: the probe reads the files
    driver = os.path.join(ddir, "llamacpp_logits")
    rng = np.random.default_rng(29)
    fails = []
    tensors = []
    for name, (t, qk, size, f16_at) in TYPES.items():
        rows, ne0 = 3, (4096 if qk == 32 else 512) * qk
        blocks = random_blocks(np, rng, rows * ne0 // qk, size, f16_at, E8M0_AT.get(name, []))
        tensors.append((name, t, ne0, rows, blocks))
    g = os.path.join(a.work, "kquants.gguf")
    with open(g, "wb") as f:
        f.write(gguf_bytes(tensors))
    out = os.path.join(a.work, "sluice")
    os.makedirs(out, exist_ok=True)
    p = subprocess.run([a.probe, g, out], capture_output=True, text=True)
    if p.returncode != 0:
        print("gguf_dequant_probe failed (exit %d): %s" % (p.returncode, p.stderr))
        sys.exit(1)
    for name, t, ne0, rows, blocks in tensors:
        raw = os.path.join(a.work, name + ".blocks")
        ref = os.path.join(a.work, name + ".ggml.f32")
        with open(raw, "wb") as f:
            f.write(blocks)
        r = subprocess.run([driver, "--dequant", str(t), "--in", raw, "--out", ref], capture_output=True, text=True)
        if r.returncode != 0:
            fails.append("%s: ggml's to_float failed: %s" % (name, r.stdout + r.stderr))
            continue
        G = np.fromfile(ref, dtype="<f4")
        S = np.fromfile(os.path.join(out, name + ".f32"), dtype="<f4")
        if G.shape != S.shape or not np.all(np.isfinite(G)):
            fails.append("%s: %d values from ggml, %d from sluice" % (name, G.size, S.size))
            continue
        d = np.abs(G.astype(np.float64) - S.astype(np.float64))
        scale = float(np.abs(G).max())
        same = int(np.sum(G.view(np.uint32) == S.view(np.uint32)))
        ok = d.max() <= REL_TOL * scale
        print("%s: %d values, max|diff| %.3e (%.2e of max|value| %.4f), %d bit-identical  %s" %
              (name, G.size, d.max(), d.max() / scale, scale, same, "OK" if ok else "FAIL"))
        if not ok:
            fails.append("%s: max|diff| %.3e > %.1e x %.4f" % (name, d.max(), REL_TOL, scale))

    # Refusals: a tensor of a type sluice does not read (at read, naming it),
    # and a K-quant row that is not a whole number of super-blocks (at open).
    for what, tensor, want_rc, want in (
            ("IQ2_XXS tensor", ("iq2", 16, 256, 1, b"\0" * 66), 3,
             "tensor iq2 is of ggml type 16 (IQ2_XXS), which sluice does not read"),
            ("Q4_K rows of 128", ("odd", 12, 128, 1, b"\0" * 144), 1,
             "tensor odd: rows of 128 values do not fit its type")):
        bad = os.path.join(a.work, "bad-%s.gguf" % tensor[0])
        with open(bad, "wb") as f:
            f.write(gguf_bytes([tensor]))
        p = subprocess.run([a.probe, bad, out], capture_output=True, text=True)
        ok = p.returncode == want_rc and want in p.stderr and bad in p.stderr
        print("refused, %s: exit %d, %s  %s" % (what, p.returncode, p.stderr.strip(), "OK" if ok else "FAIL"))
        if not ok:
            fails.append("%s: not refused as expected" % what)
    finish(fails)


if __name__ == "__main__":
    main()
