# Fuzzing (issue 16): Debian's clang with libFuzzer and the sanitizer
# runtimes, for scripts/fuzz.sh (the CTest `fuzz_smoke`). Idempotent: apt is
# asked only when a package is missing (its lists may be stale, so update first).
if ! dpkg -s clang >/dev/null 2>&1 || ! dpkg -s libclang-rt-14-dev >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev >/dev/null
fi
