"""Tensor creation, sync/step, grad mode and scopes: thin wrappers over the extension. Frames
of this package are skipped when ops are located, so each op carries the caller's line."""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, TypeVar

import numpy as np

from . import _device, _native, _progress
from ._native import (  # noqa: F401  (re-exported)
    arange,
    avg_pool2d,
    cat,
    conv2d,
    cross_entropy,
    dropout,
    eye,
    full,
    is_grad_enabled,
    layer_norm,
    manual_seed,
    max_pool2d,
    ones,
    rand,
    randn,
    stack,
    zeros,
)
from ._native import AutogradError, Tensor

where = getattr(_native, "where")
counters = _native.counters


def tensor(
    data: Any,
    *,
    dtype: Optional[Any] = None,
    device: Optional[Any] = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor from a NumPy array, nested lists, a number or a tensor (copied to the device).

    Like ``torch.tensor``: Python floats become float32 and ints int64; NumPy arrays keep
    their dtype; ``device`` is checked (see ``xlaprof.device``); ``requires_grad=True`` makes a
    leaf whose gradient ``backward`` accumulates.
    """
    _check_device("tensor", device)
    if isinstance(data, Tensor):
        data = data.numpy()
    array = np.asarray(data)
    if not isinstance(data, np.ndarray) and array.dtype == np.float64 and dtype is None:
        array = array.astype(np.float32)  # (a dtype asked for is made from the floats themselves)
    cast_to = None
    if dtype is not None:
        name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
        name = _DTYPE_ALIASES.get(name, name)
        if name == "bfloat16":
            cast_to, array = name, array.astype(np.float32)
        else:
            array = array.astype(name)
    t = _native.from_array(array)
    if cast_to is not None:
        t = t.to(cast_to)
    if requires_grad:
        if not t.is_floating_point():
            raise AutogradError(
                f"tensor: only tensors of a float dtype can require gradients, not {t.dtype}"
            )
        t.requires_grad = True
    return t


# PyTorch's other names for dtypes, as xlaprof's dtype attributes spell them.
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64",
                  "int": "int32", "bool": "bool"}


def as_tensor(data: Any, dtype: Optional[Any] = None, device: Optional[Any] = None) -> Tensor:
    """``data`` as a tensor: a tensor of the right dtype is returned as it is, anything else is
    copied as ``tensor`` copies it."""
    if isinstance(data, Tensor):
        _check_device("as_tensor", device)
        return data if dtype is None else data.to(dtype)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A tensor with the array's dtype and values (read in place when contiguous)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy needs a numpy.ndarray, not {type(ndarray).__name__}")
    return _native.from_array(ndarray)


def _check_device(what: str, device: Any) -> None:
    if device is not None and _device.resolve(device) is None:
        raise TypeError(
            f"{what}: device must be None, an xlaprof.device or a device name such as \"cpu\", "
            f"not {device!r}"
        )


def _rebuild_tensor(array: np.ndarray, dtype: str, requires_grad: bool) -> Tensor:
    """Unpickles a tensor (see ``Tensor.__reduce__``)."""
    t = _native.from_array(np.ascontiguousarray(array))
    if t.dtype != dtype:
        t = t.to(dtype)
    if requires_grad:
        t.requires_grad = True
    return t


def sync() -> None:
    """Compiles and runs every pending tensor as one graph (torch_xla's ``mark_step``)."""
    _native.sync()
    _progress.notify("sync")


def step() -> None:
    """Ends a training step: a sync, and a step boundary in the profile."""
    _native.step()
    _progress.notify("step")


def wait() -> None:
    """Waits until the device has run everything launched so far (torch_xla's
    ``wait_device_ops``): on a GPU, a sync returns once its program is queued."""
    _native.wait()


F = TypeVar("F", bound=Callable[..., Any])


class no_grad:
    """Records no gradients inside: ``with xp.no_grad(): ...`` or ``@xp.no_grad()``."""

    def __enter__(self) -> "no_grad":
        _native.no_grad_enter()
        return self

    def __exit__(self, *exc: Any) -> None:
        _native.no_grad_exit()

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class profile_scope:
    """Names a region of the program in the profile: ``with xp.profile_scope("forward"): ...``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._scope: Any = None

    def __enter__(self) -> "profile_scope":
        self._scope = _native._Scope(self.name)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._scope is not None:
            self._scope.close()
            self._scope = None
