"""Activation functions and their backward: ``relu``, ``gelu``, ``silu``, ``elu``, ``softplus``, ...
"""

from __future__ import annotations

import math
from typing import Any, Tuple

import xlaprof as xp

from .._tensor import LazyTensor, assign, value
from .common import aten, elementwise_in_float, half_in_float, is_float, vjp
from .registry import lower, lower_raw


# Activations of half-precision tensors compute in float32 and round once, as torch's kernels
# do (in bfloat16 each of their ops would round: GELU's gradient was 1.3x torch's error).
@lower(aten.gelu.default)
@half_in_float
def gelu(x: Any, approximate: str = "none") -> Any:
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
        return x * 0.5 * (inner.tanh() + 1.0)
    # torch's default GELU is exact, through erf (the engine's `gelu` is the tanh form, off by
    # up to 2e-4 from it, which `compare_with_eager` found).
    return x * 0.5 * ((x * math.sqrt(0.5)).erf() + 1.0)


@lower(aten.threshold_backward.default)
def threshold_backward(grad: Any, x: Any, threshold: Any) -> Any:
    return xp.where(x <= threshold, xp.zeros_like(grad), grad)


@lower(aten.gelu_backward.default)
@elementwise_in_float
def gelu_backward(grad: Any, x: Any, approximate: str = "none") -> Any:
    return vjp(lambda v: gelu(v, approximate), [x], grad)[0]


@lower(aten.silu_backward.default)
@elementwise_in_float
def silu_backward(grad: Any, x: Any) -> Any:
    s = x.sigmoid()
    return grad * s * (1.0 + x * (1.0 - s))


@lower(aten.hardtanh.default)
def hardtanh(x: Any, min_val: Any = -1, max_val: Any = 1) -> Any:
    if not is_float(x):  # integers keep their dtype: the bounds truncate, as in torch
        return x.clamp(int(min_val), int(max_val))
    return x.clamp(min_val, max_val)


def _rrelu(x: Any, lower: Any, upper: Any, training: bool) -> Tuple[Any, Any]:
    """A randomized leaky ReLU and the slopes it drew (None outside training). In training
    each input at or below 0 takes a slope drawn from U(lower, upper), the rest a slope of 1, and
    the slopes are the noise its backward multiplies by, as torch's kernels have it. Outside
    training it is a leaky ReLU with the middle slope."""
    if not training:
        return leaky_relu(x, (lower + upper) / 2), None
    drawn = xp.rand(*x.shape, dtype=x.dtype) * (upper - lower) + lower
    slopes = xp.where(x <= 0, drawn, 1.0)
    return x * slopes, slopes


def _rrelu_noting(t: LazyTensor, noise: LazyTensor, lower: Any, upper: Any, training: bool) -> Any:
    """``_rrelu`` of ``t``, the slopes drawn (in training) written into ``noise``."""
    out, slopes = _rrelu(value(t), lower, upper, training)
    if slopes is not None:
        assign(noise, slopes)
    return out


@lower_raw(aten.rrelu_with_noise.default)
def rrelu_with_noise(t: LazyTensor, noise: LazyTensor, lower: Any = 0.125, upper: Any = 1 / 3,
                     training: bool = False, generator: Any = None) -> LazyTensor:
    return LazyTensor(_rrelu_noting(t, noise, lower, upper, training))


@lower_raw(aten.rrelu_with_noise_.default)
def rrelu_with_noise_(t: LazyTensor, noise: LazyTensor, lower: Any = 0.125, upper: Any = 1 / 3,
                      training: bool = False, generator: Any = None) -> LazyTensor:
    return assign(t, _rrelu_noting(t, noise, lower, upper, training))


@lower(aten.rrelu_with_noise_functional.default)
def rrelu_with_noise_functional(x: Any, noise: Any, lower: Any = 0.125, upper: Any = 1 / 3,
                                training: bool = False, generator: Any = None) -> Tuple[Any, Any]:
    out, slopes = _rrelu(x, lower, upper, training)
    return out, noise if slopes is None else slopes


@lower(aten.leaky_relu.default)
def leaky_relu(x: Any, negative_slope: Any = 0.01) -> Any:
    return xp.where(x > 0, x, x * negative_slope)


@lower(aten.elu.default)
@half_in_float
def elu(x: Any, alpha: Any = 1, scale: Any = 1, input_scale: Any = 1) -> Any:
    return xp.where(x > 0, x * scale, ((x * input_scale).exp() - 1.0) * (alpha * scale))


@lower(aten.softplus.default, autocast="float32")
@half_in_float
def softplus(x: Any, beta: Any = 1, threshold: Any = 20) -> Any:
    bx = x * beta
    return xp.where(bx > threshold, x, (bx.exp() + 1.0).log() * (1.0 / beta))


@lower(aten.softshrink.default)
def softshrink(x: Any, lambd: Any = 0.5) -> Any:
    return xp.where(x > lambd, x - lambd, xp.where(x < -lambd, x + lambd, xp.zeros_like(x)))


@lower(aten.hardshrink.default)
def hardshrink(x: Any, lambd: Any = 0.5) -> Any:
    return xp.where((x > lambd).logical_or(x < -lambd), x, xp.zeros_like(x))


@lower(aten.softshrink_backward.default, aten.hardshrink_backward.default)
def shrink_backward(grad: Any, x: Any, lambd: Any) -> Any:
    return xp.where((x > lambd).logical_or(x < -lambd), grad, xp.zeros_like(grad))


@lower(aten.threshold.default)
def threshold(x: Any, th: Any, v: Any) -> Any:
    return xp.where(x > th, x, xp.full((), v, dtype=x.dtype).expand(*x.shape))


@lower(aten.celu.default)
@half_in_float
def celu(x: Any, alpha: Any = 1.0) -> Any:
    return x.maximum(0.0) + ((x * (1.0 / alpha)).exp() - 1.0).minimum(0.0) * alpha


@lower(aten.mish.default)
@half_in_float
def mish(x: Any) -> Any:
    return x * softplus(x).tanh()


@lower(aten.mish_backward.default)
@elementwise_in_float
def mish_backward(grad: Any, x: Any) -> Any:
    return vjp(mish, [x], grad)[0]


@lower(aten.glu.default)
@half_in_float
def glu(x: Any, dim: int = -1) -> Any:
    d = dim % x.ndim
    half = x.shape[d] // 2
    a = x[tuple(slice(None) if i != d else slice(0, half) for i in range(x.ndim))]
    b = x[tuple(slice(None) if i != d else slice(half, 2 * half) for i in range(x.ndim))]
    return a * b.sigmoid()
