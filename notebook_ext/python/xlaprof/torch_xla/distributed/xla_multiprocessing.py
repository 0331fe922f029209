"""``torch_xla.distributed.xla_multiprocessing`` (``xmp``): one process per device, where the
plugin can run collectives across processes.

The XLA CPU plugin cannot (its only collectives are within a process), and the engine's
distributed client (PJRT's key-value store, the CUDA plugin's collectives across processes) is
not built yet: ``spawn`` runs the function once, in this process, as replica 0 of a world of one,
and says so. Several devices in one process are SPMD's: ``xr.use_spmd()`` and a mesh.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Tuple

import torch

from .. import _alias

__getattr__ = _alias.not_provided(__name__)

_said = [False]


def spawn(fn: Callable[..., Any], args: Tuple[Any, ...] = (), nprocs: Optional[int] = None,
          join: bool = True, daemon: bool = False, start_method: str = "spawn") -> None:
    """Runs ``fn(0, *args)`` in this process (see the module's docstring)."""
    if nprocs != 1 and not _said[0]:
        _said[0] = True
        print("xlaprof: torch_xla's multiprocessing runs one process here (the CPU plugin cannot "
              "run collectives across processes): the function runs once, as replica 0 of 1; "
              "SPMD (xr.use_spmd() and a mesh) uses several devices from one process",
              file=sys.stderr)
    fn(0, *args)


class MpModelWrapper:
    """The model, moved to each replica's device on ``to`` (one replica here)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self._model = model

    def to(self, device: Any) -> torch.nn.Module:
        return self._model.to(device)


class MpSerialExecutor:
    """Runs functions one replica at a time (one replica here)."""

    def run(self, fn: Callable[[], Any]) -> Any:
        return fn()
