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

# A cold run fills about 13 GB (measured from a fresh clone: the build tree 4.4 GB, of which 1.1
# GB is the release profile's incremental state; the venv 6.7 GB, 3 GB of it the CUDA libraries
# torch from PyPI brings; pip's downloads while they install). Says what is free, and where the
# disk is short keeps neither the incremental state nor pip's cache of the wheels, which only
# make a later run faster.
spare_the_disk() {
  local free_gb
  free_gb="$(df -Pk . | awk 'NR == 2 { print int($4 / 1048576) }')"
  if [ "$free_gb" -lt 20 ]; then
    say "${free_gb} GB free on this disk, a cold run needs about 13: building without incremental state, pip without a cache"
    export CARGO_INCREMENTAL=0 PIP_NO_CACHE_DIR=1
  else
    say "${free_gb} GB free on this disk (a cold run needs about 13)"
  fi
}
