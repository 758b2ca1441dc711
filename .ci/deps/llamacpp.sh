# llama.cpp as the second outside judge (issue 29, tests/llamacpp): the
# prebuilt libllama from npm (@node-llama-cpp/linux-x64, pinned in
# tests/llamacpp/node/package-lock.json) and node-llama-cpp, whose git bundle
# is the llama.cpp source that library was built from (the test driver
# compiles against its headers). Sourced by scripts/install-deps.sh;
# idempotent. --omit=optional leaves out the CUDA and Vulkan builds (about
# 600 MB); --ignore-scripts: node-llama-cpp's postinstall would try to fetch
# or build, and nothing here needs it.
_ll_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$_ll_root/.ci/lib/node.sh"
sluice_node_ensure
if command -v npm >/dev/null 2>&1 &&
   ! [ "$_ll_root/tests/llamacpp/node/node_modules/.package-lock.json" -nt "$_ll_root/tests/llamacpp/node/package-lock.json" ]; then
  (cd "$_ll_root/tests/llamacpp/node" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
unset _ll_root
