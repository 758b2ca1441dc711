"""sluice: Python binding of libsluice (the C API of include/sluice/sluice.h).

ctypes and the standard library only; logits come back as a numpy array
when numpy is importable, else as a list of floats.

    import sluice
    with sluice.Model("models/sluice-mini") as m:
        print(m.info()["family"])
        ids = m.tokenize("In the beginning")
        logits = m.eval(ids)                       # the last position's logits
        for piece in m.generate("And God said", max_tokens=32, seed=7):
            print(piece, end="", flush=True)
    print(sluice.plan("models/sluice-mini", budget="1G"))

The shared library is found, in order, at $SLUICE_LIB, beside this file's
install prefix (PREFIX/share/sluice/python -> PREFIX/lib...), then by the
system's loader (ctypes.util.find_library).
"""
import ctypes
import ctypes.util
import glob
import os

try:  # optional
    import numpy as _np
except ImportError:  # pragma: no cover - exercised where numpy is absent
    _np = None

__all__ = ["Model", "SluiceError", "plan", "version", "load_library"]

_c = ctypes
_u8, _i32, _u32, _u64, _f32, _f64 = _c.c_uint8, _c.c_int32, _c.c_uint32, _c.c_uint64, _c.c_float, _c.c_double
_PROGRESS = _c.CFUNCTYPE(None, _c.c_void_p, _c.c_char_p, _c.c_double)

STATUS = {0: "ok", 1: "invalid argument", 2: "I/O error", 3: "malformed container", 4: "unsupported configuration",
          5: "out of memory", 6: "invalid state", 7: "out of range", 8: "busy"}
E_RANGE = 7


class SluiceError(Exception):
    """A sluice_status other than SLUICE_OK, with sluice_last_error's detail."""

    def __init__(self, status, message):
        self.status = status
        super().__init__(f"{STATUS.get(status, status)}: {message}")


# The structs mirror include/sluice/sluice.h field for field.
class _Config(_c.Structure):
    _fields_ = [("struct_size", _u32), ("n_threads", _i32), ("backend", _i32), ("verify_records", _i32),
                ("prefill_chunk", _i32), ("max_context", _i32), ("budget_bytes", _u64), ("no_cache", _i32),
                ("io_threads", _i32), ("no_readahead", _i32), ("no_lookahead", _i32), ("no_direct_io", _i32),
                ("no_hotlist", _i32), ("hotlist", _c.c_char_p), ("cgroup_root", _c.c_char_p), ("io_depth", _i32),
                ("io_engine", _i32), ("cache_policy", _c.c_char_p), ("vision", _i32), ("cpus", _c.c_char_p),
                ("exclusive_open", _i32), ("lock_memory", _i32), ("metadata_only", _i32),
                ("progress", _PROGRESS), ("progress_user", _c.c_void_p), ("no_pressure_watch", _i32),
                ("pressure_poll_ms", _i32), ("pressure_reserve_bytes", _u64), ("memory_probe", _c.c_void_p),
                ("memory_probe_user", _c.c_void_p), ("checkpoint_bytes", _c.c_int64), ("checkpoint_interval", _i32),
                ("prefill_wave", _i32), ("session_bytes", _u64), ("replay_log", _i32)]


class _Info(_c.Structure):
    _fields_ = [("family", _c.c_char * 32), ("arch", _c.c_char * 96), ("n_layers", _i32), ("n_kda_layers", _i32),
                ("n_mla_layers", _i32), ("n_moe_layers", _i32), ("n_experts", _i32), ("top_k", _i32),
                ("n_shared_experts", _i32), ("hidden", _i32), ("vocab", _i32), ("attn_res_block", _i32),
                ("total_params", _u64), ("active_params", _u64), ("trunk_bytes", _u64), ("expert_bytes", _u64),
                ("trunk_formats", _c.c_char * 32), ("expert_format", _c.c_char * 8), ("expert_stages", _i32),
                ("expert_entries", _i32), ("expert_index_bits", _i32), ("backend", _c.c_char * 16),
                ("n_threads", _i32)]


class _Sampling(_c.Structure):
    _fields_ = [("struct_size", _u32), ("temperature", _f32), ("top_k", _i32), ("top_p", _f32), ("min_p", _f32),
                ("repeat_penalty", _f32), ("repeat_last_n", _i32), ("seed", _u64)]


