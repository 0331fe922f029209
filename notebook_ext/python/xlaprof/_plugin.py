"""Finds the PJRT plugin of the device asked for, so the engine loads it whatever the current
directory or virtual environment: the XLA CPU plugin that the `xla-cpu-pjrt` dependency installed,
or with XLAPROF_DEVICE=cuda a CUDA plugin (`pip install xlaprof[cuda12]` or `[cuda13]` installs
the official one; JAX's `jax-cuda12-pjrt`/`jax-cuda13-pjrt` are found too). XLAPROF_PJRT_PLUGIN
wins. When nothing is found here, the engine's own lookup runs and its error says what it looked
for, where, and how to install it. The places match core/src/runtime/locate.rs."""

from __future__ import annotations

import os
import sys

_CPU = (os.path.join("xla_plugins", "xla_cpu_pjrt", "xla_cpu_pjrt.so"),)

# In the order core/src/runtime/locate.rs looks for them: the official packages, then JAX's.
_CUDA = (
    os.path.join("xla_plugins", "xla_cuda13_pjrt", "xla_gpu_pjrt.so"),
    os.path.join("xla_plugins", "xla_cuda12_pjrt", "xla_gpu_pjrt.so"),
    os.path.join("jax_plugins", "xla_cuda13", "xla_cuda_plugin.so"),
    os.path.join("jax_plugins", "xla_cuda12", "xla_cuda_plugin.so"),
)

_BY_DEVICE = {"cpu": _CPU, "cuda": _CUDA}


def _device() -> str:
    return (os.environ.get("XLAPROF_DEVICE") or "cpu").strip().lower() or "cpu"


def find_plugin(device: str | None = None, path: list[str] | None = None) -> str | None:
    """The plugin library of `device` (default: XLAPROF_DEVICE, else the CPU) on `path` (default:
    sys.path); None when there is none or the device is unknown (the engine then says why)."""
    candidates = _BY_DEVICE.get(device or _device())
    if candidates is None:
        return None
    for entry in sys.path if path is None else path:
        for relative in candidates:
            candidate = os.path.join(entry or os.getcwd(), relative)
            if os.path.isfile(candidate):
                return candidate
    return None


# The plugin this module chose (not the user): chosen again when the device asked for changes
# before the engine starts (PyTorch/XLA's PJRT_DEVICE, read by `xlaprof.torch_xla`).
chosen: str | None = None


def ensure_plugin() -> None:
    global chosen
    if os.environ.get("XLAPROF_PJRT_PLUGIN") and os.environ["XLAPROF_PJRT_PLUGIN"] != chosen:
        return
    found = find_plugin()
    if found is not None:
        os.environ["XLAPROF_PJRT_PLUGIN"] = chosen = found
    elif chosen is not None:
        del os.environ["XLAPROF_PJRT_PLUGIN"]
        chosen = None
