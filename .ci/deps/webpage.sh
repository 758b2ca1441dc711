# What the chat page test (tests/server/run_webpage.sh) needs: Debian's
# chromium, driven headless by playwright-core (pinned in
# tests/server/node/package-lock.json, installed by server.sh's npm ci).
# Sourced by scripts/install-deps.sh; idempotent.
if ! dpkg -s chromium >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
fi