class _Plan(_c.Structure):
    _fields_ = [(n, _u64) for n in ("trunk", "kda_state", "mla_kv", "scratch", "min_cache", "floor", "record_bytes",
                                    "working_set", "ram_limit", "budget", "cache")] + \
               [("context", _i32), ("ram_source", _c.c_char * 160), ("choice", _c.c_char * 320), ("vision", _u64)] + \
               [(n, _u64) for n in ("runtime", "allocator_slack", "thread_stacks", "page_tables")] + \
               [("threads", _i32)] + [(n, _u64) for n in ("available", "reserve", "max_useful", "checkpoints")] + \
               [("wave_tokens", _i32), ("wave", _u64), ("batch_tokens", _i32), ("batch", _u64), ("sessions", _u64),
                ("replay_log", _u64)]


class _Stats(_c.Structure):
    _fields_ = [(n, _u64) for n in ("tokens_evaluated", "expert_reads", "expert_bytes_read", "expert_cache_hits",
                                    "expert_cache_misses")] + \
               [("seconds_eval", _f64), ("seconds_io_wait", _f64), ("seconds_read", _f64)] + \
               [(n, _u64) for n in ("experts_prefetched", "experts_prefetch_used", "cache_bytes",
                                    "cache_bytes_used")] + \
               [("direct_io", _i32)] + \
               [(n, _u64) for n in ("pool_fallbacks", "expert_fetches", "expert_readahead_hits", "expert_sync_reads",
                                    "lookahead_guesses", "lookahead_guesses_used", "lookahead_guesses_dropped")] + \
               [("io_depth", _i32), ("io_engine", _c.c_char * 16), ("cache_policy", _c.c_char * 8),
                ("seconds_vision", _f64), ("images_encoded", _u64), ("pressure_watch", _i32)] + \
               [(n, _u64) for n in ("cache_capacity_bytes", "cache_shrinks", "cache_grows", "cache_bytes_released",
                                    "memory_available", "pressure_reserve", "checkpoints_held", "checkpoint_bytes",
                                    "checkpoint_capacity", "rewind_restores", "rewind_tokens_reevaluated")] + \
               [("prefill_wave_tokens", _i32), ("prefill_waves", _u64), ("prefill_tokens", _u64),
                ("prefill_moe_layers", _i32), ("prefill_reads_per_record_mean", _f64),
                ("prefill_reads_per_record_max", _f64), ("memory_warmed_bytes", _u64), ("seconds_memory_warm", _f64),
                ("records_into_cold_memory", _u64), ("rewind_tokens_replayed", _u64),
                ("replay_log_positions", _u64)]


class _ChatMessage(_c.Structure):
    _fields_ = [("role", _c.c_char_p), ("content", _c.c_char_p)]


_lib = None


