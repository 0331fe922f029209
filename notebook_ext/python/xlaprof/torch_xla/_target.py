"""Where a PyTorch/XLA program runs: the xlaprof device (the engine), or the reference run, the
same program on CPU eager with its steps only counted (``python -m xlaprof.torch_xla
--reference``), whose losses the device's are compared with step by step.

Every name of the layer that touches a device asks ``current()``; the two targets answer the
same questions. Also here: the step closures (``xm.add_step_closure``), which run after each
step's sync on either target.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, List, Tuple

import torch

import xlaprof as xp
import xlaprof.torch as xt

REFERENCE_VARIABLE = "XLAPROF_TORCH_XLA_REFERENCE"


class Device:
    """The xlaprof device: ops recorded lazily, a step a sync of the engine."""

    reference = False
    autocast_device_type = "xlaprof"

    def device(self) -> torch.device:
        return xt.device()

    def step(self) -> None:
        xt.step()

    def sync(self) -> None:
        xt.sync()

    def wait(self) -> None:
        xt.wait()

    def forbid_sync(self) -> Any:
        return xt.forbid_sync()

    def is_lazy(self, t: Any) -> bool:
        return xt.is_lazy(t)

    def mark_sharding(self, t: torch.Tensor, mesh: Any, spec: Tuple[Any, ...]) -> torch.Tensor:
        return xt.mark_sharding(t, mesh.engine_mesh(), spec)

    def is_split(self, t: torch.Tensor) -> bool:
        return xt.is_lazy(t) and xt.value(t).sharding is not None

    def loader(self, loader: Any, device: Any, prefetch: int) -> Any:
        return xt.DeviceLoader(loader, device, prefetch=prefetch, mark_step=False)

    def scope(self, name: str) -> Any:
        return xp.profile_scope(name)


class Reference:
    """CPU eager: the device is the CPU, every step only counted."""

    reference = True
    autocast_device_type = "cpu"

    def __init__(self) -> None:
        self.steps = 0

    def device(self) -> torch.device:
        return torch.device("cpu")

    def step(self) -> None:
        self.steps += 1

    def sync(self) -> None:
        pass

    def wait(self) -> None:
        pass

    def forbid_sync(self) -> Any:
        return contextlib.nullcontext()

    def is_lazy(self, t: Any) -> bool:
        return isinstance(t, torch.Tensor)

    def mark_sharding(self, t: torch.Tensor, mesh: Any, spec: Tuple[Any, ...]) -> torch.Tensor:
        return t  # (the spec was checked against the tensor and the mesh)

    def is_split(self, t: torch.Tensor) -> bool:
        return False

    def loader(self, loader: Any, device: Any, prefetch: int) -> Any:
        return loader

    def scope(self, name: str) -> Any:
        return contextlib.nullcontext()


_current: Any = Reference() if os.environ.get(REFERENCE_VARIABLE, "") not in ("", "0") else Device()


def current() -> Any:
    return _current


def use_reference() -> None:
    """The reference run: set before the program imports ``torch_xla`` (the runner's
    ``--reference``); the variable carries it into the program's own subprocesses."""
    global _current
    os.environ[REFERENCE_VARIABLE] = "1"
    _current = Reference()


def device(index: Any = None) -> torch.device:
    """The device (``torch_xla.device()``); with SPMD, the one device over the mesh."""
    if index not in (None, 0):
        raise IndexError(f"torch_xla.device({index}): this process has one device, xla:0 "
                         "(with several, SPMD puts them under it: xr.use_spmd() and a mesh)")
    return _current.device()


def manual_seed(seed: int) -> None:
    """Seeds the device's random numbers (on the reference run, the CPU's: torch's)."""
    if _current.reference:
        torch.manual_seed(seed)
    else:
        xp.manual_seed(int(seed))


# ---- step closures ----------------------------------------------------------------------------

_closures: List[Callable[[], Any]] = []


def add_closure(closure: Callable[..., Any], args: Tuple[Any, ...]) -> None:
    _closures.append(lambda: closure(*args))


_steps_ended = [0]


def step() -> None:
    """Ends a step: the sync (on the device), then the closures queued during it, in order. The
    values they read were live at the sync, so they are computed already: no sync of their own."""
    _current.step()
    _steps_ended[0] += 1
    run_closures()


def sync(wait: bool = False) -> None:
    """``torch_xla.sync()``, ``xm.mark_step()``: the step ended; with ``wait``, run to its end."""
    step()
    if wait:
        _current.wait()


def steps_ended() -> int:
    return _steps_ended[0]


def loader_step(steps_ended_at_batch: int) -> None:
    """The step a device loader ends when the loop asks for its next batch. The loop may have
    ended it already since the batch came (its own ``mark_step``, a compiled step function):
    then the iteration has ended, and what the loop recorded after its own step end (a running
    loss's sum) joins the next step's graph rather than ending a step of its own."""
    if _steps_ended[0] != steps_ended_at_batch:
        run_closures()
        return
    step()


def run_closures() -> None:
    """The closures queued so far, in order; one a closure queues runs at the next step."""
    pending = list(_closures)
    _closures.clear()
    for closure in pending:
        closure()
