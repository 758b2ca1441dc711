"""Byte-level BPE in the tiktoken style of ../shared/spec/TOKENIZER.md:
training from a text, the rank file (FORMAT.md 7.1: one `base64 rank` line
per token, rank = id), and the encoder (tiktoken's algorithm: pre-tokenize
with the Kimi pattern, then merge the adjacent pair of lowest rank).

Ranks 0-255 are the single bytes, so every input is encodable; ranks from
256 on are merges in the order training found them (most frequent pair
first, ties to the lowest ranks), so the encoder's lowest-rank-first rule
retraces training.  The special tokens follow the ordinary ranks.
"""

import base64
import heapq
import json

import regex

# TOKENIZER.md 3, Kimi, alternatives in order.  V1 for the && intersections.
KIMI_PATTERN = "|".join([
    r"[\p{Han}]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])
_PAT = regex.compile(KIMI_PATTERN, flags=regex.V1)

# The named Kimi control tokens (TOKENIZER.md 5) and a few reserved ones.
SPECIALS = ["[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>",
            "<|im_middle|>", "[EOT]", "<|start_header_id|>", "<|end_header_id|>"] + \
           ["<|reserved_token_%d|>" % i for i in range(6)]


def pieces(text):
    return [m.encode("utf-8") for m in _PAT.findall(text)]


def train(text, n_ranks, progress=None):
    """Token byte strings, index = rank, len == n_ranks (or fewer if the text
    runs out of pairs)."""
    counts = {}
    for p in pieces(text):
        counts[p] = counts.get(p, 0) + 1
    vocab = [bytes([b]) for b in range(256)]
    rank_of = {v: i for i, v in enumerate(vocab)}
    words = [list(w) for w in counts]          # symbols = ranks
    freq = list(counts.values())
    pair_n, where = {}, {}

    def add(w, k, sign):
        sym = words[w]
        for a, b in zip(sym, sym[1:]):
            pair_n[(a, b)] = pair_n.get((a, b), 0) + sign * freq[w]
            if sign > 0:
                where.setdefault((a, b), set()).add(w)
        if k is not None:
            pass

    for w in range(len(words)):
        add(w, None, +1)
    heap = [(-n, a, b) for (a, b), n in pair_n.items()]
    heapq.heapify(heap)
    while len(vocab) < n_ranks and heap:
        n, a, b = heapq.heappop(heap)
        if pair_n.get((a, b), 0) != -n or n == 0:
            continue                               # stale entry
        new = vocab[a] + vocab[b]
        if new in rank_of:
            r = rank_of[new]                       # same bytes reached another way
        else:
            r = len(vocab)
            vocab.append(new)
            rank_of[new] = r
        touched = set()
        for w in list(where.get((a, b), ())):
            sym = words[w]
            if len(sym) < 2:
                continue
            add(w, None, -1)
            out, i = [], 0
            while i < len(sym):
                if i + 1 < len(sym) and sym[i] == a and sym[i + 1] == b:
                    out.append(r)
                    i += 2
                else:
                    out.append(sym[i])
                    i += 1
            words[w] = out
            add(w, None, +1)
            for p in zip(out, out[1:]):
                touched.add(p)
        pair_n[(a, b)] = 0
        for p in touched:
            if pair_n.get(p, 0) > 0:
                heapq.heappush(heap, (-pair_n[p], p[0], p[1]))
        if progress:
            progress(len(vocab), n_ranks)
    return vocab


def write_rank_file(path, vocab):
    with open(path, "w") as f:
        for r, tok in enumerate(vocab):
            f.write("%s %d\n" % (base64.b64encode(tok).decode(), r))


def read_rank_file(path):
    vocab = []
    with open(path) as f:
        for line in f:
            t, r = line.split()
            assert int(r) == len(vocab)
            vocab.append(base64.b64decode(t))
    return vocab


class Encoder:
    """Content-mode encoding (no specials are recognised in the text)."""

    def __init__(self, vocab):
        self.vocab = vocab
        self.rank = {v: i for i, v in enumerate(vocab)}
        self.cache = {}

    def piece(self, p):
        ids = self.cache.get(p)
        if ids is not None:
            return ids
        if p in self.rank:
            ids = [self.rank[p]]
        else:
            parts = [p[i:i + 1] for i in range(len(p))]
            while len(parts) > 1:
                best, at = None, -1
                for i in range(len(parts) - 1):
                    r = self.rank.get(parts[i] + parts[i + 1])
                    if r is not None and (best is None or r < best):
                        best, at = r, i
                if best is None:
                    break
                parts[at:at + 2] = [parts[at] + parts[at + 1]]
            ids = [self.rank[x] for x in parts]
        self.cache[p] = ids
        return ids

    def encode(self, text):
        out = []
        for p in pieces(text):
            out.extend(self.piece(p))
        return out

    def decode(self, ids):
        return b"".join(self.vocab[i] for i in ids if i < len(self.vocab)).decode("utf-8", "replace")


def specials_ids(n_ranks):
    return {s: n_ranks + i for i, s in enumerate(SPECIALS)}


def write_tokenizer_files(out_dir, vocab, chat_template):
    """tiktoken.model, tokenizer_config.json (added_tokens_decoder: the
    specials, as the converter reads them) and chat_template.jinja."""
    import os
    write_rank_file(os.path.join(out_dir, "tiktoken.model"), vocab)
    sp = specials_ids(len(vocab))
    cfg = {"tokenizer_class": "TikTokenTokenizer", "bos_token": "[BOS]", "eos_token": "[EOS]",
           "pad_token": "[EOS]", "model_max_length": 1 << 20,
           "added_tokens_decoder": {str(i): {"content": s, "special": True} for s, i in sp.items()},
           "chat_template": chat_template}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    with open(os.path.join(out_dir, "chat_template.jinja"), "w") as f:
        f.write(chat_template)


# The Kimi layout of chat.json (the converter installs it for kimi-linear).
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "<|im_{{ message['role'] }}|>{{ message['role'] }}<|im_middle|>{{ message['content'] }}<|im_end|>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}")
