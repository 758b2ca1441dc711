#!/usr/bin/python3
"""Train sluice-mini: a small Kimi-Linear model on the King James Bible.

Usage:
  train.py OUT_DIR [--steps N] [--seed S] [--batch B] [--ctx T] [--lr LR]
                   [--minutes M] [--export-only]

Writes into OUT_DIR:
  data.pt                tokenized train / held-out / chat streams (cached)
  state.pt               model + optimizer + step, every --ckpt-every steps
                         (a rerun resumes from it)
  log.jsonl, loss.png    the loss curve (train, held-out)
  hf/                    the Hugging Face-style checkpoint `sluice convert`
                         reads: config.json, model.safetensors (bf16),
                         tiktoken.model, tokenizer_config.json,
                         chat_template.jinja
  train.json             what PROVENANCE records: corpus package + version,
                         seed, steps, losses, git commit

Deterministic for a seed: one thread, seeded generators for the init and
the batches.  --minutes stops early (the checkpoint then says how many steps
it had).  Run with Debian's python3 (python3-torch); set
LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-serial if
libopenblas0-serial is installed (12x faster matmuls than the reference BLAS,
same results up to rounding).
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
import corpus  # noqa: E402
import hfexport  # noqa: E402
from kimi_linear import KimiLinear  # noqa: E402

N_RANKS = 4096


def model_config(vocab):
    """Kimi-Linear's config keys (MODEL.md 1.2) at a small width: layers 1-3
    KDA, layer 4 MLA (NoPE), layer 1 dense, 16 routed experts top-2 + 1 shared."""
    return dict(model_type="kimi_linear", architectures=["KimiLinearForCausalLM"],
                hidden_size=128, vocab_size=vocab, num_hidden_layers=4, rms_norm_eps=1e-5,
                num_attention_heads=4, first_k_dense_replace=1, intermediate_size=384,
                moe_intermediate_size=192, num_experts=16, num_experts_per_token=2,
                num_shared_experts=1, moe_renormalize=True, routed_scaling_factor=2.446,
                kv_lora_rank=64, q_lora_rank=None, qk_nope_head_dim=32, qk_rope_head_dim=16,
                v_head_dim=32, mla_use_nope=True, bos_token_id=N_RANKS, eos_token_id=N_RANKS + 1,
                tie_word_embeddings=False,
                linear_attn_config={"head_dim": 32, "num_heads": 4, "short_conv_kernel_size": 4,
                                    "kda_layers": [1, 2, 3], "full_attn_layers": [4]})


# ------------------------------------------------------------------ data
def chat_stream(enc, chapters, sp):
    """Exchanges in the chat.json layout: the user says a sentence, the
    assistant answers with the one that follows it."""
    U, A, M, E = sp["<|im_user|>"], sp["<|im_assistant|>"], sp["<|im_middle|>"], sp["<|im_end|>"]
    user, asst = enc.encode("user"), enc.encode("assistant")
    out = []
    for ch in chapters:
        s = corpus.verses_of(ch)
        for i in range(0, len(s) - 1, 2):
            out += [U] + user + [M] + enc.encode(s[i]) + [E] + [A] + asst + [M] + enc.encode(s[i + 1]) + [E]
    return out


def prepare(out):
    path = os.path.join(out, "data.pt")
    if os.path.exists(path):
        return torch.load(path)
    t0 = time.time()
    train_ch, held_ch = corpus.split()
    train_text = corpus.join(train_ch)
    vocab = bpe.train(train_text, N_RANKS)
    hf = os.path.join(out, "hf")
    os.makedirs(hf, exist_ok=True)
    bpe.write_tokenizer_files(hf, vocab, bpe.CHAT_TEMPLATE)
    enc = bpe.Encoder(vocab)
    sp = bpe.specials_ids(len(vocab))
    with open(os.path.join(out, "heldout.txt"), "w") as f:
        f.write(corpus.join(held_ch))
    data = {"train": torch.tensor(enc.encode(train_text), dtype=torch.int32),
            "heldout": torch.tensor(enc.encode(corpus.join(held_ch)), dtype=torch.int32),
            "chat": torch.tensor(chat_stream(enc, train_ch, sp), dtype=torch.int32),
            "vocab": len(vocab) + len(bpe.SPECIALS), "bos": sp["[BOS]"],
            "corpus": {"package": corpus.PACKAGE, "version": corpus.package_version(corpus.PACKAGE),
                       "data_package": "bible-kjv-text",
                       "data_version": corpus.package_version("bible-kjv-text"),
                       "range": corpus.RANGE, "chapters_train": len(train_ch),
                       "chapters_heldout": len(held_ch),
                       "heldout_rule": "chapter index %% %d == %d" % (corpus.HELDOUT_EVERY, corpus.HELDOUT_AT)}}
    torch.save(data, path + ".tmp")
    os.replace(path + ".tmp", path)
    print("data: %d train, %d held-out, %d chat tokens (%.0f s)" % (
        len(data["train"]), len(data["heldout"]), len(data["chat"]), time.time() - t0), file=sys.stderr)
    return data


def batch(data, gen, B, T, chat_frac):
    rows = []
    for _ in range(B):
        src = data["chat"] if torch.rand((), generator=gen) < chat_frac else data["train"]
        i = int(torch.randint(0, len(src) - T - 1, (), generator=gen))
        w = src[i:i + T + 1].long().clone()
        w[0] = data["bos"]                    # every window starts at BOS, as perplexity scores it
        rows.append(w)
    x = torch.stack(rows)
    return x[:, :-1], x[:, 1:]


def heldout_windows(data, T, n):
    """n fixed, evenly spaced windows of the held-out stream (BOS first)."""
    h = data["heldout"]
    step = (len(h) - T - 1) // n
    x = torch.stack([h[i * step:i * step + T + 1].long().clone() for i in range(n)])
    x[:, 0] = data["bos"]
    return x[:, :-1], x[:, 1:]


@torch.no_grad()
def heldout_loss(model, data, T, n=16):
    x, y = heldout_windows(data, T, n)
    lo = model(x)[:, T // 2:]               # the second half, as perplexity scores it
    return F.cross_entropy(lo.reshape(-1, lo.shape[-1]), y[:, T // 2:].reshape(-1)).item()


# ------------------------------------------------------------------ helpers
def git_commit():
    try:
        return subprocess.run(["git", "-C", HERE, "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def bar(step, total, loss, sps, held):
    n = 30
    f = int(n * step / max(total, 1))
    eta = (total - step) * sps
    msg = "\r[%s%s] %d/%d loss %.3f%s %.2f s/step eta %dm%02ds" % (
        "#" * f, "." * (n - f), step, total, loss, "" if held is None else " held-out %.3f" % held,
        sps, eta // 60, eta % 60)
    sys.stderr.write(msg)
    sys.stderr.flush()


def plot(out, log):
    tr = [(r["step"], r["loss"]) for r in log if "loss" in r]
    ho = [(r["step"], r["heldout"]) for r in log if "heldout" in r]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    if tr:
        xs, ys = zip(*tr)
        k = 20
        ema, e = [], ys[0]
        for v in ys:
            e = e + (v - e) * (2.0 / (k + 1))
            ema.append(e)
        ax.plot(xs, ys, color="#bbb", lw=0.6, label="train (per step)")
        ax.plot(xs, ema, color="#1f77b4", lw=1.5, label="train (EMA 20)")
    if ho:
        xs, ys = zip(*ho)
        ax.plot(xs, ys, "o-", color="#d62728", ms=3, label="held-out (2nd half of windows)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title("sluice-mini training loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss.png.tmp.png"))
    os.replace(os.path.join(out, "loss.png.tmp.png"), os.path.join(out, "loss.png"))
    plt.close(fig)


def save_state(out, model, opt, step, log):
    p = os.path.join(out, "state.pt")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "log": log,
                "rng": None}, p + ".tmp")
    os.replace(p + ".tmp", p)


# ------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--chat-frac", type=float, default=0.2)
    ap.add_argument("--router-bias-rate", type=float, default=1e-3)
    ap.add_argument("--ckpt-every", type=int, default=25)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--minutes", type=float, default=0, help="stop (and export) after this much wall time")
    ap.add_argument("--export-only", action="store_true", help="export hf/ from state.pt and stop")
    a = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    data = prepare(a.out)
    cfg = model_config(data["vocab"])
    torch.manual_seed(a.seed)
    model = KimiLinear(cfg)
    model.init_weights(torch.Generator().manual_seed(a.seed))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "conv1d" not in n]
    other = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "conv1d" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95))
    step, log = 0, []
    sp = os.path.join(a.out, "state.pt")
    if os.path.exists(sp):
        st = torch.load(sp)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, log = st["step"], st["log"]
        print("resumed at step %d" % step, file=sys.stderr)
    gen = torch.Generator().manual_seed(a.seed * 1000003 + 7)
    for _ in range(step):                     # replay the batch stream up to `step`
        batch(data, gen, a.batch, a.ctx, a.chat_frac)
    nparams = sum(p.numel() for p in model.parameters())
    print("model: %d parameters; %d steps of %d x %d tokens" % (nparams, a.steps, a.batch, a.ctx),
          file=sys.stderr)
    t_start, held, sps = time.time(), None, 0.0
    warm = max(1, a.steps // 20)
    while step < a.steps and not a.export_only:
        if a.minutes and time.time() - t_start > a.minutes * 60:
            print("\n--minutes reached at step %d" % step, file=sys.stderr)
            break
        t0 = time.time()
        lr = a.lr * (step + 1) / warm if step < warm else \
            a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, a.steps - warm))))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batch(data, gen, a.batch, a.ctx, a.chat_frac)
        loss = F.cross_entropy(model(x).reshape(-1, cfg["vocab_size"]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        model.update_router_bias(a.router_bias_rate)
        step += 1
        rec = {"step": step, "loss": loss.item(), "lr": lr}
        if step % a.eval_every == 0 or step == a.steps:
            held = heldout_loss(model, data, a.ctx)
            rec["heldout"] = held
        log.append(rec)
        sps = 0.9 * sps + 0.1 * (time.time() - t0) if sps else time.time() - t0
        bar(step, a.steps, loss.item(), sps, held)
        if step % a.ckpt_every == 0 or step == a.steps:
            save_state(a.out, model, opt, step, log)
            plot(a.out, log)
    sys.stderr.write("\n")
    save_state(a.out, model, opt, step, log)
    plot(a.out, log)
    hf = os.path.join(a.out, "hf")
    hfexport.export(model, hf, cfg)
    # Losses of the exported (bf16) weights, as the converter will see them.
    ref = hfexport.load_bf16(KimiLinear(cfg), hf)
    ref.eval()
    tr_tail = [r["loss"] for r in log[-20:]]
    info = {"corpus": data["corpus"], "tokenizer": {"ranks": N_RANKS, "specials": len(bpe.SPECIALS),
                                                     "vocab": cfg["vocab_size"], "pattern": "kimi"},
            "seed": a.seed, "steps": step, "steps_planned": a.steps, "batch": a.batch, "ctx": a.ctx,
            "lr": a.lr, "chat_frac": a.chat_frac, "parameters": nparams,
            "train_loss_last20_mean": sum(tr_tail) / max(1, len(tr_tail)),
            "heldout_loss_bf16_16x%d" % a.ctx: heldout_loss(ref, data, a.ctx),
            "tokens_heldout": len(data["heldout"]), "tokens_train": len(data["train"]),
            "script_commit": git_commit(), "torch": torch.__version__,
            "wall_s": round(time.time() - t_start, 1)}
    with open(os.path.join(a.out, "train.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
