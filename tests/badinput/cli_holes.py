#!/usr/bin/env python3
"""CLI holes found trying sluice as a new user would (issue 16), each a
regression check on the real binary:
  garbage --budget, --ids 1, , ids >= vocab, --seed -1, --request-timeout
  nan: exit 2 with a message; logits --learn writes the file; serve refuses
  a taken port; chat: Ctrl-C stops a reply and keeps the session, Ctrl-C at
  the prompt exits 0, /quit exits 0 after a failed /load.
usage: cli_holes.py SLUICE FIXTURES WORKDIR     exit 77 = SKIP
"""
import os, shutil, signal, socket, subprocess, sys, time

sluice, fixtures, work = sys.argv[1:4]
model = os.path.join(fixtures, "warp", "kimi-linear-tok.waste")
if not os.path.isdir(model):
    print(f"SKIP: no fixture {model}")
    sys.exit(77)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
fails = []


def expect(name, cmd, rc, needle=None, stdin=None, timeout=120):
    r = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
    err = r.stderr.decode(errors="replace")
    ok = r.returncode == rc and (needle is None or needle in err)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {r.returncode} (want {rc}): {err.strip().splitlines()[-1] if err.strip() else ''}")
    if not ok:
        fails.append(name)
    return r


expect("info --budget garbage", [sluice, "info", model, "--budget", "lots"], 2, "--budget")
expect("logits --budget garbage", [sluice, "logits", model, "--ids", "1,2", "--budget", "12XB"], 2, "--budget")
expect("logits --ids trailing comma", [sluice, "logits", model, "--ids", "1,"], 2, "--ids")
expect("logits id >= vocab", [sluice, "logits", model, "--ids", "1,99999999"], 2, "vocabulary")
expect("generate id >= vocab", [sluice, "generate", model, "--ids", "99999999", "-n", "1"], 2, "vocabulary")
expect("run --seed -1", [sluice, "run", model, "hi", "--seed", "-1", "-n", "1"], 2, "--seed")
expect("serve --request-timeout nan", [sluice, "serve", model, "--request-timeout", "nan"], 2, "request-timeout")
expect("run --temp nan", [sluice, "run", model, "hi", "--temp", "nan", "-n", "1"], 2, "--temp")
learn = os.path.join(work, "usage.bin")
expect("logits --learn", [sluice, "logits", model, "--ids", "1,2,3", "--learn", learn], 0)
if not os.path.exists(learn) or os.path.getsize(learn) < 16:
    fails.append("logits --learn wrote nothing")
    print("FAIL logits --learn wrote nothing")
expect("logits --learn to a directory", [sluice, "logits", model, "--ids", "1,2", "--learn", work], 1, "--learn")

# serve: a second server on a taken port is refused.
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
srv = subprocess.Popen([sluice, "serve", model, "--host", "127.0.0.1", "--port", str(port)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
try:
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    expect("serve on a taken port", [sluice, "serve", model, "--host", "127.0.0.1", "--port", str(port)], 1,
           str(port), timeout=60)
finally:
    srv.send_signal(signal.SIGTERM)
    try:
        srv.wait(10)
    except subprocess.TimeoutExpired:
        srv.kill()

# chat: /quit exits 0 after a failed /load.
expect("chat /quit after a failed /load", [sluice, "chat", model, "-n", "2"], 0, None,
       stdin=b"/load /nonexistent/x\n/quit\n")


# chat: Ctrl-C during a reply stops it and the chat goes on; Ctrl-C at the prompt exits 0.
def chat_sigint():
    p = subprocess.Popen([sluice, "chat", model, "-n", "100000", "--ctx", "32768", "--seed", "1", "--temp", "1"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(b"Tell me everything.\n")
    p.stdin.flush()
    p.stdout.read(1)  # the reply has started
    p.send_signal(signal.SIGINT)  # mid-reply
    time.sleep(0.5)
    alive_after_first = p.poll() is None
    p.stdin.write(b"/stats\n")
    p.stdin.flush()
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)  # at the prompt
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    err = err.decode(errors="replace")
    ok = alive_after_first and p.returncode == 0 and "reply stopped" in err and "conversation:" in err
    print(f"{'ok  ' if ok else 'FAIL'} chat Ctrl-C: alive after the first {alive_after_first}, exit {p.returncode}, "
          f"stderr tail {err.strip()[-160:]!r}")
    if not ok:
        fails.append("chat Ctrl-C")


chat_sigint()


# verify --source with a checkpoint whose expert has another shape: refused by
# name, never a heap overflow (was "double free or corruption", exit 134).
def wrong_source():
    import json, struct
    hf = os.path.join(fixtures, "hf", "tiny-kimi-linear")
    cont = os.path.join(fixtures, "warp", "converted-default.waste")
    if not os.path.isdir(hf) or not os.path.isdir(cont):
        print("skip verify --source: fixtures missing")
        return
    dst = os.path.join(work, "wrong-src")
    shutil.copytree(hf, dst)
    cut = "model.layers.1.block_sparse_moe.experts.0.w1.weight_"
    for name in os.listdir(dst):
        if not name.endswith(".safetensors"):
            continue
        path = os.path.join(dst, name)
        raw = open(path, "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        head = json.loads(raw[8:8 + n])
        data = raw[8 + n:]
        out, blobs, off = {}, [], 0
        for k, v in head.items():
            if k == "__metadata__":
                out[k] = v
                continue
            b = data[v["data_offsets"][0]:v["data_offsets"][1]]
            if k.startswith(cut):  # half the rows: a checkpoint of another shape
                rows = v["shape"][0]
                b = b[:len(b) // rows * (rows // 2)]
                v = dict(v, shape=[rows // 2] + v["shape"][1:])
            out[k] = dict(v, data_offsets=[off, off + len(b)])
            blobs.append(b)
            off += len(b)
        h = json.dumps(out).encode()
        open(path, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    # A failure, not bad usage: exit 1 (issue 17: 2 is for usage only).
    expect("verify --source of another shape", [sluice, "verify", cont, "--source", dst], 1, "does not match")


wrong_source()
print(f"{len(fails)} failures")
sys.exit(1 if fails else 0)
