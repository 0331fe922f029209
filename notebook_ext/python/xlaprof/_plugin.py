"""Finds the XLA CPU PJRT plugin that the `xla-cpu-pjrt` dependency installed, so the engine
loads it whatever the current directory or virtual environment (XLAPROF_PJRT_PLUGIN wins)."""

from __future__ import annotations

import os
import sys

_RELATIVE = os.path.join("xla_plugins", "xla_cpu_pjrt", "xla_cpu_pjrt.so")


def find_plugin() -> str | None:
    for entry in sys.path:
        candidate = os.path.join(entry or os.getcwd(), _RELATIVE)
        if os.path.isfile(candidate):
            return candidate
    return None


def ensure_plugin() -> None:
    if os.environ.get("XLAPROF_PJRT_PLUGIN"):
        return
    found = find_plugin()
    if found is not None:
        os.environ["XLAPROF_PJRT_PLUGIN"] = found
