#!/usr/bin/env bash
# What `xlaprof gui` and its end-to-end test need on a fresh Debian machine, installed only when
# missing: a virtual X server (Xvfb) and xwd to screenshot it, Mesa's software OpenGL, and the
# X11 client libraries winit loads at run time.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# grep reads the whole list: `grep -q` would stop at the first match, and ldconfig, still
# writing, would die of SIGPIPE, which `pipefail` reports as a missing library.
have_lib() { ldconfig -p 2>/dev/null | grep -F "$1" >/dev/null; }

missing=()
command -v Xvfb >/dev/null || missing+=(xvfb)
command -v xwd >/dev/null || missing+=(x11-apps)
have_lib 'libGL.so.1' || missing+=(libgl1)
compgen -G '/usr/lib/*/dri/swrast_dri.so' >/dev/null || missing+=(libgl1-mesa-dri)
have_lib 'libEGL.so.1' || missing+=(libegl1)
have_lib 'libxkbcommon-x11.so.0' || missing+=(libxkbcommon-x11-0)
have_lib 'libXcursor.so.1' || missing+=(libxcursor1)
have_lib 'libXrandr.so.2' || missing+=(libxrandr2)
have_lib 'libXi.so.6' || missing+=(libxi6)

if [ ${#missing[@]} -gt 0 ]; then
  say "installing for the GUI: ${missing[*]}"
  apt_install "${missing[@]}"
fi
