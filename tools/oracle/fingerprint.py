"""Container fingerprints: what a fixture records about the container it was
generated from, and the first field in which two fingerprints differ.

The fingerprint is the JSON object `sluice info CONTAINER --fingerprint`
prints (family, tensor_prefix, trunk_formats, trunk_classes, expert_quant,
sha256 of manifest.json / codebooks.bin / trunk.bin, provenance).
python_fingerprint() recomputes it from the container alone (standard
library only) so the CLI's answer can be cross-checked.
"""

import hashlib
import json
import os
import subprocess

KEYS = ("expert_quant", "family", "provenance", "sha256", "tensor_prefix",
        "trunk_classes", "trunk_formats")
FMT_NAMES = {0: "F32", 1: "F16", 2: "Q8G", 3: "Q4G", 7: "Q3G"}
CLASSES = ("embed", "lm_head", "matrices", "vectors")


class FingerprintError(Exception):
    pass


def canonical(fp):
    """The CLI's own spelling: compact, keys sorted."""
    return json.dumps(fp, separators=(",", ":"), sort_keys=True)


def of_sidecar(sidecar):
    """The fingerprint part of a fixture sidecar."""
    return {k: sidecar.get(k) for k in KEYS}


def cli_fingerprint(sluice, container, timeout=120):
    r = subprocess.run([sluice, "info", container, "--fingerprint"], capture_output=True,
                       text=True, timeout=timeout)
    if r.returncode != 0:
        raise FingerprintError("%s info --fingerprint failed (rc %d): %s"
                               % (sluice, r.returncode, (r.stderr or r.stdout).strip()))
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        raise FingerprintError("sluice info --fingerprint printed no JSON: %s" % e)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _join(by_fmt):
    """Formats by byte share, largest first (ties: name, descending)."""
    return "/".join(f for _, f in sorted(((b, f) for f, b in by_fmt.items()), reverse=True))


def python_fingerprint(container):
    """The fingerprint recomputed from the files (independent of the CLI)."""
    with open(os.path.join(container, "manifest.json"), "rb") as f:
        m = json.loads(f.read().decode("utf-8"))
    cfg = m.get("config") or {}
    prefix = m.get("tensor_prefix") or ""
    if isinstance(cfg.get("text_config"), dict):
        cfg = cfg["text_config"]
    lac = cfg.get("linear_attn_config") or {}
    if (cfg.get("attn_res_block_size") or 0) > 0 or (cfg.get("routed_expert_hidden_size") or 0) > 0:
        family = "kimi-k3"
    elif lac.get("kda_layers"):
        family = "kimi-linear"
    else:
        family = "deepseek-v3"
    total, cls = {}, {c: {} for c in CLASSES}
    for t in m.get("trunk", []):
        name = t.get("name", "")
        if prefix and not name.startswith(prefix):
            continue
        rel = name[len(prefix):]
        fmt = FMT_NAMES.get(t.get("fmt"), "?")
        b = t.get("bytes", 0) if isinstance(t.get("bytes"), int) and t.get("bytes") > 0 else 0
        total[fmt] = total.get(fmt, 0) + b
        shape = t.get("shape", [])
        k = ("embed" if rel == "model.embed_tokens.weight" else "lm_head" if rel == "lm_head.weight"
             else "matrices" if len(shape) >= 2 and shape[0] > 1 else "vectors")
        cls[k][fmt] = cls[k].get(fmt, 0) + (b if b > 0 else 1)
    eq = m.get("expert_quant") or {}
    S, E, ib = eq.get("stages", 3), eq.get("entries", 256), eq.get("index_bits", 8)
    efmt = "VQ4P" if ib == 6 else "VQ2R" if S == 2 else "VQ3R" if S == 3 else "VQ%dR" % S
    if not cfg.get("num_experts"):
        efmt = "none"
    prov = m.get("provenance")
    return {"family": family, "tensor_prefix": prefix, "trunk_formats": _join(total),
            "trunk_classes": {k: _join(v) for k, v in cls.items() if v},
            "expert_quant": {"fmt": efmt, "stages": S, "entries": E, "index_bits": ib},
            "sha256": {f: sha256_file(os.path.join(container, f))
                       for f in ("manifest.json", "codebooks.bin", "trunk.bin")},
            "provenance": prov if isinstance(prov, dict) else None}


