# Node.js + npm for the test clients (tests/server, tests/tokenizer,
# tests/grammar). Sourced by the .ci/deps/*.sh that need it; it lives outside
# .ci/deps so scripts/install-deps.sh does not source it on its own, and it
# only defines functions, so sourcing it again is harmless.

# Installs Debian's nodejs and npm unless a working pair is already on PATH.
# A machine may have Node from elsewhere (whose nodejs package bundles npm and
# conflicts with Debian's npm): installing over it would break apt.
sluice_node_ensure() {
  if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then return 0; fi
  ${SUDO:-} apt-get update -qq && DEBIAN_FRONTEND=noninteractive ${SUDO:-} apt-get install -y -qq nodejs npm
}

# Installs a test client's pinned packages (DIR/package-lock.json) with npm ci,
# unless node_modules is already newer than the lock file; a no-op without npm.
sluice_npm_ci() {
  command -v npm >/dev/null 2>&1 || return 0
  [ "$1/node_modules/.package-lock.json" -nt "$1/package-lock.json" ] && return 0
  (cd "$1" && npm ci --no-audit --no-fund --loglevel=error)
}
