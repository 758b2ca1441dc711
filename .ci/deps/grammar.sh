# What tests/grammar needs. Sourced by scripts/install-deps.sh; idempotent.
#  - nodejs + npm (server.sh installs them when missing; this repeats the
#    check so the concern stands alone);
#  - ajv, the JSON Schema validator the grammar_ajv test checks every
#    constrained output with, pinned in tests/grammar/node/package-lock.json.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
fi
_gr_node="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/tests/grammar/node"
if command -v npm >/dev/null 2>&1 &&
   ! [ "$_gr_node/node_modules/.package-lock.json" -nt "$_gr_node/package-lock.json" ]; then
  (cd "$_gr_node" && npm ci --no-audit --no-fund --loglevel=error)
fi
unset _gr_node
