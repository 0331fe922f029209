"""Random numbers: the engine's uniform and normal streams, and transforms of them.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import xlaprof as xp

from .._tensor import LazyTensor, assign, value
from .common import Unsupported, aten, broadcast_shape, factory_dtype, like_factory
from .elementwise import ceil, tan
from .registry import lower, lower_raw


lower(aten.rand_like.default)(like_factory(xp.rand))


lower(aten.randn_like.default)(like_factory(xp.randn))


@lower(aten.normal_functional.default, complex_safe=True)
def normal(x: Any, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Any:
    return _random(xp.randn, x.shape, x.dtype, math.sqrt(0.5)) * std + mean


@lower(aten.uniform.default)
def uniform(x: Any, low: float = 0.0, high: float = 1.0, generator: Any = None) -> Any:
    return xp.rand(*x.shape, dtype=x.dtype) * (high - low) + low


@lower(aten.bernoulli.p)
def bernoulli(x: Any, p: float = 0.5, generator: Any = None) -> Any:
    return (xp.rand(*x.shape) < p).astype(x.dtype)


def _random(draw: Callable[..., Any], size: Any, dtype: str, part_scale: float) -> Any:
    """Random values of ``dtype``; a complex one draws its real and imaginary parts apart, each
    scaled by ``part_scale`` (torch's complex normal has variance 1 in all)."""
    if dtype not in ("complex64", "complex128"):
        return draw(*size, dtype=dtype)
    part = "float64" if dtype == "complex128" else "float32"
    return (draw(*size, dtype=part) * part_scale)._complex(draw(*size, dtype=part) * part_scale)


@lower(aten.rand.default)
def rand(size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    return _random(xp.rand, size, factory_dtype(dtype), 1.0)


@lower(aten.randn.default)
def randn(size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    return _random(xp.randn, size, factory_dtype(dtype), math.sqrt(0.5))


def random_integers(size: Any, low: int, high: int, dtype: str) -> Any:
    """Integers drawn uniformly from [low, high): a float64 uniform, scaled and floored (exact
    for ranges up to 2**53)."""
    u = xp.rand(*size, dtype="float64")
    return (u * (high - low) + low).floor().clamp(low, high - 1).astype(dtype)


@lower(aten.randint.default)
def randint(high: int, size: Any, dtype: Any = None, layout: Any = None, device: Any = None,
            pin_memory: Any = None) -> Any:
    return random_integers(size, 0, high, factory_dtype(dtype, 0))


@lower(aten.randint.low)
def randint_low(low: int, high: int, size: Any, dtype: Any = None, layout: Any = None, device: Any = None,
                pin_memory: Any = None) -> Any:
    return random_integers(size, low, high, factory_dtype(dtype, 0))


@lower_raw(getattr(aten.random_, "from"))  # `from` is a Python keyword
def random_from(t: LazyTensor, low: int, high: Any = None, generator: Any = None) -> LazyTensor:
    if high is None:
        raise Unsupported("random_(from, None): draws from the dtype's whole range")
    return assign(t, random_integers(t.shape, low, high, value(t).dtype))


@lower_raw(aten.random_.to)
def random_to(t: LazyTensor, high: int, generator: Any = None) -> LazyTensor:
    return assign(t, random_integers(t.shape, 0, high, value(t).dtype))


# torch's initializers fill tensors in place (`nn.init`, `torch.randn(device=)`).
@lower_raw(aten.normal_.default, complex_safe=True)
def normal_(t: LazyTensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> LazyTensor:
    return assign(t, normal(value(t), mean, std))


@lower_raw(aten.uniform_.default)
def uniform_(t: LazyTensor, low: float = 0.0, high: float = 1.0, generator: Any = None) -> LazyTensor:
    return assign(t, uniform(value(t), low, high))


@lower_raw(aten.bernoulli_.float)
def bernoulli_(t: LazyTensor, p: float = 0.5, generator: Any = None) -> LazyTensor:
    return assign(t, bernoulli(value(t), p))


@lower(aten.normal.Tensor_Tensor)
def normal_tt(mean: Any, std: Any, generator: Any = None) -> Any:
    shape = broadcast_shape([mean.shape, std.shape])
    return xp.randn(*shape, dtype=mean.dtype) * std + mean


@lower_raw(aten.exponential_.default)
def exponential_(t: LazyTensor, lambd: float = 1.0, generator: Any = None) -> LazyTensor:
    u = xp.rand(*t.shape, dtype=value(t).dtype)
    return assign(t, -((1.0 - u).log()) * (1.0 / lambd))


@lower_raw(aten.cauchy_.default)
def cauchy_(t: LazyTensor, median: float = 0.0, sigma: float = 1.0, generator: Any = None) -> LazyTensor:
    u = xp.rand(*t.shape, dtype=value(t).dtype)
    return assign(t, tan((u - 0.5) * math.pi) * sigma + median)


@lower_raw(aten.log_normal_.default)
def log_normal_(t: LazyTensor, mean: float = 1.0, std: float = 2.0, generator: Any = None) -> LazyTensor:
    return assign(t, (xp.randn(*t.shape, dtype=value(t).dtype) * std + mean).exp())


@lower_raw(aten.geometric_.default)
def geometric_(t: LazyTensor, p: float, generator: Any = None) -> LazyTensor:
    u = xp.rand(*t.shape, dtype="float32")
    return assign(t, ceil((1.0 - u).log() * (1.0 / math.log(1.0 - p))))
