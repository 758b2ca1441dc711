#!/usr/bin/env python3
"""Pairwise comparison of last-position logit files (little-endian f32, the
layout `sluice logits -o`, the oracle's --dump and tests/llamacpp's driver
write), for judging a lossy path such as a GGUF round trip:

    /usr/bin/python3 bench/compare_logits.py NAME=FILE NAME=FILE [NAME=FILE ...]

For each pair: max |diff|, mean |diff|, max |diff| relative to the first
file's max |logit|, Pearson correlation, both argmaxes, the overlap of the
top-10 sets, and the KL divergence of the second's softmax from the first's
(nats, in float64). A file whose size is not a whole number of floats, or
whose length differs from the first's, is an error naming it.
"""
import itertools, os, sys

import numpy as np


def load(spec):
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        sys.exit("compare_logits: expected NAME=FILE, got " + repr(spec))
    try:
        size = os.path.getsize(path)
    except OSError as e:
        sys.exit("compare_logits: %s: %s" % (path, e.strerror))
    if size == 0 or size % 4:
        sys.exit("compare_logits: %s: %d bytes is not a whole, non-empty number of float32 logits" % (path, size))
    x = np.fromfile(path, dtype="<f4").astype(np.float64)
    if not np.all(np.isfinite(x)):
        sys.exit("compare_logits: %s: holds NaN or Inf" % path)
    return name, x


def log_softmax(x):
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    files = [load(s) for s in sys.argv[1:]]
    n = len(files[0][1])
    for name, x in files[1:]:
        if len(x) != n:
            sys.exit("compare_logits: %s has %d logits, %s has %d" % (name, len(x), files[0][0], n))
    print("# %d logits each" % n)
    for (na, a), (nb, b) in itertools.combinations(files, 2):
        d = np.abs(a - b)
        la, lb = log_softmax(a), log_softmax(b)
        kl = float(np.sum(np.exp(la) * (la - lb)))
        top_a, top_b = set(np.argsort(-a)[:10]), set(np.argsort(-b)[:10])
        print("%s vs %s: max|diff| %.4e (%.3e of max|logit| %.3f), mean|diff| %.4e, corr %.8f, argmax %d / %d, "
              "top-10 overlap %d/10, KL(%s||%s) %.3e nats" %
              (na, nb, d.max(), d.max() / max(np.abs(a).max(), 1e-30), np.abs(a).max(), d.mean(),
               float(np.corrcoef(a, b)[0, 1]), int(a.argmax()), int(b.argmax()), len(top_a & top_b), na, nb, kl))


if __name__ == "__main__":
    main()
