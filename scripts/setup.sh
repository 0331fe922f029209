#!/usr/bin/env bash
# Installs what xlaprof needs on a fresh machine, and does nothing when it is already there:
# - the official XLA CPU PJRT plugin (PyPI `xla-cpu-pjrt`) into the project's .venv;
# - libclang, which bindgen uses to generate the PJRT bindings from the plugin's header;
# - tmux, for the terminal UI's end-to-end test;
# - for `xlaprof gui` and its end-to-end test: Xvfb, xwd, Mesa's OpenGL (scripts/setup_gui.sh).
# Source it (`. scripts/setup.sh`) or run it; it exits non-zero with a message when a step fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
plugin_wheel="xla-cpu-pjrt==0.0.1"

. "$root/scripts/lib.sh"

# --- Rust -----------------------------------------------------------------------------------
if ! command -v cargo >/dev/null; then
  say "cargo not found: install a Rust toolchain (https://rustup.rs) and run this again"
  exit 1
fi

# --- Python venv with the plugin ------------------------------------------------------------
venv="$root/.venv"
if ! ls "$venv"/lib/python3*/site-packages/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so >/dev/null 2>&1; then
  if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    say "installing python3-venv"
    apt_install python3-venv
  fi
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  say "installing the XLA CPU plugin ($plugin_wheel) into .venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$plugin_wheel"
fi

# --- libclang for bindgen -------------------------------------------------------------------
have_libclang() {
  # Both the library (not libclang-cpp, which is another one) and clang's own headers.
  local lib="" hdr="" f
  for f in /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* \
           /usr/lib/x86_64-linux-gnu/libclang.so* /usr/lib/x86_64-linux-gnu/libclang-[0-9]*.so* \
           /usr/lib64/libclang.so*; do
    [ -e "$f" ] && lib=1
  done
  for f in /usr/lib/llvm-*/lib/clang/*/include/stddef.h /usr/lib/clang/*/include/stddef.h; do
    [ -e "$f" ] && hdr=1
  done
  [ -n "$lib" ] && [ -n "$hdr" ]
}
missing=()
if ! have_libclang; then
  say "installing libclang-dev (bindgen reads pjrt_c_api.h with it)"
  missing+=(libclang-dev)
fi
# --- tmux, the real terminal the terminal UI's end-to-end test runs in -------------------------
if ! command -v tmux >/dev/null; then
  say "installing tmux (the terminal UI's end-to-end test)"
  missing+=(tmux)
fi
[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
bash "$root/scripts/setup_gui.sh"
say "ready: plugin in .venv, libclang, tmux and the GUI's X11 pieces present"
