"""PyTorch on the engine: unmodified torch code, recorded lazily and profiled at every step.

    import torch
    import xlaprof.torch as xt

    dev = xt.device()                    # torch.device("xlaprof:0")
    model = MyModel().to(dev)
    opt = torch.optim.AdamW(model.parameters())
    for x, y in batches:
        loss = loss_fn(model(x.to(dev)), y.to(dev))
        loss.backward()
        opt.step()
        opt.zero_grad()
        xt.step()                        # PyTorch/XLA's torch_xla.sync(): one graph per step

Each aten op torch dispatches on the device is recorded into the engine with the user's line;
``xt.sync()`` / ``xt.step()`` compile (or find in the cache) and run what is pending. Reading a
value (``.item()``, ``.cpu()``, ``print``, ``if t:``) runs what it needs and is a sync the
profiler reports. Needs torch >= 2.10 (the Python PrivateUse1 backend): ``pip install
xlaprof[torch]``.
"""

from __future__ import annotations

import atexit as _atexit
import time as _time

import torch as _torch  # noqa: F401  (the real torch: this module is xlaprof.torch)

from .. import _api, _native, _torch_compile
from ._device import DEVICE_TYPE, device, register

register()  # before the modules below, which name the device


def _let_autograd_threads_finish() -> None:
    # torch's autograd runs the device's backward on a thread of its own, which lets go of the
    # finished graph task (and a Python object it holds) just after `backward()` has returned.
    # A program that ends right after its last backward can reach the interpreter's
    # finalization first; that thread then cannot take the GIL, and torch aborts the process
    # ("terminate called without an active exception"). Releasing the GIL for a moment before
    # finalization lets the thread finish.
    _time.sleep(0.02)


_atexit.register(_let_autograd_threads_finish)

from .._debug import detect_anomaly, explain, forbid_sync  # noqa: E402
from ._compare import compare_with_eager  # noqa: E402
from ._dispatch import fallbacks  # noqa: E402
from ._loader import DeviceLoader  # noqa: E402
from ._tensor import LazyTensor, value  # noqa: E402
from . import _check, _compile, _sharding  # noqa: E402

_compile.register()  # torch.compile(..., backend="xlaprof")
_torch_compile.watch_runs()  # a profile started after the program compiled still sees its steps


def sync() -> None:
    """Compiles (or finds in the cache) and runs everything pending: ``torch_xla.sync()``."""
    _check.around_sync(_api.sync)


def step() -> None:
    """Ends a training step: a sync, and the profiler's step boundary (``xm.mark_step()``)."""
    _check.around_sync(_api.step)


def wait() -> None:
    """Waits until the device has run everything launched so far: ``xm.wait_device_ops()``."""
    _native.wait()
    _check.after_wait()  # the index checks of what ran ahead


# Dynamo skips the package (`_compile.register`); this one it traces, into `_sharding`.
@_torch._dynamo.dont_skip_tracing
def mark_sharding(t: _torch.Tensor, mesh: _native.Mesh, partition_spec: tuple) -> _torch.Tensor:
    """Splits ``t`` over ``mesh`` (an ``xlaprof.Mesh``) as PyTorch/XLA's ``xs.mark_sharding``
    does: one entry per dimension, None (whole), a mesh axis name, or a tuple of names. Mark the
    batch (and, for FSDP, each parameter) before the step; XLA's partitioner runs the step over
    the mesh's devices and inserts the collectives. Make the mesh before the first tensor: the
    engine starts with the devices it needs. Inside a compiled function it is an op of the
    graph (``_sharding``). Returns ``t``."""
    if _torch.compiler.is_compiling():
        return _sharding.traced(t, mesh, partition_spec)
    if not isinstance(t, LazyTensor):
        raise TypeError(f"mark_sharding: the tensor is on {t.device}, not on the xlaprof device")
    root = t._root
    if root is None:
        _native.mark_sharding(t._xp, mesh, partition_spec)
        return t
    # An activation that is a view (a linear's output reshaped to 3 dimensions) takes the
    # constraint on its own value, which the ops after it read.
    own = value(t)
    if own.is_pending:
        _native.mark_sharding(own, mesh, partition_spec)
        return t
    # A parameter is a view of the tensor `.to(dev)` made (an alias of the same shape): the
    # root's value is split, and the view's, which reads it.
    if tuple(root.shape) != tuple(t.shape):
        raise _native.ShardingError(
            f"mark_sharding: this tensor of shape {tuple(t.shape)} is a view of part of one of "
            f"shape {tuple(root.shape)}; mark that one"
        )
    _native.mark_sharding(root._xp, mesh, partition_spec)
    _native.mark_sharding(value(t), mesh, partition_spec)
    return t


def is_lazy(t: _torch.Tensor) -> bool:
    """Whether ``t`` lives on the xlaprof device."""
    return isinstance(t, LazyTensor)


__all__ = [
    "DEVICE_TYPE",
    "DeviceLoader",
    "LazyTensor",
    "compare_with_eager",
    "detect_anomaly",
    "device",
    "explain",
    "fallbacks",
    "forbid_sync",
    "is_lazy",
    "mark_sharding",
    "step",
    "sync",
    "wait",
]
