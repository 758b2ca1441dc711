# Packages src/tokenizer and tests/tokenizer need. Sourced by .ci/run;
# idempotent: installs only what is missing.
#  - libutf8proc-dev: Unicode general categories (the library);
#  - nlohmann-json3-dev: specials.json, chat.json; libgtest-dev: unit tests;
#  - unicode-data: Scripts.txt / PropList.txt, to re-verify the Han table and \s;
#  - python3-regex: reference for the pre-tokenizer split check;
#  - nodejs + npm: the differential test against js-tiktoken and @dqbd/tiktoken
#    (pinned in tests/tokenizer/node/package-lock.json, installed with npm ci).
_tok_pkgs="libutf8proc-dev nlohmann-json3-dev libgtest-dev unicode-data python3 python3-regex"
# A machine may already have Node from elsewhere (whose nodejs package bundles
# npm and conflicts with Debian's npm); only install Debian's when none works.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  _tok_pkgs="$_tok_pkgs nodejs npm"
fi
_tok_missing=""
for _p in $_tok_pkgs; do
  dpkg -s "$_p" >/dev/null 2>&1 || _tok_missing="$_tok_missing $_p"
done
if [ -n "$_tok_missing" ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $_tok_missing
fi
_tok_node="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/tests/tokenizer/node"
if command -v npm >/dev/null 2>&1 &&
   ! [ "$_tok_node/node_modules/.package-lock.json" -nt "$_tok_node/package-lock.json" ]; then
  (cd "$_tok_node" && npm ci --no-audit --no-fund --loglevel=error)
fi
unset _tok_pkgs _tok_missing _tok_node _p
