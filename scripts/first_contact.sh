#!/usr/bin/env bash
# Time from `git clone` to the demo's first token, as a new user meets it
# (issue 27): a fresh clone of this repository's HEAD in a temporary folder
# with no ../shared beside it, no compiler cache, then `bash scripts/demo.sh`
# exactly as README.md writes it. Prints the clone, apt, build and model
# phases and the first token's time from the clone's start.
#
#   bash scripts/first_contact.sh          packages as they are (installed: apt is not asked)
#   bash scripts/first_contact.sh --apt    first `apt-get clean`, then reinstall the build's
#                                          packages, downloaded again, and time that too
#                                          (their own dependencies stay: a bare machine
#                                          fetches those as well, so this is a lower bound)
#
# Needs the build's packages installed beforehand unless --apt.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
with_apt=0
[ "${1:-}" = --apt ] && with_apt=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CCACHE_DISABLE=1
unset CMAKE_CXX_COMPILER_LAUNCHER CMAKE_C_COMPILER_LAUNCHER
apt_s=0
if [ "$with_apt" = 1 ]; then
  pkgs=$(sed -n '/^build_pkgs=(/,/)/p' "$root/scripts/install-deps.sh" | tr -d '()' | sed 's/build_pkgs=//')
  a0=$(date +%s.%N)
  apt-get clean
  apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall --no-install-recommends $pkgs >/dev/null
  apt_s=$(awk -v a="$a0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  echo "first_contact: apt (clean cache, update, reinstall of the build's packages): ${apt_s} s"
fi
echo "first_contact: cloning $(git -C "$root" rev-parse --short HEAD) into a folder with no ../shared"
/usr/bin/python3 - "$root" "$work" "$apt_s" <<'PY'
import os, subprocess, sys, time
root, work, apt_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
t0 = time.monotonic()
subprocess.run(["git", "clone", "-q", root, os.path.join(work, "sluice")], check=True)
t_clone = time.monotonic() - t0
assert not os.path.exists(os.path.join(work, "shared"))
p = subprocess.Popen(["bash", "scripts/demo.sh"], cwd=os.path.join(work, "sluice"),
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
buf, marks, first_token = b"", {}, None
line = b""
while True:
    c = p.stdout.read1(4096)
    if not c:
        break
    now = time.monotonic() - t0
    sys.stdout.buffer.write(c)
    sys.stdout.flush()
    buf += c
    if b"demo: building" in buf and "build" not in marks:
        marks["build"] = now
    if b"sluice: budget" in buf and "model" not in marks:
        marks["model"] = now
    # The model's text begins on the line after "model ready".
    k = buf.find(b"sluice: model ready")
    if first_token is None and k >= 0:
        nl = buf.find(b"\n", k)
        if nl >= 0 and len(buf) > nl + 1:
            first_token = now
rc = p.wait()
if rc != 0 or first_token is None:
    sys.exit(f"first_contact: the demo failed (exit {rc}) or printed no text")
print(f"\nfirst_contact: clone {t_clone:.1f} s; apt and build until the model starts {marks['model'] - t_clone:.1f} s;"
      f" first token {first_token:.1f} s after the clone began (without apt)")
if apt_s > 0:
    print(f"first_contact: with apt: {apt_s + first_token:.1f} s")
print(f"first_contact: {os.cpu_count()} CPUs, load average {open('/proc/loadavg').read().split()[0]} now")
PY