def _candidates():
    env = os.environ.get("SLUICE_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    prefix = os.path.normpath(os.path.join(here, "..", "..", ".."))  # PREFIX/share/sluice/python
    for pattern in ("lib/libsluice.so.*", "lib64/libsluice.so.*", "lib/*/libsluice.so.*"):
        for p in sorted(glob.glob(os.path.join(prefix, pattern))):
            yield p
    found = ctypes.util.find_library("sluice")
    if found:
        yield found
    yield "libsluice.so.0"


def load_library():
    """Loads libsluice once and declares the functions this module calls."""
    global _lib
    if _lib is not None:
        return _lib
    errors = []
    for cand in _candidates():
        try:
            lib = ctypes.CDLL(cand)
            break
        except OSError as e:
            errors.append(f"{cand}: {e}")
    else:
        raise OSError("libsluice not found (set SLUICE_LIB to libsluice.so): " + "; ".join(errors))
    P, S = _c.POINTER, _c.c_int
    sig = {
        "sluice_open": (S, [_c.c_char_p, P(_Config), P(_c.c_void_p)]),
        "sluice_close": (None, [_c.c_void_p]),
        "sluice_last_error": (_c.c_char_p, [_c.c_void_p]),
        "sluice_info_get": (S, [_c.c_void_p, P(_Info)]),
        "sluice_n_vocab": (_i32, [_c.c_void_p]),
        "sluice_n_past": (_i32, [_c.c_void_p]),
        "sluice_eval": (S, [_c.c_void_p, P(_i32), _c.c_size_t, P(_f32)]),
        "sluice_reset": (S, [_c.c_void_p]),
        "sluice_rewind": (S, [_c.c_void_p, _i32]),
        "sluice_checkpoint": (S, [_c.c_void_p]),
        "sluice_checkpoint_at": (S, [_c.c_void_p, _i32]),
        "sluice_session_tokens": (S, [_c.c_void_p, P(_i32), _c.c_size_t, P(_c.c_size_t)]),
        "sluice_tokenize": (S, [_c.c_void_p, _c.c_char_p, _c.c_size_t, P(_i32), _c.c_size_t, P(_c.c_size_t)]),
        "sluice_tokenize_markup": (S, [_c.c_void_p, _c.c_char_p, _c.c_size_t, P(_i32), _c.c_size_t,
                                       P(_c.c_size_t)]),
        "sluice_detokenize": (S, [_c.c_void_p, P(_i32), _c.c_size_t, _c.c_char_p, _c.c_size_t, P(_c.c_size_t)]),
        "sluice_token_bos": (_i32, [_c.c_void_p]),
        "sluice_token_eos": (_i32, [_c.c_void_p]),
        "sluice_detok_new": (_c.c_void_p, [_c.c_void_p]),
        "sluice_detok_push": (S, [_c.c_void_p, _i32, _c.c_char_p, _c.c_size_t, P(_c.c_size_t)]),
        "sluice_detok_flush": (S, [_c.c_void_p, _c.c_char_p, _c.c_size_t, P(_c.c_size_t)]),
        "sluice_detok_max_chunk": (_c.c_size_t, [_c.c_void_p]),
        "sluice_detok_free": (None, [_c.c_void_p]),
        "sluice_chat_render": (S, [_c.c_void_p, P(_ChatMessage), _c.c_size_t, S, P(_i32), _c.c_size_t,
                                   P(_c.c_size_t)]),
        "sluice_chat_stop_token": (_i32, [_c.c_void_p]),
        "sluice_sampling_default": (None, [P(_Sampling)]),
        "sluice_sampler_new": (_c.c_void_p, [P(_Sampling)]),
        "sluice_sampler_sample": (_i32, [_c.c_void_p, P(_f32), _i32, P(_i32), _c.c_size_t]),
        "sluice_sampler_free": (None, [_c.c_void_p]),
        "sluice_state_save": (S, [_c.c_void_p, _c.c_char_p]),
        "sluice_state_load": (S, [_c.c_void_p, _c.c_char_p]),
        "sluice_stats_get": (S, [_c.c_void_p, P(_Stats)]),
        "sluice_plan_model": (S, [_c.c_char_p, _u64, _i32, _c.c_char_p, P(_Plan), _c.c_char_p, _c.c_size_t]),
        "sluice_route_dump": (S, [_c.c_void_p, _c.c_char_p]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    _lib = lib
    return lib


def version():
    """The library's version string is the header's; the module reports its own."""
    return "0.1.0"


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
          "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30, "T": 1 << 40, "TB": 1 << 40, "TIB": 1 << 40}


def _size(v):
    if isinstance(v, int):
        return v
    s = str(v).strip().upper()
    num = s.rstrip("KMGTIB")
    unit = s[len(num):]
    if unit not in _UNITS or not num:
        raise ValueError(f"{v!r} is not a size (examples: 2G, 512M)")
    return int(float(num) * _UNITS[unit])


def _struct_dict(st):
    out = {}
    for name, _ in st._fields_:
        v = getattr(st, name)
        out[name] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    return out


def plan(path, budget=0, ctx=0):
    """The memory plan of a container from its manifest alone (sluice_plan_model), as a dict of bytes."""
    lib = load_library()
    p = _Plan()
    err = _c.create_string_buffer(512)
    st = lib.sluice_plan_model(os.fsencode(path), _size(budget), int(ctx), None, _c.byref(p), err, len(err))
    if st != 0:
        raise SluiceError(st, err.value.decode("utf-8", "replace"))
    return _struct_dict(p)


class Model:
    """One context: an opened container and its decoding session. Not thread-safe."""

    def __init__(self, path, *, threads=0, budget=0, ctx=0, cpus=None, metadata_only=False, exclusive=False,
                 cache_policy=None):
        self._lib = load_library()
        cfg = _Config()
        cfg.struct_size = _c.sizeof(_Config)
        cfg.n_threads = int(threads)
        cfg.max_context = int(ctx)
        cfg.budget_bytes = _size(budget)
        self._keep = [os.fsencode(path)]  # char* fields must outlive the call
        if cpus:
            self._keep.append(str(cpus).encode())
            cfg.cpus = self._keep[-1]
        if cache_policy:
            self._keep.append(str(cache_policy).encode())
            cfg.cache_policy = self._keep[-1]
        cfg.metadata_only = 1 if metadata_only else 0
        cfg.exclusive_open = 1 if exclusive else 0
        h = _c.c_void_p()
        st = self._lib.sluice_open(self._keep[0], _c.byref(cfg), _c.byref(h))
        self._h = h
        if st != 0:
            msg = self._error()
            self.close()
            raise SluiceError(st, msg)
        self.path = path
        self.n_vocab = self._lib.sluice_n_vocab(self._h)

    # -- lifetime ---------------------------------------------------------
    def close(self):
        if getattr(self, "_h", None):
            self._lib.sluice_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _error(self):
        return self._lib.sluice_last_error(self._h).decode("utf-8", "replace")

    def _check(self, st):
        if st != 0:
            raise SluiceError(st, self._error())

    def _live(self):
        if not self._h:
            raise SluiceError(6, "the model is closed")
        return self._h

    # -- metadata -----------------------------------------------------------
    def info(self):
        """sluice_info as a dict (family, layers, experts, sizes, backend...)."""
        i = _Info()
        self._check(self._lib.sluice_info_get(self._live(), _c.byref(i)))
        return _struct_dict(i)

    @property
    def n_past(self):
        return self._lib.sluice_n_past(self._live())

    def stats(self):
        s = _Stats()
        self._check(self._lib.sluice_stats_get(self._live(), _c.byref(s)))
        return _struct_dict(s)

    # -- text ---------------------------------------------------------------
    def _grow(self, fill, guess, ctype):
        cap = max(int(guess), 16)
        while True:
            buf = (ctype * cap)()
            n = _c.c_size_t(0)
            st = fill(buf, cap, _c.byref(n))
            if st == E_RANGE and n.value > cap:
                cap = n.value
                continue
            self._check(st)
            return buf, n.value

    def tokenize(self, text, markup=False):
        """Token ids of text (markup=True: special-token strings become their ids)."""
        b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        f = self._lib.sluice_tokenize_markup if markup else self._lib.sluice_tokenize
        buf, n = self._grow(lambda o, cap, pn: f(self._live(), b, len(b), o, cap, pn), len(b) + 1, _i32)
        return list(buf[:n])

    def detokenize(self, ids):
        """The text of token ids (bytes that are not valid UTF-8 become U+FFFD)."""
        arr = (_i32 * len(ids))(*ids)
        buf, n = self._grow(lambda o, cap, pn: self._lib.sluice_detokenize(self._live(), arr, len(ids), o, cap, pn),
                            8 * len(ids) + 16, _c.c_char)
        return bytes(buf[:n]).decode("utf-8", "replace")

    @property
    def bos(self):
        return self._lib.sluice_token_bos(self._live())

    @property
    def eos(self):
        return self._lib.sluice_token_eos(self._live())

    # -- evaluation -----------------------------------------------------------
    def eval(self, ids):
        """Feeds ids at the current position; returns the last position's logits
        (a float32 numpy array of n_vocab when numpy is present, else a list)."""
        ids = list(ids)
        arr = (_i32 * len(ids))(*ids)
        if _np is not None:
            out = _np.empty(self.n_vocab, dtype=_np.float32)
            self._check(self._lib.sluice_eval(self._live(), arr, len(ids), out.ctypes.data_as(_c.POINTER(_f32))))
            return out
        out = (_f32 * self.n_vocab)()
        self._check(self._lib.sluice_eval(self._live(), arr, len(ids), out))
        return list(out)

    def reset(self):
        self._check(self._lib.sluice_reset(self._live()))

    def session_tokens(self):
        """The session's tokens, one per position (-1: one no prompt can match)."""
        buf, n = self._grow(lambda o, cap, pn: self._lib.sluice_session_tokens(self._live(), o, cap, pn),
                            max(self.n_past, 1), _i32)
        return list(buf[:n])

    def rewind(self, n):
        """Keeps the first n positions (prompt reuse; bit-identical to a fresh evaluation)."""
        self._check(self._lib.sluice_rewind(self._live(), int(n)))

    def checkpoint(self):
        """Keeps the recurrent state here, so a later rewind to here evaluates nothing again."""
        self._check(self._lib.sluice_checkpoint(self._live()))

    def checkpoint_at(self, pos):
        """Keeps the recurrent state at pos (>= n_past) as the coming evaluations pass it."""
        self._check(self._lib.sluice_checkpoint_at(self._live(), int(pos)))

    def save_state(self, path):
        self._check(self._lib.sluice_state_save(self._live(), os.fsencode(path)))

    def load_state(self, path):
        self._check(self._lib.sluice_state_load(self._live(), os.fsencode(path)))

    def dump_routes(self, path):
        """Routing of every later eval as JSONL ({"tok", "layers"}); None stops."""
        self._check(self._lib.sluice_route_dump(self._live(), None if path is None else os.fsencode(path)))

    def generate(self, prompt, max_tokens=64, *, temperature=0.8, top_p=0.95, top_k=0, seed=0, chat=False,
                 bos=True, ignore_eos=False):
        """Yields the text of each sampled token as it completes (an iterator of str).

        chat=False continues prompt as plain text (BOS first when bos); chat=True
        renders it as a user message with the container's chat format and stops at
        the end of the assistant turn. The session continues from where it was.
        """
        lib, h = self._lib, self._live()
        stops = set()
        if chat:
            msg = (_ChatMessage * 1)(_ChatMessage(b"user", prompt.encode("utf-8")))
            buf, n = self._grow(lambda o, cap, pn: lib.sluice_chat_render(h, msg, 1, 1, o, cap, pn),
                                len(prompt) + 64, _i32)
            ids = list(buf[:n])
            t = lib.sluice_chat_stop_token(h)
            if t >= 0:
                stops.add(t)
        else:
            ids = self.tokenize(prompt)
            if bos and self.bos >= 0:
                ids = [self.bos] + ids
        if not ignore_eos and self.eos >= 0:
            stops.add(self.eos)
        sp = _Sampling()
        lib.sluice_sampling_default(_c.byref(sp))
        sp.temperature, sp.top_p, sp.top_k, sp.seed = float(temperature), float(top_p), int(top_k), int(seed)
        sampler = lib.sluice_sampler_new(_c.byref(sp))
        if not sampler:
            raise SluiceError(1, "the sampling options are invalid")
        detok = lib.sluice_detok_new(h)
        if not detok:
            lib.sluice_sampler_free(sampler)
            raise SluiceError(4, self._error())
        try:
            chunk = _c.create_string_buffer(lib.sluice_detok_max_chunk(detok) + 1)
            n_out = _c.c_size_t(0)
            logits = (_f32 * self.n_vocab)()
            history = list(ids)
            feed = ids
            for _ in range(int(max_tokens)):
                arr = (_i32 * len(feed))(*feed)
                self._check(lib.sluice_eval(h, arr, len(feed), logits))
                hist = (_i32 * len(history))(*history)
                tok = lib.sluice_sampler_sample(sampler, logits, self.n_vocab, hist, len(history))
                if tok < 0:
                    raise SluiceError(1, "the sampler refused the logits")
                if tok in stops:
                    break
                st = lib.sluice_detok_push(detok, tok, chunk, len(chunk), _c.byref(n_out))
                if st == E_RANGE:  # a control token: no text
                    n_out.value = 0
                else:
                    self._check(st)
                if n_out.value:
                    yield chunk.raw[:n_out.value].decode("utf-8", "replace")
                history.append(tok)
                feed = [tok]
            self._check(lib.sluice_detok_flush(detok, chunk, len(chunk), _c.byref(n_out)))
            if n_out.value:
                yield chunk.raw[:n_out.value].decode("utf-8", "replace")
        finally:
            lib.sluice_detok_free(detok)
            lib.sluice_sampler_free(sampler)