def differing_keys(a, b):
    """Top-level keys (and sha256 sub-keys) whose values differ."""
    out = []
    for k in KEYS:
        if k == "sha256":
            for f in sorted(set((a.get(k) or {})) | set((b.get(k) or {}))):
                if (a.get(k) or {}).get(f) != (b.get(k) or {}).get(f):
                    out.append("sha256." + f)
        elif a.get(k) != b.get(k):
            out.append(k)
    return out


def _eq_text(eq):
    if not isinstance(eq, dict):
        return str(eq)
    return "%s (%s stages x %s entries, %s-bit indices)" % (
        eq.get("fmt"), eq.get("stages"), eq.get("entries"), eq.get("index_bits"))


def _short(h):
    return (h or "none")[:12] + "..."


def _settings_diff(fx, ct):
    """'codebook_seed 1 -> 2' from two provenance blocks, when both have settings."""
    a = ((fx.get("provenance") or {}).get("settings")) or {}
    b = ((ct.get("provenance") or {}).get("settings")) or {}
    if not a or not b:
        return ""
    d = ["%s %s -> %s" % (k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b))
         if a.get(k) != b.get(k)]
    return ("; provenance settings differ: " + ", ".join(d)) if d else ""


def first_mismatch(fixture, container):
    """(field, reason) for the first field, in a fixed order, in which the
    fixture's fingerprint and the container's differ; None when they are the
    same.  Order: family, tensor_prefix, trunk formats (overall, then per
    class), expert quantization, codebooks sha256, trunk sha256, manifest
    sha256."""
    fx, ct = fixture, container
    if fx.get("family") != ct.get("family"):
        return "family", "fixture is %s, container is %s" % (fx.get("family"), ct.get("family"))
    if fx.get("tensor_prefix") != ct.get("tensor_prefix"):
        return "tensor_prefix", "fixture tensor_prefix %r, container %r" % (
            fx.get("tensor_prefix"), ct.get("tensor_prefix"))
    # Formats are compared as sets here (the strings list them by byte share,
    # which also moves with the shapes); an order-only difference falls
    # through to the sha256 fields, and anything left to the final check.
    if _fmts(fx.get("trunk_formats")) != _fmts(ct.get("trunk_formats")):
        return "trunk_formats", "fixture trunk %s, container %s" % (
            fx.get("trunk_formats"), ct.get("trunk_formats"))
    fc, cc = fx.get("trunk_classes") or {}, ct.get("trunk_classes") or {}
    for k in sorted(set(fc) | set(cc)):
        if _fmts(fc.get(k)) != _fmts(cc.get(k)):
            return "trunk_classes." + k, "fixture trunk %s %s, container %s %s" % (
                k, fc.get(k), k, cc.get(k))
    if fx.get("expert_quant") != ct.get("expert_quant"):
        return "expert_quant", "fixture experts %s, container %s" % (
            _eq_text(fx.get("expert_quant")), _eq_text(ct.get("expert_quant")))
    fs, cs = fx.get("sha256") or {}, ct.get("sha256") or {}
    for f, what in (("codebooks.bin", "codebooks"), ("trunk.bin", "trunk weights"),
                    ("manifest.json", "manifest")):
        if fs.get(f) != cs.get(f):
            lead = "same formats, different %s" % what
            if f == "manifest.json":
                lead = "same formats, codebooks and trunk, different manifest.json"
            return "sha256." + f, "%s (%s sha256 fixture %s, container %s)%s" % (
                lead, f, _short(fs.get(f)), _short(cs.get(f)), _settings_diff(fx, ct))
    for k in KEYS:   # exact equality of every field, whatever the above missed
        if fx.get(k) != ct.get(k):
            return k, "fixture %s %s, container %s" % (k, json.dumps(fx.get(k), sort_keys=True),
                                                       json.dumps(ct.get(k), sort_keys=True))
    return None


def _fmts(s):
    return frozenset((s or "").split("/"))
