#!/usr/bin/env bash
# Sets up the Python side on top of scripts/setup.sh, and does nothing when it is already there:
# - the tools the Python tests use (maturin, pytest and pytest-xdist, Jupyter's nbclient,
#   nbconvert and ipykernel, polars, Pillow) into the project's .venv;
# - torch, transformers, accelerate and expecttest (the torch bridge's tests, its real models and
#   the Hugging Face Trainer, PyTorch's OpInfo database);
# - Chromium (Debian package), which renders the exported notebook in the tests;
# - the `xlaprof` package itself: a wheel built by maturin and installed into .venv, rebuilt
#   only when its sources (or the engine's) changed.
# `--packages` stops before the last step: what it installs needs no build, so the test command
# installs it while cargo builds (scripts/test.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

say_as=setup-python
. "$root/scripts/lib.sh"

bash scripts/setup.sh
py="$root/.venv/bin/python"
# Every install takes the versions the suite last passed with (scripts/python-constraints.txt
# says why and how to move them); XLAPROF_LATEST_PACKAGES=1 takes the newest releases instead.
pin=(-c "$root/scripts/python-constraints.txt")
[ "${XLAPROF_LATEST_PACKAGES:-0}" = 1 ] && pin=()

# --- Python tools ---------------------------------------------------------------------------
if ! "$py" -c 'import pytest, xdist, nbclient, nbconvert, nbformat, ipykernel, IPython, numpy, polars, PIL' \
     >/dev/null 2>&1 || [ ! -x "$root/.venv/bin/maturin" ]; then
  say "installing maturin, pytest, pytest-xdist, nbclient, nbconvert, ipykernel, numpy, polars, pillow into .venv"
  "$py" -m pip install -q --disable-pip-version-check "${pin[@]}" "maturin>=1.5,<2" pytest pytest-xdist nbclient nbconvert \
    nbformat ipykernel ipython numpy polars pillow
fi
# The interactive notebook view (anywidget), and what its test drives: a real JupyterLab, in
# the system Chromium through Playwright (whose own browser download is not needed).
if ! "$py" -c 'import anywidget, jupyterlab, playwright' >/dev/null 2>&1; then
  say "installing anywidget, jupyterlab and playwright into .venv (the notebook view and its browser test)"
  "$py" -m pip install -q --disable-pip-version-check "${pin[@]}" "anywidget>=0.9" jupyterlab playwright
fi

# --- torch, for the torch bridge (xlaprof.torch) and PyTorch's OpInfo sweep -----------------
# torch from PyPI is a CUDA build: about 2.8 GB of wheels (pip's cache keeps them for next time).
# accelerate: the Hugging Face Trainer runs on it; lightning (1.8 MB with torchmetrics): its
# Trainer on the device.
if ! "$py" -c 'import torch, expecttest, transformers, accelerate, lightning' >/dev/null 2>&1; then
  say "installing torch, transformers, accelerate, lightning and expecttest into .venv (the torch bridge's tests; ~2.8 GB of wheels)"
  "$py" -m pip install -q --disable-pip-version-check "${pin[@]}" "torch>=2.10" transformers accelerate lightning expecttest
fi

# --- Chromium -------------------------------------------------------------------------------
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  say "installing chromium (the notebook test renders the exported HTML with it)"
  apt_install chromium
fi

[ "${1:-}" = "--packages" ] && exit 0

# --- the xlaprof package --------------------------------------------------------------------
stamp="$root/.venv/.xlaprof-wheel-sources"
sources_hash() {
  find notebook_ext/src notebook_ext/python core/src core/build.rs profiler/src -type f \
       \( -name '*.rs' -o -name '*.py' -o -name '*.pyi' -o -name '*.css' -o -name 'py.typed' \) \
       -print0 2>/dev/null | sort -z | xargs -0 sha256sum
  sha256sum Cargo.lock Cargo.toml notebook_ext/Cargo.toml notebook_ext/build.rs notebook_ext/pyproject.toml core/Cargo.toml \
    profiler/Cargo.toml
}
current="$(sources_hash | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$current" ] || \
   ! (cd /tmp && "$py" -c 'import xlaprof') >/dev/null 2>&1; then
  say "building the xlaprof wheel (maturin, release) and installing it into .venv"
  wheels="$root/target/wheels"
  rm -f "$wheels"/xlaprof-*.whl
  (cd notebook_ext && "$root/.venv/bin/maturin" build --release --quiet --interpreter "$py" --out "$wheels")
  "$py" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheels"/xlaprof-*.whl
  "$py" -m pip install -q --disable-pip-version-check "${pin[@]}" "$wheels"/xlaprof-*.whl  # its dependencies
  echo "$current" > "$stamp"
fi
say "ready: xlaprof installed in .venv"
