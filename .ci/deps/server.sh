# What tests/server needs. Sourced by .ci/run (through
# scripts/install-deps.sh); idempotent: installs only what is missing.
#  - libcpp-httplib-dev (the HTTP library; scripts/install-deps.sh lists it
#    too), libssl-dev, zlib1g-dev, libbrotli-dev: the headers its pkg-config
#    flags pull in;
#  - nodejs + npm (.ci/lib/node.sh): the openai client tests and the load
#    test, with `openai` pinned in tests/server/node/package-lock.json.
_srv_pkgs="libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev pkg-config nlohmann-json3-dev libgtest-dev"
_srv_missing=""
for _p in $_srv_pkgs; do
  dpkg -s "$_p" >/dev/null 2>&1 || _srv_missing="$_srv_missing $_p"
done
if [ -n "$_srv_missing" ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $_srv_missing
fi
_srv_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$_srv_root/.ci/lib/node.sh"
sluice_node_ensure
sluice_npm_ci "$_srv_root/tests/server/node"
unset _srv_pkgs _srv_missing _srv_root _p
