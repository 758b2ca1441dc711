# What tests/grammar needs. Sourced by scripts/install-deps.sh; idempotent.
#  - nodejs + npm (.ci/lib/node.sh, shared with server.sh and tokenizer.sh);
#  - ajv, the JSON Schema validator the grammar_ajv test checks every
#    constrained output with, pinned in tests/grammar/node/package-lock.json.
_gr_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$_gr_root/.ci/lib/node.sh"
sluice_node_ensure
sluice_npm_ci "$_gr_root/tests/grammar/node"
unset _gr_root
