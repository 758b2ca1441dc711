# Packages the KLD suite (src/kld, cli/kld, tests/kld) needs. Sourced by .ci/run;
# idempotent: installs only what is missing.
_kld_pkgs="libssl-dev nlohmann-json3-dev libgtest-dev python3-numpy"
_kld_missing=""
for _p in $_kld_pkgs; do
  dpkg -s "$_p" >/dev/null 2>&1 || _kld_missing="$_kld_missing $_p"
done
if [ -n "$_kld_missing" ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $_kld_missing
fi
unset _kld_pkgs _kld_missing _p
