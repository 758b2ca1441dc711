"""The float64 vision oracle (vision.py) against warp's fixtures and
against the engine (VISION.md §12).

    check_vision.py FIXTURES [--sluice BIN --work DIR]

Checks: the oracle vs warp's embeddings (randn grids and both images,
max |diff| <= 5e-5); with --sluice, the engine's embeddings of both images
(`sluice eval --embeddings-out`) vs the oracle on the fixture's pixel
tensors (which the engine's preprocessing reproduces bit for bit,
tests/vision): relative L2 <= 1e-5. Exits 77 (SKIP) without the fixtures.
"""

import argparse
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
except ImportError as e:  # pragma: no cover
    print("SKIP: %s (Debian python3-numpy and python3-torch)" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vision  # noqa: E402


def stats(a, b):
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    d = np.abs(a - b)
    rel = float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))
    corr = float(np.corrcoef(a.ravel(), b.ravel())[0, 1])
    return float(d.max()), float(d.mean()), rel, corr, int(a.argmax()), int(b.argmax())


def line(what, s):
    print("%-40s max|diff| %.3g  mean|diff| %.3g  rel L2 %.3g  corr %.9f  argmax %d/%d" % ((what,) + s))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fixtures")
    ap.add_argument("--sluice")
    ap.add_argument("--work", default="vision_oracle_work")
    a = ap.parse_args()
    d = os.path.join(a.fixtures, "vision")
    if not os.path.exists(os.path.join(d, "out", "cases.json")):
        print("SKIP: no %s (../shared absent)" % d)
        return 77
    cases = json.load(open(os.path.join(d, "out", "cases.json")))
    cont = os.path.join(d, "k3v-tiny.waste")
    tower = vision.Tower(cont)
    T = cases["text_hidden"]
    ok = True
    torch.set_num_threads(1)

    def rd(p):
        return np.fromfile(os.path.join(d, "out", p), dtype="<f4")

    oracle_img = {}
    for g in cases["tower_on_given_pixels"]:
        gh, gw = g["grid_h"], g["grid_w"]
        px = torch.from_numpy(rd(g["pixels"]).astype(np.float64).reshape(gh * gw, 588))
        e = vision.encode(tower, px, gh, gw).numpy()
        s = stats(e, rd(g["embeddings_warp"]).astype(np.float64))
        line("oracle vs warp, randn %dx%d" % (gh, gw), s)
        ok &= s[0] <= 5e-5
    for im in cases["images"]:
        gh, gw = im["grid_h"], im["grid_w"]
        px = torch.from_numpy(rd(im["pixels"]).astype(np.float64).reshape(gh * gw, 588))
        e = vision.encode(tower, px, gh, gw).numpy()
        oracle_img[im["file"]] = e
        s = stats(e, rd(im["embeddings"]).astype(np.float64))
        line("oracle vs warp, %s" % os.path.basename(im["file"]), s)
        ok &= s[0] <= 5e-5
    if a.sluice:
        os.makedirs(a.work, exist_ok=True)
        for im in cases["images"]:
            out = os.path.join(a.work, os.path.basename(im["file"]) + ".embed.f32")
            cmd = [a.sluice, "eval", cont, "x", "--image", os.path.join(d, "out", im["file"]),
                   "--embeddings-out", out, "--json", "--threads", "2", "--no-hotlist"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print("FAIL: %s\n%s" % (" ".join(cmd), r.stderr))
                ok = False
                continue
            e = np.fromfile(out, dtype="<f4").astype(np.float64).reshape(-1, T)
            s = stats(e, oracle_img[im["file"]])
            line("engine vs oracle, %s" % os.path.basename(im["file"]), s)
            ok &= s[2] <= 1e-5
        # The CLI's untemplated form is the fixture's prompt3 (README: warp's
        # `eval ... --json --top-k 5` printed ids 15 361 38 437 205).
        cmd = [a.sluice, "eval", cont, "Caption:", "--image", os.path.join(d, "images", "img_a.png"),
               "--json", "--top-k", "5", "--threads", "2", "--no-hotlist"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL: %s\n%s" % (" ".join(cmd), r.stderr))
            ok = False
        else:
            j = json.loads(r.stdout)
            ids = [t["id"] for t in j["top"]]
            ref = rd("prompt3.logits.f32")
            dl = max(abs(t["logit"] - float(ref[t["id"]])) for t in j["top"])
            print("sluice eval prompt3: %d tokens, top-5 %s (warp: [15, 361, 38, 437, 205]), max|diff| of their "
                  "logits %.3g" % (j["n_prompt"], ids, dl))
            ok &= ids == [15, 361, 38, 437, 205] and j["n_prompt"] == 29 and dl <= 3e-4
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
