#!/usr/bin/python3
"""`sluice convert` from a GGUF quantized the way users download them
(issue 29: the K-quant mixes of llama.cpp's own quantizer), end to end.

  kquant_import.py --sluice BIN --work DIR [--driver-dir DIR]

A small Kimi-Linear-shaped container whose widths are whole K-quant
super-blocks (`sluice synth --layers 3 --hidden 512 --moe-inter 256 ...`) is
exported as an f32 GGUF and quantized by llama.cpp (llama_model_quantize in
the npm prebuilt libllama, through llamacpp_logits.cpp --quantize) to
Q4_K_M (ftype 15: Q4_K, Q5_K and Q6_K tensors, Q5_0 / Q8_0 where a row is
not whole super-blocks) and Q2_K (ftype 10: Q2_K, Q3_K, Q4_K ...). Each is
converted with `sluice convert`, and sluice's last-position logits on the
result are compared with llama.cpp's on the same GGUF, over a 64-token
prompt: max|diff|, mean|diff|, correlation, argmax and the GGUF's type
histogram are printed.

Threshold: correlation >= 0.99; the argmax is printed, not required (a
second quantization may flip a near-tie). Why: the dequantized weights are
exactly ggml's (kquant_dequant.py), and sluice then quantizes them again,
the experts by k-means into VQ3R (3 bits a weight) and the trunk into Q4G,
so the engines differ by that second quantization. Measured (seed 29): Q4_K_M
0.99932, Q2_K 0.99768 (its 2-bit weights requantize worse). One wrong term
in a dequantizer, measured: the Q4_K / Q5_K mins dropped, -0.0915 on Q4_K_M
and 0.9525 on Q2_K; the Q2_K mins dropped, -0.0179 on Q2_K.
SKIP (77) where numpy or the npm package is absent.
"""
import collections, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from llamacpp_prep import driver_args, finish, numpy  # noqa: E402
from gguf_import import read_gguf  # noqa: E402

NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 10: "Q2_K", 11: "Q3_K",
         12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 20: "IQ4_NL", 30: "BF16"}
# llama_ftype, the K-quant types the file must hold (else the case tests nothing).
MIXES = {"Q4_K_M": (15, {"Q4_K", "Q6_K"}), "Q2_K": (10, {"Q2_K", "Q3_K"})}
MIN_CORR = 0.99


def run(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print("%s failed (exit %d): %s" % (what, p.returncode, (p.stdout + p.stderr)[-2000:]))
        sys.exit(1)
    return p.stdout + p.stderr


def main():
    np = numpy()
    a, ddir = driver_args()
    driver, bins = os.path.join(ddir, "llamacpp_logits"), os.path.join(ddir, "bins")

    src = os.path.join(a.work, "kq.waste")
    run([a.sluice, "synth", "-o", src, "--layers", "3", "--hidden", "512", "--vocab", "2048", "--experts", "8",
         "--top-k", "2", "--moe-inter", "256", "--inter", "512", "--heads", "4", "--kda-heads", "4", "--kda-dim", "64",
         "--kv-lora", "256", "--seed", "29"], "sluice synth")
    f32 = os.path.join(a.work, "kq-f32.gguf")
    run([a.sluice, "export-gguf", src, f32, "-q"], "sluice export-gguf")
    ids = ",".join(str((i * 37 + 5) % 2048) for i in range(64))
    fails = []
    for mix, (ftype, must) in MIXES.items():
        g = os.path.join(a.work, "kq-%s.gguf" % mix)
        run([driver, "--quantize", str(ftype), "--in", f32, "--out", g, "--bins", bins, "--threads", "2"],
            "llama.cpp quantize to " + mix)
        _, tensors, _, _ = read_gguf(g)
        hist = collections.Counter(NAMES.get(t["type"], str(t["type"])) for t in tensors.values())
        print("%s: %s" % (mix, ", ".join("%s %d" % kv for kv in sorted(hist.items()))))
        if not must <= set(hist):
            fails.append("%s: llama.cpp wrote no %s tensors" % (mix, " / ".join(sorted(must - set(hist)))))
            continue
        out = os.path.join(a.work, "kq-%s.waste" % mix)
        run([a.sluice, "convert", g, out, "--force", "-q"], "sluice convert " + g)
        s_out, l_out = out + ".sluice.f32", out + ".llama.f32"
        run([a.sluice, "logits", out, "--ids", ids, "-o", s_out, "-q"], "sluice logits")
        run([driver, g, "--ids", ids, "--bins", bins, "--out", l_out], "llama.cpp logits")
        S, L = np.fromfile(s_out, dtype="<f4").astype(np.float64), np.fromfile(l_out, dtype="<f4").astype(np.float64)
        if S.shape != L.shape:
            fails.append("%s: %d logits from sluice, %d from llama.cpp" % (mix, S.size, L.size))
            continue
        d = np.abs(S - L)
        corr = float(np.corrcoef(S, L)[0, 1])
        ok = corr >= MIN_CORR
        print("%s, 64 tokens: max|diff| %.3e (max|logit| %.3f), mean|diff| %.3e, corr %.6f, argmax %d / %d  %s" %
              (mix, d.max(), np.abs(L).max(), d.mean(), corr, int(L.argmax()), int(S.argmax()),
               "OK" if ok else "FAIL (corr >= %.2f)" % MIN_CORR))
        if not ok:
            fails.append("%s: correlation %.6f, argmax %d / %d" % (mix, corr, int(L.argmax()), int(S.argmax())))
    finish(fails)


if __name__ == "__main__":
    main()
