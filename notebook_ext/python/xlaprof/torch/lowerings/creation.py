"""Factories: tensors made from a shape and a value (``full``, ``zeros``, ``arange``, ``eye``,
``linspace``, ...), and fills of existing tensors.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

import xlaprof as xp

from .._device import engine_dtype
from .common import aten, dt, factory_dtype, like_factory
from .registry import lower


@lower(aten.full.default)
def full(size: Any, fill_value: Any, dtype: Any = None, layout: Any = None, device: Any = None,
         pin_memory: Any = None) -> Any:
    return xp.full(tuple(size), fill_value, dtype=factory_dtype(dtype, fill_value))


@lower(aten.scalar_tensor.default)
def scalar_tensor(s: Any, dtype: Any = None, layout: Any = None, device: Any = None,
                  pin_memory: Any = None) -> Any:
    return xp.full((), s, dtype=factory_dtype(dtype))


# `_efficientzerotensor`: the zeros torch's backward formulas return where a gradient is known to
# be zero (`sgn`'s of a real input), a tensor of no storage on CUDA; plain zeros here.
@lower(aten.zeros.default, aten._efficientzerotensor.default)
def zeros(size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    return xp.zeros(*size, dtype=factory_dtype(dtype))


@lower(aten.ones.default)
def ones(size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    return xp.ones(*size, dtype=factory_dtype(dtype))


@lower(aten.full_like.default)
def full_like(x: Any, fill_value: Any, dtype: Any = None, layout: Any = None, device: Any = None,
              pin_memory: Any = None, memory_format: Any = None) -> Any:
    return xp.full(tuple(x.shape), fill_value, dtype=dt(dtype) or x.dtype)


zeros_like = lower(aten.zeros_like.default, complex_safe=True)(like_factory(xp.zeros))
lower(aten.empty_like.default)(zeros_like)


ones_like = lower(aten.ones_like.default, complex_safe=True)(like_factory(xp.ones))


@lower(aten.arange.start_step)
def arange(start: Any, end: Any, step: Any = 1, dtype: Any = None, layout: Any = None, device: Any = None,
           pin_memory: Any = None) -> Any:
    if dtype is None:
        ints = all(isinstance(v, int) for v in (start, end, step))
        dtype = torch.int64 if ints else torch.get_default_dtype()
    return xp.arange(start, end, step, dtype=engine_dtype(dtype))


@lower(aten.arange.default)
def arange_end(end: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    return arange(0, end, 1, dtype)


@lower(aten.arange.start)
def arange_start(start: Any, end: Any, dtype: Any = None, layout: Any = None, device: Any = None,
                 pin_memory: Any = None) -> Any:
    return arange(start, end, 1, dtype)


@lower(aten.fill.Scalar, aten.fill.Tensor, complex_safe=True)
def fill(x: Any, v: Any) -> Any:
    return xp.full(tuple(x.shape), v, dtype=x.dtype) if not hasattr(v, "shape") else v.astype(x.dtype).expand(*x.shape)


@lower(aten.zero.default, complex_safe=True)
def zero(x: Any) -> Any:
    return xp.zeros(*x.shape, dtype=x.dtype)


@lower(aten.new_zeros.default, aten.new_empty.default, complex_safe=True)
def new_zeros(x: Any, size: Sequence[int], dtype: Any = None, layout: Any = None, device: Any = None,
              pin_memory: Any = None) -> Any:
    return xp.zeros(*size, dtype=dt(dtype) or x.dtype)


@lower(aten.new_ones.default, complex_safe=True)
def new_ones(x: Any, size: Sequence[int], dtype: Any = None, layout: Any = None, device: Any = None,
             pin_memory: Any = None) -> Any:
    return xp.ones(*size, dtype=dt(dtype) or x.dtype)


@lower(aten.new_full.default)
def new_full(x: Any, size: Sequence[int], fill_value: Any, dtype: Any = None, layout: Any = None,
             device: Any = None, pin_memory: Any = None) -> Any:
    return xp.full(tuple(size), fill_value, dtype=dt(dtype) or x.dtype)


def _float64_scalar(v: Any) -> Any:
    """A 0-d float64 engine value of a tensor or a Python number."""
    if hasattr(v, "dtype"):
        return v.astype("float64").reshape(())
    return xp.full((), float(v), dtype="float64")


@lower(aten.linspace.Tensor_Tensor, aten.linspace.Tensor_Scalar, aten.linspace.Scalar_Tensor)
def linspace_tensors(start: Any, end: Any, steps: int, dtype: Any = None, layout: Any = None,
                     device: Any = None, pin_memory: Any = None) -> Any:
    # Endpoints given as tensors stay on the device: no read of their values.
    out = engine_dtype(dtype or torch.get_default_dtype())
    a, b = _float64_scalar(start), _float64_scalar(end)
    if steps <= 1:
        return a.reshape(1).astype(out)[0:steps]
    i = xp.arange(steps, dtype="float64")
    return (a + (b - a) * (i / (steps - 1))).astype(out)


@lower(aten.logspace.Tensor_Tensor, aten.logspace.Tensor_Scalar, aten.logspace.Scalar_Tensor)
def logspace_tensors(start: Any, end: Any, steps: int, base: float = 10.0, dtype: Any = None,
                     layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    out = engine_dtype(dtype or torch.get_default_dtype())
    exponents = linspace_tensors(start, end, steps, torch.float64)
    return (base ** exponents).astype(out)


@lower(aten.eye.default, aten.eye.m)
def eye(n: int, m: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
        pin_memory: Any = None) -> Any:
    return xp.eye(n, n if m is None else m, dtype=factory_dtype(dtype))


@lower(aten.new_empty_strided.default)
def new_empty_strided(x: Any, size: Sequence[int], stride: Sequence[int], dtype: Any = None, layout: Any = None,
                      device: Any = None, pin_memory: Any = None) -> Any:
    return xp.zeros(*size, dtype=dt(dtype) or x.dtype)
