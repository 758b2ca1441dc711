"""Tests of python/sluice.py over libsluice, on models/sluice-mini.

unittest (stdlib) so Debian's python3 runs them as is; pytest collects them
too. The library is the one $SLUICE_LIB names, else the one beside the
installed module. The model: $SLUICE_TEST_MODEL, else the repository's
models/sluice-mini.
"""
import json
import math
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
if "sluice" not in sys.modules and not os.environ.get("SLUICE_PY_INSTALLED"):
    sys.path.insert(0, os.path.dirname(HERE))
import sluice  # noqa: E402

MODEL = os.environ.get("SLUICE_TEST_MODEL") or os.path.join(HERE, "..", "..", "models", "sluice-mini")
try:
    import numpy as np
except ImportError:
    np = None


def argmax(v):
    return max(range(len(v)), key=lambda i: (v[i], -i))


class Binding(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = sluice.Model(MODEL, threads=2)

    @classmethod
    def tearDownClass(cls):
        cls.m.close()

    def setUp(self):
        self.m.reset()

    def test_info(self):
        i = self.m.info()
        print(f"info: {i['family']} {i['n_layers']} layers, {i['n_experts']} experts top-{i['top_k']}, "
              f"vocab {i['vocab']}, backend {i['backend']}")
        self.assertEqual(i["family"], "kimi-linear")
        self.assertEqual(i["vocab"], self.m.n_vocab)
        self.assertGreater(i["n_experts"], 0)
        self.assertGreater(i["trunk_bytes"], 0)

    def test_tokenize_roundtrip(self):
        text = "In the beginning God created the heaven and the earth."
        ids = self.m.tokenize(text)
        self.assertTrue(ids and all(0 <= t < self.m.n_vocab for t in ids))
        self.assertEqual(self.m.detokenize(ids), text)

    def test_eval_logits(self):
        ids = [self.m.bos] + self.m.tokenize("And God said")
        a = self.m.eval(ids)
        self.assertEqual(len(a), self.m.n_vocab)
        if np is not None:
            self.assertEqual(a.dtype, np.float32)
        self.assertTrue(all(math.isfinite(float(x)) for x in a))
        self.assertEqual(self.m.n_past, len(ids))
        # The same ids in a fresh session: bit-identical logits.
        self.m.reset()
        b = self.m.eval(ids)
        diff = max(abs(float(x) - float(y)) for x, y in zip(a, b))
        print(f"eval twice: max|diff| {diff}, argmax {argmax(list(a))}")
        self.assertEqual(diff, 0.0)
        # Token at a time gives the same last logits as the whole prompt
        # (placement never changes results).
        self.m.reset()
        for t in ids:
            c = self.m.eval([t])
        d = max(abs(float(x) - float(y)) for x, y in zip(a, c))
        print(f"one at a time vs whole prompt: max|diff| {d}")
        self.assertLessEqual(d, 1e-4)
        self.assertEqual(argmax(list(a)), argmax(list(c)))

    def test_generate(self):
        pieces = list(self.m.generate("And God said", max_tokens=24, temperature=0.0))
        text = "".join(pieces)
        print(f"generate (greedy): {text!r}")
        self.assertTrue(all(isinstance(p, str) for p in pieces))
        self.assertTrue(text)
        self.m.reset()
        again = "".join(self.m.generate("And God said", max_tokens=24, temperature=0.0))
        self.assertEqual(text, again)
        self.m.reset()
        s1 = "".join(self.m.generate("And God said", max_tokens=16, seed=3))
        self.m.reset()
        s2 = "".join(self.m.generate("And God said", max_tokens=16, seed=3))
        self.assertEqual(s1, s2)

    def test_generate_chat(self):
        text = "".join(self.m.generate("In the beginning God created the heaven and the earth.", max_tokens=40,
                                       temperature=0.0, chat=True))
        print(f"generate (chat): {text!r}")
        self.assertIsInstance(text, str)

    def test_state_roundtrip(self):
        ids = [self.m.bos] + self.m.tokenize("And the earth was without form")
        self.m.eval(ids)
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "state")
            self.m.save_state(p)
            more = self.m.tokenize(", and void")
            x = self.m.eval(more)
            with sluice.Model(MODEL, threads=2) as other:
                other.load_state(p)
                y = other.eval(more)
        self.assertEqual([float(v) for v in x], [float(v) for v in y])

    def test_rewind_reuses_a_prefix_bit_identically(self):
        ids = [self.m.bos] + self.m.tokenize("And the earth was without form, and void")
        self.m.reset()
        fresh = [float(v) for v in self.m.eval(ids)]
        self.m.checkpoint()
        self.assertEqual(self.m.session_tokens(), ids)
        self.m.rewind(3)
        self.assertEqual(self.m.n_past, 3)
        self.assertEqual(self.m.session_tokens(), ids[:3])
        again = [float(v) for v in self.m.eval(ids[3:])]
        self.assertEqual(fresh, again)
        with self.assertRaises(sluice.SluiceError):
            self.m.rewind(len(ids) + 1)

    def test_plan(self):
        p = sluice.plan(MODEL, budget="1G", ctx=256)
        print(f"plan: floor {p['floor']} budget {p['budget']} cache {p['cache']} ({p['choice']})")
        self.assertEqual(p["budget"], 1 << 30)
        self.assertEqual(p["context"], 256)
        self.assertGreater(p["floor"], p["trunk"])
        with self.assertRaises(sluice.SluiceError) as e:
            sluice.plan(MODEL, budget="1K")
        self.assertIn("floor", str(e.exception))

    def test_stats(self):
        self.m.eval([self.m.bos])
        s = self.m.stats()
        self.assertGreaterEqual(s["tokens_evaluated"], 1)
        self.assertIn(s["cache_policy"], ("freq", "lfru", "lru"))

    def test_structs_hold_everything_the_library_writes(self):
        # The library writes whole C structs into these mirrors: one that
        # lags the header (fields added at the end) lets it write past the
        # buffer ctypes allocated. A canary after each struct must survive.
        import ctypes

        def canary_call(struct, call):
            n = ctypes.sizeof(struct)
            buf = (ctypes.c_ubyte * (n + 512))(*([0xAB] * (n + 512)))
            call(ctypes.cast(buf, ctypes.POINTER(struct)))
            self.assertEqual(bytes(buf[n:]), b"\xab" * 512, f"{struct.__name__} is smaller than the C struct")

        lib = self.m._lib
        canary_call(sluice._Stats, lambda p: lib.sluice_stats_get(self.m._live(), p))
        err = ctypes.create_string_buffer(512)
        canary_call(sluice._Plan, lambda p: lib.sluice_plan_model(os.fsencode(MODEL), 0, 0, None, p, err, len(err)))
        canary_call(sluice._Config, lambda p: lib.sluice_config_default(p))

    def test_dump_routes(self):
        info = self.m.info()
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "routes.jsonl")
            self.m.dump_routes(p)
            ids = [self.m.bos] + self.m.tokenize("And God saw the light")
            self.m.eval(ids)
            self.m.dump_routes(None)
            with open(p) as f:
                lines = [json.loads(l) for l in f]
        self.assertEqual([l["tok"] for l in lines], list(range(len(ids))))
        for l in lines:
            self.assertEqual(len(l["layers"]), info["n_moe_layers"])
            for sel in l["layers"]:
                self.assertEqual(len(sel), info["top_k"])
                self.assertTrue(all(0 <= e < info["n_experts"] for e in sel))


