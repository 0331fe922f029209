"""The `xlaprof` command of a pip install (run, view, report, gui, bench, ...): the wheels that
scripts/build_wheels.sh builds carry the command's binary in the package (``xlaprof/_bin``), and
this entry point runs it in place of the Python process, with the plugin that the package
finds (`_plugin`) named for it."""

from __future__ import annotations

import os
import sys
from typing import Optional

BINARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "xlaprof")


def binary() -> Optional[str]:
    """The command's binary in this install, or None (a development build has none)."""
    return BINARY if os.access(BINARY, os.X_OK) else None


def main() -> None:
    path = binary()
    if path is None:
        sys.exit("xlaprof: this install of the package has no `xlaprof` command (a development build "
                 "leaves it out). Install a release wheel (scripts/build_wheels.sh builds them), or run "
                 "`cargo run --release -p xlaprof -- ARGS` in a checkout.")
    from ._plugin import ensure_plugin

    ensure_plugin()
    os.execv(path, [path, *sys.argv[1:]])
