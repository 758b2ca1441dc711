#!/usr/bin/python3
"""Checks the layering of docs/ARCHITECTURE.md: every `#include "dir/..."`
in src/ and cli/ must name a directory its own directory may use.

A layer that reaches up (format including model, the CLI including the
runtime's internals) is how the converter once grew its own container
reader and the CLI its own size parser; this test names the file and line
the moment such an include lands. Run by CTest (`layering`, label unit).
"""
import os, re, sys

# directory -> the project directories it may include (besides itself and
# the public header sluice/sluice.h, which every layer may use).
ALLOWED = {
    "common": set(),
    "quant": set(),
    "format": {"common", "quant"},
    "runtime": {"common", "quant", "format"},
    "vision": {"common", "quant", "format", "runtime"},
    "model": {"common", "quant", "format", "runtime", "vision"},
    "tokenizer": {"common"},
    "sample": set(),
    "grammar": {"sample"},
    "convert": {"common", "quant", "format"},
    "synth": {"common", "quant", "format", "convert"},
    "kld": {"common", "quant", "format"},
    "gguf": {"common", "quant", "format", "convert", "tokenizer"},
    "api": {"common", "quant", "format", "runtime", "vision", "model", "tokenizer", "sample", "grammar", "synth"},
    "server": {"common"},
    # The CLI is a client of the C API; the products that are files in,
    # files out (convert, synth, kld) and the server are linked beside it.
    "cli": {"common", "server", "convert", "synth", "kld", "gguf"},
}
# Known exceptions, each to be removed rather than added to: `sluice kld
# inspect` reads safetensors headers through src/format directly. (The CLI's
# size and CPU-list parsers moved from the runtime to src/common.)
EXCEPTIONS = {
    ("cli/kld/kld_commands.cpp", "format"),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad, checked = [], 0
    for top in ("src", "cli"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            rel = os.path.relpath(dirpath, root).split(os.sep)
            layer = "cli" if rel[0] == "cli" else (rel[1] if len(rel) > 1 else None)
            if layer is None:
                continue
            if layer not in ALLOWED:
                bad.append(f"{os.path.relpath(dirpath, root)}: directory not in the layering table "
                           f"(add it to scripts/check_layers.py and docs/ARCHITECTURE.md)")
                continue
            ok = ALLOWED[layer] | {layer, "sluice", "cli" if layer == "cli" else layer}
            for f in files:
                if not f.endswith((".h", ".hpp", ".cpp", ".c", ".cc")):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        checked += 1
                        rel_path = os.path.relpath(path, root).replace(os.sep, "/")
                        if m.group(1) not in ok and (rel_path, m.group(1)) not in EXCEPTIONS:
                            bad.append(f"{rel_path}:{n}: {layer} may not include "
                                       f"\"{m.group(1)}/...\" (allowed: {', '.join(sorted(ok))})")
    for b in bad:
        print(b)
    print(f"layering: {checked} project includes checked, {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
