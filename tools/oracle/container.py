"""WASTE v0 container reader for the sluice oracle.

Written from ../shared/spec/FORMAT.md alone (no code shared with the C++
engine).  Everything is decoded to float64 numpy / torch tensors:

* manifest.json (first occurrence of a duplicate key wins, FORMAT 2.6),
* trunk tensors F32 / Q8G / Q4G / Q3G with row padding and f16 group scales
  including subnormals (FORMAT 4, 12.1),
* codebooks.bin with f16 subnormals flushed to signed zero (FORMAT 5.3),
* expert records: VQ3R/VQ2R byte indices and VQ4P 6-bit packed indices,
  blocked by 64 rows with zero-padded tail blocks, f16 per-row scales
  (FORMAT 6).
"""

import json
import os
import struct
import zlib

import numpy as np
import torch

FMT_F32, FMT_Q8G, FMT_Q4G, FMT_Q3G = 0, 2, 3, 7
REC_MAGIC = 0x50584557  # 'WEXP'
REC_HEADER = struct.Struct("<IHHBBHHHIIIIIIII")  # 48 bytes
assert REC_HEADER.size == 48


class FormatError(Exception):
    pass


def _first_wins(pairs):
    out = {}
    for k, v in pairs:
        if k not in out:
            out[k] = v
    return out


def f16_decode(u16, flush_subnormals=False):
    """Decode raw binary16 bit patterns (any-shape uint16 array) to float64.

    Exponent 31 is not special-cased (FORMAT 12.1): it decodes as the finite
    value (1 + m/1024) * 2^16.  Subnormals are m * 2^-24, or signed zero when
    flush_subnormals is set (codebook entries, FORMAT 5.3).
    """
    u = np.asarray(u16, dtype=np.uint16).astype(np.int64)
    sign = np.where((u >> 15) & 1, -1.0, 1.0)
    e = (u >> 10) & 31
    m = u & 1023
    normal = np.ldexp((1024 + m).astype(np.float64), (e - 25).astype(np.int64))
    if flush_subnormals:
        sub = np.zeros_like(normal)
    else:
        sub = np.ldexp(m.astype(np.float64), -24)
    return sign * np.where(e == 0, sub, normal)


