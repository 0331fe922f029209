"""Tensor creation, sync/step, grad mode and scopes: thin wrappers over the extension. Frames
of this package are skipped when ops are located, so each op carries the caller's line."""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, TypeVar

import numpy as np

from . import _native, _progress
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
from ._native import Tensor

where = getattr(_native, "where")
counters = _native.counters


def tensor(data: Any, dtype: Optional[Any] = None, requires_grad: bool = False) -> Tensor:
    """A tensor from a NumPy array, nested lists or a number (copied to the device).

    Like ``torch.tensor``: Python floats become float32 and ints int64; NumPy arrays keep
    their dtype.
    """
    if isinstance(data, Tensor):
        data = data.numpy()
    array = np.asarray(data)
    if not isinstance(data, np.ndarray) and array.dtype == np.float64:
        array = array.astype(np.float32)
    cast_to = None
    if dtype is not None:
        name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
        if name == "bfloat16":
            cast_to, array = name, array.astype(np.float32)
        else:
            array = array.astype(name)
    t = _native.from_array(array)
    if cast_to is not None:
        t = t.to(cast_to)
    if requires_grad:
        t.requires_grad = True
    return t


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor with the array's dtype and values (read in place when contiguous)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy needs a numpy.ndarray, not {type(array).__name__}")
    return _native.from_array(array)


def sync() -> None:
    """Compiles and runs every pending tensor as one graph (torch_xla's ``mark_step``)."""
    _native.sync()
    _progress.notify("sync")


def step() -> None:
    """Ends a training step: a sync, and a step boundary in the profile."""
    _native.step()
    _progress.notify("step")


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
