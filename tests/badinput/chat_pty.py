#!/usr/bin/env python3
"""`sluice chat` at a terminal (issue 16): line editing and history from
libedit, with chat's own Ctrl-C behaviour kept. Runs the real binary under a
pseudo-terminal, as a user's shell would, and types at it:
  - an emacs edit (Ctrl-A, then a character inserted at the start) makes a
    command that runs;
  - UTF-8 typed at the terminal arrives intact;
  - up-arrow recalls an earlier line, which runs again;
  - Ctrl-C (the key, through the terminal's line discipline) during a reply
    stops the reply and the session goes on;
  - a /load of a cut state file is refused and the conversation goes on;
  - Ctrl-C at the prompt, where libedit holds the terminal, ends the chat
    with exit 0;
  - the history is written to $XDG_STATE_HOME/sluice/chat_history.
usage: chat_pty.py SLUICE FIXTURES WORKDIR     exit 77 = SKIP
"""
import os, pty, select, shutil, sys, time

sluice, fixtures, work = sys.argv[1:4]
model = os.path.join(fixtures, "warp", "kimi-linear-tok.waste")
if not os.path.isdir(model):
    print(f"SKIP: no fixture {model}")
    sys.exit(77)
shutil.rmtree(work, ignore_errors=True)
state = os.path.join(work, "state")
os.makedirs(os.path.join(work, "home"))
env = dict(os.environ, TERM="xterm", HOME=os.path.join(work, "home"), XDG_STATE_HOME=state, LANG="C.UTF-8")
env.pop("EDITRC", None)

pid, fd = pty.fork()
if pid == 0:
    os.execve(sluice, [sluice, "chat", model, "-n", "100000", "--ctx", "32768", "--seed", "1", "--temp", "1"], env)

out = b""
fails = []


def pump(timeout):
    global out
    r, _, _ = select.select([fd], [], [], timeout)
    if r:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not data:
            return False
        out += data
    return True


def expect(name, needle, start, timeout=60):
    """Waits until needle appears in the output after byte start; returns its end."""
    end = time.time() + timeout
    while time.time() < end:
        i = out.find(needle, start)
        if i >= 0:
            print(f"ok   {name}")
            return i + len(needle)
        if not pump(0.2):
            break
    i = out.find(needle, start)
    if i >= 0:
        return i + len(needle)
    fails.append(name)
    print(f"FAIL {name}: {needle!r} not seen; output tail {out[-300:]!r}")
    return len(out)


def type_(s):
    os.write(fd, s)


pos = expect("first prompt", b"> ", 0)
# Line editing: "stats", Ctrl-A (start of line), "/" -> "/stats".
type_(b"stats\x01/\r")
pos = expect("edited line ran as /stats", b"conversation: 0 tokens", pos)
pos = expect("prompt after /stats", b"> ", pos)
# UTF-8 input reaches chat intact (libedit drops non-ASCII in the C locale).
type_("/load /nonexistent/é\r".encode())
pos = expect("UTF-8 input kept", "/nonexistent/é.json".encode(), pos)
pos = expect("prompt after /load", b"> ", pos)
# History: up-arrow recalls "/stats"; Enter runs it again.
type_(b"\x1b[A\x1b[A\r")  # two lines back: past /load to /stats
pos = expect("up-arrow recalled /stats", b"conversation: 0 tokens", pos)
pos = expect("prompt after the recall", b"> ", pos)
# A long reply, stopped with Ctrl-C once it has started.
type_(b"Tell me everything.\r")
pos = expect("echo of the message", b"everything.", pos)
# The reply starts after the line's own end ("\r\n" from libedit): wait
# for 20 bytes past it, so the Ctrl-C lands while tokens are coming out.
end = time.time() + 60
while time.time() < end:
    nl = out.find(b"\n", pos)
    if nl >= 0 and len(out) >= nl + 1 + 20:
        break
    pump(0.2)
at_ctrl_c = len(out)
type_(b"\x03")
pos = expect("Ctrl-C stops the reply", b"(reply stopped)", pos)
if "Ctrl-C stops the reply" in fails:  # what the terminal showed when the key went in
    print(f"     output around the Ctrl-C: {out[max(0, at_ctrl_c - 120):at_ctrl_c + 60]!r}")
pos = expect("prompt after the stopped reply", b"> ", pos)
time.sleep(0.3)
alive = os.waitpid(pid, os.WNOHANG) == (0, 0)
if not alive:
    fails.append("chat ended at the first Ctrl-C")
type_(b"/stats\r")
pos = expect("the session goes on", b"2 messages", pos)
pos = expect("prompt after /stats", b"> ", pos)
# A refused state file keeps the conversation (the session is unchanged).
saved = os.path.join(work, "s1")
type_(f"/save {saved}\r".encode())
pos = expect("/save", b"saved ", pos)
pos = expect("prompt after /save", b"> ", pos)
with open(saved, "r+b") as f:
    f.truncate(os.path.getsize(saved) - 4)
type_(f"/load {saved}\r".encode())
pos = expect("a cut state file is refused by name", b"truncated: layer", pos)
pos = expect("... and the conversation goes on", b"goes on", pos)
type_(b"/stats\r")
pos = expect("conversation kept after the refused /load", b"2 messages", pos)
pos = expect("prompt before the last Ctrl-C", b"> ", pos)
time.sleep(0.3)
# Ctrl-C at the prompt, while libedit holds the terminal: exit 0.
type_(b"\x03")
end = time.time() + 30
status = None
while time.time() < end:
    pump(0.1)
    p, st = os.waitpid(pid, os.WNOHANG)
    if p == pid:
        status = st
        break
if status is None:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    fails.append("Ctrl-C at the prompt did not end the chat")
    print(f"FAIL Ctrl-C at the prompt: still running; output tail {out[-300:]!r}")
else:
    code = os.waitstatus_to_exitcode(status)
    print(f"{'ok  ' if code == 0 else 'FAIL'} Ctrl-C at the prompt: exit {code}")
    if code != 0:
        fails.append(f"exit {code} after Ctrl-C at the prompt")
hist = os.path.join(state, "sluice", "chat_history")
saved = open(hist, "rb").read() if os.path.exists(hist) else b""
if b"/stats" not in saved or b"everything." not in saved:
    fails.append("history file")
    print(f"FAIL history file {hist}: {saved[:200]!r}")
else:
    print(f"ok   history saved to $XDG_STATE_HOME/sluice/chat_history ({len(saved)} bytes)")
print(f"{len(fails)} failures" + (f": {fails}" if fails else ""))
sys.exit(1 if fails else 0)
