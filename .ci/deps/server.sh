# What tests/server needs. Sourced by .ci/run (through
# scripts/install-deps.sh); idempotent: installs only what is missing.
#  - libcpp-httplib-dev (the HTTP library; scripts/install-deps.sh lists it
#    too), libssl-dev, zlib1g-dev, libbrotli-dev: the headers its pkg-config
#    flags pull in;
#  - nodejs + npm: the openai client tests and the load test, with `openai`
#    pinned in tests/server/node/package-lock.json and installed with npm ci.
_srv_pkgs="libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev pkg-config nlohmann-json3-dev libgtest-dev"
# A machine may already have Node from elsewhere (whose nodejs package bundles
# npm and conflicts with Debian's npm); only install Debian's when none works.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  _srv_pkgs="$_srv_pkgs nodejs npm"
fi
_srv_missing=""
for _p in $_srv_pkgs; do
  dpkg -s "$_p" >/dev/null 2>&1 || _srv_missing="$_srv_missing $_p"
done
if [ -n "$_srv_missing" ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $_srv_missing
fi
_srv_node="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/tests/server/node"
if command -v npm >/dev/null 2>&1 &&
   ! [ "$_srv_node/node_modules/.package-lock.json" -nt "$_srv_node/package-lock.json" ]; then
  (cd "$_srv_node" && npm ci --no-audit --no-fund --loglevel=error)
fi
unset _srv_pkgs _srv_missing _srv_node _p
