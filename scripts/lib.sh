# Helpers the setup scripts share; sourced, not run. `say_as` names the script in messages.
say_as="${say_as:-setup}"

say() { printf '[%s] %s\n' "$say_as" "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    say "need root to run: $*"; return 1; fi
}

# Installs Debian packages. The package lists are refreshed once for all the setup scripts one
# command runs (they run one another), not once per package.
apt_install() {
  if [ -z "${XLAPROF_APT_UPDATED:-}" ]; then
    as_root apt-get update -qq
    export XLAPROF_APT_UPDATED=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
