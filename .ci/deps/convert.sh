# Packages src/convert and tests/convert need. Sourced by .ci/run;
# idempotent: installs only what is missing. The converter carries its own
# SHA-256 and CRC-32, so it needs no crypto library.
_conv_pkgs="nlohmann-json3-dev libgtest-dev"
_conv_missing=""
for _p in $_conv_pkgs; do
  dpkg -s "$_p" >/dev/null 2>&1 || _conv_missing="$_conv_missing $_p"
done
if [ -n "$_conv_missing" ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $_conv_missing
fi
unset _conv_pkgs _conv_missing _p
