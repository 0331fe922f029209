#!/usr/bin/env bash
# Builds the wheels a pip user installs: one per CPython version (3.10 to 3.13 by default), each
# the whole product: the engine and profiler (the native module), the torch bridge, the notebook
# magic, and the `xlaprof` command (run, view, report, gui, bench) as a console entry point.
# Release builds without their debug information (symbol names kept, so backtraces name
# functions). Prints each wheel's size and its size installed.
#
#   bash scripts/build_wheels.sh [--out DIR] [3.10 3.11 ...]      (default: target/wheels-release)
#
# One wheel per version, not one abi3 wheel: the source locations of recorded ops read Python's
# frames through PyFrame_GetBack and PyFrame_GetLasti (3.11), PyInterpreterState_ThreadHead and
# PyThreadState_Next, which are outside the stable ABI (docs/environment.md has the details).
# Each version's interpreter is found in pyenv or as pythonX.Y on PATH.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say_as=build-wheels
. "$root/scripts/lib.sh"

out="$root/target/wheels-release"
versions=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    3.*) versions+=("$1"); shift ;;
    *) say "unknown argument: $1"; exit 2 ;;
  esac
done
[ ${#versions[@]} -gt 0 ] || versions=(3.10 3.11 3.12 3.13)

bash scripts/setup.sh
maturin="$root/.venv/bin/maturin"
[ -x "$maturin" ] || "$root/.venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.5,<2"

interpreter() { # the interpreter of version $1 that runs, or nothing (pyenv's shims may not run)
  local pyenv_root c
  pyenv_root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
  for c in $(ls -d "$pyenv_root"/versions/"$1".*/bin/"python$1" 2>/dev/null | sort -V -r) \
           "$(command -v "python$1" || true)"; do
    if [ -n "$c" ] && "$c" -c 'import sys' >/dev/null 2>&1; then echo "$c"; return; fi
  done
}

# The command: its release binary, without debug information, into the package's _bin folder
# (ignored by git), from where each wheel takes it.
say "building the xlaprof command (release)"
cargo rustc --release --quiet -p xlaprof --bin xlaprof -- -C strip=debuginfo
bin_dir="$root/notebook_ext/python/xlaprof/_bin"
mkdir -p "$bin_dir"
trap 'rm -rf "$bin_dir"' EXIT  # a development build made later must not carry a stale command
cp target/release/xlaprof "$bin_dir/xlaprof"

mkdir -p "$out"
out="$(cd "$out" && pwd)"  # maturin runs in notebook_ext: a relative --out would land there
built=()
for v in "${versions[@]}"; do
  py="$(interpreter "$v")"
  if [ -z "$py" ]; then say "no CPython $v here (python$v on PATH, or pyenv): skipped"; continue; fi
  say "building the wheel for CPython $v ($py)"
  rm -f "$out"/xlaprof-*-cp"${v/./}"-*.whl
  (cd notebook_ext && "$maturin" build --release --quiet --interpreter "$py" --out "$out" -- -C strip=debuginfo)
  built+=("$(ls "$out"/xlaprof-*-cp"${v/./}"-*.whl)")
done
[ ${#built[@]} -gt 0 ] || { say "no wheel was built"; exit 1; }

# Each wheel's size, and its size installed (the sum of its files).
python3 - "${built[@]}" <<'PY'
import os, sys, zipfile
print(f"{'wheel':<60} {'size':>9} {'installed':>10}")
for w in sys.argv[1:]:
    installed = sum(i.file_size for i in zipfile.ZipFile(w).infolist())
    print(f"{os.path.basename(w):<60} {os.path.getsize(w) / 1e6:>8.1f}M {installed / 1e6:>9.1f}M")
PY
