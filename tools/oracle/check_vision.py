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
from model import Model  # noqa: E402


def stats(a, b):
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    d = np.abs(a - b)
    rel = float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))
    corr = float(np.corrcoef(a.ravel(), b.ravel())[0, 1])
    return float(d.max()), float(d.mean()), rel, corr, int(a.argmax()), int(b.argmax())


def line(what, s):
    print("%-40s max|diff| %.3g  mean|diff| %.3g  rel L2 %.3g  corr %.9f  argmax %d/%d" % ((what,) + s))


def check_chat(a, d, cont):
    """`sluice chat --vision`: an image that fails when its turn is sent
    abandons that turn and leaves nothing queued, so the image turns after
    it still expand and run (the reference engine leaves the batch's other
    images queued and fails every later image turn)."""
    cut = os.path.join(a.work, "cut.png")
    with open(cut, "wb") as f:  # a valid header, no image data: passes /image, fails to decode
        f.write(open(os.path.join(d, "images", "img_a.png"), "rb").read()[:33])
    img = os.path.join(d, "images", "img_a.png")
    script = "/image %s\n/image %s\nfirst\n/image %s\nsecond\nthird\n" % (img, cut, img)
    cmd = [a.sluice, "chat", cont, "--vision", "-n", "3", "--temp", "0", "--threads", "2", "--no-hotlist"]
    r = subprocess.run(cmd, input=script, capture_output=True, text=True)
    err = r.stderr
    errors = [l for l in err.splitlines() if l.startswith("sluice chat:")]
    fails = sum("cut.png" in l for l in errors)
    turns = err.count("[%s: 6 image tokens]" % img)
    good = r.returncode == 1 and fails == 1 and len(errors) == 1 and turns == 2
    print("sluice chat: failed image abandoned its turn (%d messages), image turns encoded %d (want 2), "
          "rc %d: %s" % (fails, turns, r.returncode, "ok" if good else "FAIL\n" + err[-3000:]))
    return good


def check_prompt3(a, d, cont, tower_rows, rd):
    """prompt3 end to end against the float64 oracle (tower and text model,
    the image rows spliced in, VISION.md 6.3), on the chunked and the
    token-at-a-time path, and warp's logits against the same oracle.

    prompt3 is ill-conditioned in its image rows: a 1e-6 change to them
    moves its logits by ~7e-5 (printed below), so warp's float32 rounding
    alone puts warp ~2.5e-4 from the float64 result. An engine within
    5e-5 of that result is then at least ~2e-4 from warp by the triangle
    inequality; the oracle, not warp, is the reference that can tell which
    side is off (docs/LEARNED.md, 2026-12-03)."""
    ex = np.fromfile(os.path.join(d, "out", "prompt3.expanded.i32"), dtype="<i4").tolist()
    pads = [i for i, t in enumerate(ex) if t == 505]
    m = Model(cont)

    def logits(rows):
        m.reset()
        return m.forward(ex, rows={p: rows[k] for k, p in enumerate(pads)})[-1].numpy()

    ref = logits(tower_rows)
    warp = rd("prompt3.logits.f32").astype(np.float64)
    warp_rows = rd("img_a.embed.f32").astype(np.float64).reshape(len(pads), -1)
    noise = np.random.default_rng(0).standard_normal(tower_rows.shape) * 1e-6
    sens = float(np.abs(logits(tower_rows + noise) - ref).max())
    via_warp = float(np.abs(logits(warp_rows) - warp).max())
    line("warp vs oracle, prompt3 logits", stats(warp, ref))
    print("  oracle's text model on warp's image rows vs warp: max|diff| %.3g; "
          "image rows + N(0, 1e-6) move the oracle's logits by %.3g" % (via_warp, sens))
    ok = True
    for chunk in (64, 1):
        cmd = [a.sluice, "eval", cont, "Caption:", "--image", os.path.join(d, "images", "img_a.png"), "--json",
               "--top-k", str(len(ref)), "--threads", "2", "--no-hotlist", "--chunk", str(chunk)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL: %s\n%s" % (" ".join(cmd), r.stderr))
            ok = False
            continue
        eng = np.zeros(len(ref))
        for t in json.loads(r.stdout)["top"]:
            eng[t["id"]] = t["logit"]  # printed to 1e-6
        s = stats(eng, ref)
        line("engine vs oracle, prompt3 %s" % ("step" if chunk == 1 else "chunked"), s)
        line("engine vs warp, prompt3 %s" % ("step" if chunk == 1 else "chunked"), stats(eng, warp))
        ok &= s[0] <= 1e-4 and s[4] == s[5]
    return ok


def check_convert(a, d, cont):
    """`sluice convert` on the fixture's source must write every vision
    tensor as warp's converter + requant_vision.py leave it: same format,
    flattened shape, and identical code and scale bytes."""
    out = os.path.join(a.work, "k3v-converted.waste")
    cmd = [a.sluice, "convert", "--src", os.path.join(d, "hf-k3v-tiny"), "--out", out, "--jobs", "2"]
    if os.path.exists(out):
        import shutil
        shutil.rmtree(out)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL: %s\n%s" % (" ".join(cmd), r.stderr[-2000:]))
        return False
    mine = {e["name"]: e for e in json.load(open(os.path.join(out, "manifest.json")))["trunk"]}
    ref = {e["name"]: e for e in json.load(open(os.path.join(cont, "manifest.json")))["trunk"]}
    tm = open(os.path.join(out, "trunk.bin"), "rb").read()
    tr = open(os.path.join(cont, "trunk.bin"), "rb").read()
    n = bad = 0
    for name, e in ref.items():
        if not (name.startswith("vision_tower.") or name.startswith("mm_projector.")):
            continue
        n += 1
        m = mine.get(name)
        if m is None or m["fmt"] != e["fmt"] or m["shape"] != e["shape"]:
            print("convert: %s: %s vs warp %s" % (name, m and (m["fmt"], m["shape"]), (e["fmt"], e["shape"])))
            bad += 1
            continue
        if e["fmt"] == 0:
            same = tm[m["off"]:m["off"] + e["bytes"]] == tr[e["off"]:e["off"] + e["bytes"]]
        else:
            rows = int(np.prod(e["shape"][:-1]))
            ng = -(-e["shape"][-1] // 128)
            pay = rows * ng * 128
            same = (tm[m["off"]:m["off"] + pay] == tr[e["off"]:e["off"] + pay] and
                    tm[m["scale_off"]:m["scale_off"] + 2 * rows * ng] == tr[e["scale_off"]:e["scale_off"] + 2 * rows * ng])
        if not same:
            print("convert: %s: bytes differ from warp's requantized tensor" % name)
            bad += 1
    print("sluice convert: %d vision tensors, %d differ from warp's converter + requant pass" % (n, bad))
    return bad == 0 and n > 0


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
        ok &= check_prompt3(a, d, cont, oracle_img["../images/img_a.png"], rd)
        ok &= check_chat(a, d, cont)
        ok &= check_convert(a, d, cont)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