class Container:
    """A WASTE v0 container directory, decoded lazily (trunk tensors once)."""

    def __init__(self, path, verify=False):
        self.path = path
        self.verify = verify  # check each expert record's CRC-32 (FORMAT 6.8)
        mpath = os.path.join(path, "manifest.json")
        with open(mpath, "rb") as f:
            self.manifest = json.loads(f.read().decode("utf-8"),
                                       object_pairs_hook=_first_wins)
        m = self.manifest
        if m.get("format_version", None) != 0 or isinstance(m.get("format_version"), bool):
            raise FormatError("format_version must be 0")
        cfg = m.get("config", {})
        if not isinstance(cfg, dict):
            raise FormatError("config is not an object")
        prefix = m.get("tensor_prefix", "")
        if not isinstance(prefix, str):
            prefix = ""
        if isinstance(cfg.get("text_config"), dict):
            cfg = cfg["text_config"]
            if prefix == "":
                prefix = "language_model."
        self.config = cfg
        self.prefix = prefix

        with open(os.path.join(path, "trunk.bin"), "rb") as f:
            self.trunk = f.read()
        self.entries = {}
        for t in m.get("trunk", []):
            name = t.get("name")
            if isinstance(name, str) and name not in self.entries:
                self.entries[name] = t
        self._cache = {}

        eq = m.get("expert_quant", {}) or {}
        self.stages = _as_int(eq.get("stages"), 3)
        self.vec_dim = _as_int(eq.get("vec_dim"), 8)
        self.n_entries = _as_int(eq.get("entries"), 256)
        self.index_bits = _as_int(eq.get("index_bits"), 8)
        ib = _as_int(eq.get("index_block"), 64)
        if ib != 64:
            raise FormatError("index_block %d unsupported (must be 64)" % ib)
        if self.index_bits == 6:
            if self.stages != 4 or self.n_entries != 64:
                raise FormatError("index_bits 6 requires stages 4, entries 64")
        elif self.index_bits != 8:
            raise FormatError("index_bits %d unsupported" % self.index_bits)
        if self.vec_dim != 8:
            raise FormatError("vec_dim %d unsupported (must be 8)" % self.vec_dim)
        self.layers = m.get("layers", {}) or {}
        self._books = None
        self._banks = {}

    # ------------------------------------------------------------------ trunk
    def has(self, name):
        """name is relative to the tensor prefix."""
        return (self.prefix + name) in self.entries

    def get(self, name):
        """Dequantized trunk tensor (float64 torch, logical shape); cached."""
        full = self.prefix + name
        if full in self._cache:
            return self._cache[full]
        ent = self.entries.get(full)
        if ent is None:
            raise FormatError("missing trunk tensor " + full)
        arr = self._dequant(ent)
        t = torch.from_numpy(arr)
        self._cache[full] = t
        return t

    def _dequant(self, ent):
        fmt = _as_int(ent.get("fmt"), -1)
        shape = [int(s) for s in ent["shape"]]
        n_el = int(np.prod(shape))
        off = _as_int(ent.get("off"), 0)
        buf = self.trunk
        if fmt == FMT_F32:
            a = np.frombuffer(buf, dtype="<f4", count=n_el, offset=off)
            return a.astype(np.float64).reshape(shape)
        if fmt not in (FMT_Q8G, FMT_Q4G, FMT_Q3G):
            raise FormatError("trunk fmt %d unsupported (%s)" % (fmt, ent["name"]))
        g = _as_int(ent.get("group"), 128)
        N = shape[-1]
        R = n_el // N
        ng = -(-N // g)
        n = ng * g
        if fmt == FMT_Q8G:
            rowbytes = n
        elif fmt == FMT_Q4G:
            rowbytes = n // 2
        else:
            rowbytes = -(-3 * n // 8) + 1
        raw = np.frombuffer(buf, dtype=np.uint8, count=R * rowbytes,
                            offset=off).reshape(R, rowbytes)
        if fmt == FMT_Q8G:
            codes = raw.view(np.int8).astype(np.int64)
        elif fmt == FMT_Q4G:
            codes = np.empty((R, n), dtype=np.int64)
            codes[:, 0::2] = (raw & 15).astype(np.int64) - 8
            codes[:, 1::2] = (raw >> 4).astype(np.int64) - 8
        else:
            p = 3 * np.arange(n)
            b = p >> 3
            v = raw[:, b].astype(np.int64) | (raw[:, b + 1].astype(np.int64) << 8)
            codes = ((v >> (p & 7)) & 7) - 4
        soff = _as_int(ent.get("scale_off"), 0)
        sc = np.frombuffer(buf, dtype="<u2", count=R * ng, offset=soff).reshape(R, ng)
        scales = f16_decode(sc)  # subnormal scales are kept
        w = codes[:, :N].astype(np.float64) * np.repeat(scales, g, axis=1)[:, :N]
        return w.reshape(shape)

    # -------------------------------------------------------------- codebooks
    def books(self):
        """All codebook records as float64 [n_books, entries, vec_dim]."""
        if self._books is None:
            rec = 16 + 2 * self.n_entries * self.vec_dim
            with open(os.path.join(self.path, "codebooks.bin"), "rb") as f:
                data = f.read()
            nb = len(data) // rec
            a = np.frombuffer(data, dtype=np.uint8, count=nb * rec).reshape(nb, rec)
            vals = a[:, 16:].copy().view("<u2").reshape(nb, self.n_entries, self.vec_dim)
            self._books = torch.from_numpy(f16_decode(vals, flush_subnormals=True))
        return self._books

    # ---------------------------------------------------------------- experts
    def expert(self, layer, e, n_in, inter):
        """Decode record e of layer's bank.

        Returns dict: cbid, and for kind in ('gate', 'up', 'down'):
        codes [M, nv, S] int64 tensor and scale [M] float64 tensor.
        gate/up are [inter, n_in], down is [n_in, inter].
        """
        key = str(layer)
        ent = self.layers.get(key)
        if not isinstance(ent, dict):
            raise FormatError("no expert bank for layer %d" % layer)
        bank = self._banks.get(layer)
        if bank is None:
            with open(os.path.join(self.path, ent["file"]), "rb") as f:
                bank = f.read()
            self._banks[layer] = bank
        n_exp = _as_int(ent.get("experts"), 0)
        total = _as_int(ent.get("bytes"), 0)
        if n_exp <= 0 or total <= 0 or total % n_exp:
            raise FormatError("bad bank index for layer %d" % layer)
        stride = total // n_exp
        base = e * stride
        if base + stride > len(bank):
            raise FormatError("expert %d of layer %d: short read" % (e, layer))
        h = REC_HEADER.unpack_from(bank, base)
        (magic, lay, eid, fmt, _flags, cbid, lowrank, _r0, blocks,
         goff, uoff, doff, soff, _crc, _r1, _r2) = h
        S = self.stages
        bad = (magic != REC_MAGIC or lay != (layer & 0xFFFF) or eid != (e & 0xFFFF)
               or blocks * 4096 != stride or lowrank != 0
               or (self.index_bits == 6 and fmt != 8)
               or (self.index_bits == 8 and fmt not in (4, 5))
               or cbid + 3 * S > self.books().shape[0]
               or goff != 48 or not (goff < uoff < doff < soff <= stride)
               or 2 * (2 * inter + n_in) > stride - soff)
        if bad:
            raise FormatError("expert %d of layer %d: record header is not what "
                              "the bank index describes" % (e, layer))
        rec = memoryview(bank)[base:base + stride]
        if self.verify:
            end = soff + 2 * (2 * inter + n_in)
            if zlib.crc32(rec[48:end]) & 0xFFFFFFFF != _crc:
                raise FormatError("expert %d of layer %d: checksum mismatch" % (e, layer))
        out = {"cbid": cbid}
        shapes = {"gate": (inter, n_in, goff), "up": (inter, n_in, uoff),
                  "down": (n_in, inter, doff)}
        for kind, (M, N, moff) in shapes.items():
            out[kind] = self._codes(rec, moff, M, N)
        sc = f16_decode(np.frombuffer(rec, dtype="<u2", count=2 * inter + n_in,
                                      offset=soff))
        out["gate_scale"] = torch.from_numpy(sc[:inter].copy())
        out["up_scale"] = torch.from_numpy(sc[inter:2 * inter].copy())
        out["down_scale"] = torch.from_numpy(sc[2 * inter:].copy())
        return out

    def _codes(self, rec, moff, M, N):
        if N % 8:
            raise FormatError("expert matrix width %d not a multiple of 8" % N)
        nv = N // 8
        nb = -(-M // 64)
        u = 3 if self.index_bits == 6 else self.stages
        size = nb * nv * 64 * u
        raw = np.frombuffer(rec, dtype=np.uint8, count=size, offset=moff)
        # [row_block][vector][row_in_block][unit] -> [row][vector][unit]
        raw = raw.reshape(nb, nv, 64, u).transpose(0, 2, 1, 3).reshape(nb * 64, nv, u)[:M]
        raw = raw.astype(np.int64)
        if self.index_bits == 6:
            b0, b1, b2 = raw[..., 0], raw[..., 1], raw[..., 2]
            codes = np.stack([b0 & 63, ((b0 >> 6) | (b1 << 2)) & 63,
                              ((b1 >> 4) | (b2 << 4)) & 63, b2 >> 2], axis=-1)
        else:
            codes = raw
        if codes.size and codes.max() >= self.n_entries:
            raise FormatError("codebook index out of range")
        return torch.from_numpy(np.ascontiguousarray(codes))

    def dense_expert(self, rec, kind):
        """Dense float64 reconstruction W = rho * sum_s B_s[c] (FORMAT 6.9)."""
        codes = rec[kind]
        M, nv, S = codes.shape
        books = self.books()
        kid = {"gate": 0, "up": 1, "down": 2}[kind]
        acc = torch.zeros(M, nv, self.vec_dim, dtype=torch.float64)
        for s in range(S):
            acc += books[rec["cbid"] + kid * S + s][codes[:, :, s]]
        return acc.reshape(M, nv * self.vec_dim) * rec[kind + "_scale"][:, None]


def _as_int(v, default):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return default
    return int(v)
