# Packages src/tokenizer and tests/tokenizer need. Sourced by .ci/run;
# idempotent: installs only what is missing.
#  - libutf8proc-dev: Unicode general categories (the library);
#  - nlohmann-json3-dev: specials.json, chat.json; libgtest-dev: unit tests;
#  - unicode-data: Scripts.txt / PropList.txt, to re-verify the Han table and \s;
#  - python3-regex: reference for the pre-tokenizer split check;
#  - nodejs + npm (.ci/lib/node.sh): the differential test against js-tiktoken
#    and @dqbd/tiktoken (pinned in tests/tokenizer/node/package-lock.json).
_tok_pkgs="libutf8proc-dev nlohmann-json3-dev libgtest-dev unicode-data python3 python3-regex"
_tok_missing=""
for _p in $_tok_pkgs; do
  dpkg -s "$_p" >/dev/null 2>&1 || _tok_missing="$_tok_missing $_p"
done
if [ -n "$_tok_missing" ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $_tok_missing
fi
_tok_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$_tok_root/.ci/lib/node.sh"
sluice_node_ensure
sluice_npm_ci "$_tok_root/tests/tokenizer/node"
unset _tok_pkgs _tok_missing _tok_root _p