class Errors(unittest.TestCase):
    def test_missing_container(self):
        with self.assertRaises(sluice.SluiceError) as e:
            sluice.Model(os.path.join(tempfile.gettempdir(), "no-such-container-here"))
        print(f"missing container: {e.exception}")
        self.assertIn("no-such-container-here", str(e.exception))

    def test_metadata_only(self):
        with sluice.Model(MODEL, metadata_only=True) as m:
            self.assertEqual(m.info()["family"], "kimi-linear")
            self.assertTrue(m.tokenize("God"))
            with self.assertRaises(sluice.SluiceError) as e:
                m.eval([1])
            self.assertEqual(e.exception.status, 6)
            self.assertIn("metadata-only", str(e.exception))

    def test_bad_cpus(self):
        with self.assertRaises(sluice.SluiceError) as e:
            sluice.Model(MODEL, cpus="3-1")
        self.assertEqual(e.exception.status, 1)
        self.assertIn("3-1", str(e.exception))

    def test_exclusive(self):
        # A copy: an exclusive lock on the shared model would refuse the
        # tests running beside this one.
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "model")
            shutil.copytree(MODEL, model)
            with sluice.Model(model, metadata_only=True, exclusive=True):
                # flock locks belong to the open file: a second open, even in
                # this process, is refused while the first holds it.
                with self.assertRaises(sluice.SluiceError) as e:
                    sluice.Model(model, metadata_only=True)
                print(f"second open while exclusive: {e.exception}")
                self.assertEqual(e.exception.status, 8)
            with sluice.Model(model, metadata_only=True):
                pass  # released with the first context

    def test_closed(self):
        m = sluice.Model(MODEL, metadata_only=True)
        m.close()
        with self.assertRaises(sluice.SluiceError):
            m.info()


if __name__ == "__main__":
    unittest.main(verbosity=2)
