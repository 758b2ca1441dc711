# Fuzzing (issue 16): Debian's clang with libFuzzer and the sanitizer
# runtimes, for scripts/fuzz.sh (the CTest `fuzz_smoke`).
$SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev >/dev/null
