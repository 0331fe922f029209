"""Elementwise ops: arithmetic, comparisons, rounding, trigonometric and hyperbolic functions,
bitwise ops, and the backward of elementwise ops the engine has no op for.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import xlaprof as xp

from .._device import engine_dtype
from .common import (Unsupported, aten, broadcast_shape, elementwise_in_float, expand_to, half_in_float, is_complex,
                     is_float, to_float)
from .registry import declare, lower


for _name in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "sign",
              "floor", "relu", "silu", "logical_not"):
    lower(getattr(aten, _name).default)(
        (lambda n: lambda x: getattr(x, n)())(_name)
    )
declare(aten.neg, aten.abs, aten.exp, aten.log, aten.sqrt, aten.sin, aten.cos, aten.tanh, complex_safe=True)
declare(aten.exp, aten.log, aten.rsqrt, autocast="float32")


@lower(aten.angle.default, complex_safe=True)
def angle(x: Any) -> Any:
    # Of a real number: pi when negative, else 0; NaN stays NaN.
    x = to_float(x)
    return xp.where(x < 0, math.pi, 0.0 * x)


@lower(aten.ceil.default)
def ceil(x: Any) -> Any:
    return x if not is_float(x) else -((-x).floor())


@lower(aten.trunc.default)
def trunc(x: Any) -> Any:
    return x if not is_float(x) else xp.where(x < 0, -((-x).floor()), x.floor())


@lower(aten.reciprocal.default, autocast="float32")
def reciprocal(x: Any) -> Any:
    return 1.0 / to_float(x)


@lower(aten.square.default)
def square(x: Any) -> Any:
    return x * x


@lower(aten.log2.default, autocast="float32")
@elementwise_in_float
def log2(x: Any) -> Any:
    return to_float(x).log() * (1.0 / math.log(2.0))


@lower(aten.log10.default, autocast="float32")
@elementwise_in_float
def log10(x: Any) -> Any:
    return to_float(x).log() * (1.0 / math.log(10.0))


@lower(aten.exp2.default)
@elementwise_in_float
def exp2(x: Any) -> Any:
    return (to_float(x) * math.log(2.0)).exp()


@lower(aten.tan.default, autocast="float32")
@elementwise_in_float
def tan(x: Any) -> Any:
    x = to_float(x)
    return x.sin() / x.cos()


# `add`, `sub`, `mul` and `div` with a tensor first: the native dispatcher calls the engine's
# operator itself (see `_dispatch._ENGINE_OPERATORS`), so a change to one of these four is a
# change there.
@lower(aten.add.Tensor, complex_safe=True, engine_operator="add")
@lower(aten.add.Scalar, complex_safe=True)
def add(a: Any, b: Any, alpha: Any = 1) -> Any:
    return a.add(b, alpha=alpha) if hasattr(a, "add") else xp.add(_const_like(a, b), b, alpha=alpha)


@lower(aten.sub.Tensor, complex_safe=True, engine_operator="sub")
@lower(aten.sub.Scalar, complex_safe=True)
def sub(a: Any, b: Any, alpha: Any = 1) -> Any:
    return a.sub(b, alpha=alpha) if hasattr(a, "sub") else _const_like(a, b).sub(b, alpha=alpha)


@lower(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(a: Any, b: Any, alpha: Any = 1) -> Any:
    return (a * alpha).__rsub__(b) if alpha != 1 else a.__rsub__(b)


def _const_like(scalar: Any, like: Any) -> Any:
    return xp.full((), scalar, dtype=like.dtype)


@lower(aten.mul.Tensor, complex_safe=True, engine_operator="mul")
@lower(aten.mul.Scalar, complex_safe=True)
def mul(a: Any, b: Any) -> Any:
    return a * b if hasattr(a, "mul") else b * a


@lower(aten.div.Tensor, complex_safe=True, engine_operator="div")
@lower(aten.div.Scalar, complex_safe=True)
def div(a: Any, b: Any) -> Any:
    return a / b if hasattr(a, "div") else b.__rtruediv__(a)


@lower(aten.div.Tensor_mode, aten.div.Scalar_mode, complex_safe=True)
def div_mode(a: Any, b: Any, rounding_mode: Optional[str] = None) -> Any:
    return a.div(b, rounding_mode=rounding_mode)


@lower(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, autocast="float32")
def pow_(a: Any, b: Any) -> Any:
    return a.pow(b)


@lower(aten.pow.Scalar, autocast="float32")
def pow_scalar(a: Any, b: Any) -> Any:
    return b.__rpow__(a)


@lower(aten.maximum.default)
def maximum(a: Any, b: Any) -> Any:
    return a.maximum(b)


@lower(aten.minimum.default)
def minimum(a: Any, b: Any) -> Any:
    return a.minimum(b)


@lower(aten.fmod.Tensor, aten.fmod.Scalar)
def fmod(a: Any, b: Any) -> Any:
    return a.fmod(b)


@lower(aten.remainder.Tensor, aten.remainder.Scalar)
def remainder(a: Any, b: Any) -> Any:
    return a.remainder(b)


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    lower(getattr(aten, _name).Tensor, getattr(aten, _name).Scalar)(
        (lambda n: lambda a, b: getattr(a, n)(b))(_name)
    )
declare(aten.eq, aten.ne, complex_safe=True)


@lower(aten.logical_and.default)
def logical_and(a: Any, b: Any) -> Any:
    return a.astype("bool").logical_and(b.astype("bool"))


@lower(aten.logical_or.default)
def logical_or(a: Any, b: Any) -> Any:
    return a.astype("bool").logical_or(b.astype("bool"))


@lower(aten.where.self, complex_safe=True)
def where(cond: Any, a: Any, b: Any) -> Any:
    return xp.where(cond, a, b)


@lower(aten.clamp.default)
def clamp(x: Any, min: Any = None, max: Any = None) -> Any:
    return x.clamp(min, max)


@lower(aten.clamp.Tensor)
def clamp_tensor(x: Any, min: Any = None, max: Any = None) -> Any:
    if min is not None:
        x = x.maximum(min)
    if max is not None:
        x = x.minimum(max)
    return x


@lower(aten.masked_fill.Scalar, aten.masked_fill.Tensor, complex_safe=True)
def masked_fill(x: Any, mask: Any, v: Any) -> Any:
    # The out-of-place form broadcasts the tensor too.
    x = expand_to(x, broadcast_shape([x.shape, mask.shape]))
    return x.masked_fill(mask, v)


@lower(aten.lerp.Scalar, aten.lerp.Tensor)
@elementwise_in_float
def lerp(a: Any, b: Any, w: Any) -> Any:
    return a + (b - a) * w


@lower(aten.addcmul.default, autocast="widest")
@elementwise_in_float
def addcmul(x: Any, t1: Any, t2: Any, value: Any = 1) -> Any:
    return x + t1 * t2 * value


@lower(aten.addcdiv.default, autocast="widest")
@elementwise_in_float
def addcdiv(x: Any, t1: Any, t2: Any, value: Any = 1) -> Any:
    return x + t1 / t2 * value


@lower(aten._to_copy.default)
def to_copy(x: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None,
            non_blocking: bool = False, memory_format: Any = None) -> Any:
    # Only reached for a copy that stays on the device (`_dispatch` handles `.cpu()`).
    return x.astype(engine_dtype(dtype)) if dtype is not None else x.clone()


@lower(aten.clone.default, complex_safe=True)
def clone(x: Any, memory_format: Any = None) -> Any:
    return x.clone()


@lower(aten.copy.default)
def copy(dst: Any, src: Any, non_blocking: bool = False) -> Any:
    # `copy_` made functional (torch.compile's graphs): `src` in `dst`'s dtype and shape.
    if src.dtype != dst.dtype:
        src = src.astype(dst.dtype)
    return expand_to(src, dst.shape) if list(src.shape) != list(dst.shape) else src.clone()


@lower(aten.tanh_backward.default)
@half_in_float
def tanh_backward(grad: Any, out: Any) -> Any:
    return grad * (1.0 - out * out)


@lower(aten.sigmoid_backward.default)
@half_in_float
def sigmoid_backward(grad: Any, out: Any) -> Any:
    return grad * out * (1.0 - out)


@lower(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(x: Any, m: Any) -> Any:
    return x.clamp(min=m) if not hasattr(m, "shape") else x.maximum(m)


@lower(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(x: Any, m: Any) -> Any:
    return x.clamp(max=m) if not hasattr(m, "shape") else x.minimum(m)


@lower(aten.isnan.default)
def isnan(x: Any) -> Any:
    return x.ne(x)


@lower(aten.isinf.default)
def isinf(x: Any) -> Any:
    return x.abs().eq(math.inf) if is_float(x) else xp.zeros(*x.shape, dtype="bool")


@lower(aten.frexp.Tensor)
def frexp(x: Any) -> Any:
    """x = mantissa * 2**exponent with 0.5 <= |mantissa| < 1 (0, inf and NaN keep exponent 0),
    from log2 with a correction step for its rounding."""
    finite = isfinite(x) & (x != 0)
    safe = xp.where(finite, x.abs(), xp.ones_like(x))
    e = (safe.log() / math.log(2.0)).floor() + 1.0
    m = safe / (2.0 ** e)
    e = xp.where(m >= 1.0, e + 1.0, xp.where(m < 0.5, e - 1.0, e))
    m = x / (2.0 ** e)
    return xp.where(finite, m, x), xp.where(finite, e, xp.zeros_like(e)).astype("int32")


@lower(aten.xlogy.Tensor)
def xlogy(x: Any, y: Any) -> Any:
    x, y = to_float(x), to_float(y)
    return xp.where(x.eq(0), xp.zeros_like(x * y), x * y.log())


def _bools(*xs: Any) -> bool:
    return all(not hasattr(x, "dtype") and isinstance(x, bool) or getattr(x, "dtype", None) == "bool" for x in xs)


def _bits_operand(a: Any, b: Any) -> Any:
    """``b`` as a tensor: a Python scalar takes ``a``'s dtype, or int64 where ``a`` holds bools
    and it is an integer (PyTorch's promotion)."""
    if hasattr(b, "dtype"):
        return b
    if isinstance(b, float):
        raise Unsupported("a bitwise op with a float")
    return xp.full((), b, dtype="int64" if a.dtype == "bool" and not isinstance(b, bool) else a.dtype)


@lower(aten.bitwise_and.Tensor, aten.bitwise_and.Scalar)
def bitwise_and(a: Any, b: Any) -> Any:
    if _bools(a, b):
        return a.logical_and(b if hasattr(b, "dtype") else xp.full((), b, dtype="bool"))
    return a.bitwise_and(_bits_operand(a, b))


@lower(aten.bitwise_or.Tensor, aten.bitwise_or.Scalar)
def bitwise_or(a: Any, b: Any) -> Any:
    if _bools(a, b):
        return a.logical_or(b if hasattr(b, "dtype") else xp.full((), b, dtype="bool"))
    return a.bitwise_or(_bits_operand(a, b))


@lower(aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar)
def bitwise_xor(a: Any, b: Any) -> Any:
    if _bools(a, b):
        return a.ne(b if hasattr(b, "dtype") else xp.full((), b, dtype="bool"))
    return a.bitwise_xor(_bits_operand(a, b))


@lower(aten.bitwise_not.default)
def bitwise_not(a: Any) -> Any:
    return a.bitwise_not()


@lower(aten.atan2.default, autocast="widest")
def atan2(a: Any, b: Any) -> Any:
    return to_float(a).atan2(to_float(b) if hasattr(b, "dtype") else b)


@lower(aten.atan.default)
def atan(x: Any) -> Any:
    x = to_float(x)
    return x.atan2(xp.ones_like(x))


@lower(aten.asin.default, autocast="float32")
def asin(x: Any) -> Any:
    x = to_float(x)
    return x.atan2((1.0 - x * x).sqrt())


@lower(aten.acos.default, autocast="float32")
def acos(x: Any) -> Any:
    x = to_float(x)
    return (1.0 - x * x).sqrt().atan2(x)


@lower(aten.sinh.default, autocast="float32")
@elementwise_in_float
def sinh(x: Any) -> Any:
    x = to_float(x)
    return (x.exp() - (-x).exp()) * 0.5


@lower(aten.cosh.default, autocast="float32")
@elementwise_in_float
def cosh(x: Any) -> Any:
    x = to_float(x)
    return (x.exp() + (-x).exp()) * 0.5


@lower(aten.asinh.default)
@elementwise_in_float
def asinh(x: Any) -> Any:
    x = to_float(x)
    a = x.abs()
    return ((a + (a * a + 1.0).sqrt()).log()) * x.sign()


@lower(aten.acosh.default)
@elementwise_in_float
def acosh(x: Any) -> Any:
    x = to_float(x)
    return (x + (x * x - 1.0).sqrt()).log()


@lower(aten.atanh.default)
@elementwise_in_float
def atanh(x: Any) -> Any:
    x = to_float(x)
    return ((1.0 + x) / (1.0 - x)).log() * 0.5


@lower(aten.round.default)
def round_(x: Any) -> Any:
    return x.round()


@lower(aten.round.decimals)
def round_decimals(x: Any, decimals: int = 0) -> Any:
    scale = 10.0 ** decimals
    return (x * scale).round() / scale if decimals else x.round()


@lower(aten.logaddexp.default)
@elementwise_in_float
def logaddexp(a: Any, b: Any) -> Any:
    m = a.maximum(b)
    # Both -inf: -inf (not -inf - -inf); both +inf: +inf.
    m_safe = xp.where(m.abs() == math.inf, xp.zeros_like(m), m)
    out = m_safe + ((a - m_safe).exp() + (b - m_safe).exp()).log()
    return xp.where(m.abs() == math.inf, m, out)


@lower(aten.copysign.Tensor, aten.copysign.Scalar)
def copysign(a: Any, b: Any) -> Any:
    a = to_float(a)
    b = b if hasattr(b, "dtype") else xp.full((), float(b), dtype=a.dtype)
    # The sign bit of b, -0.0 included: atan2(b, -1) is negative exactly when b's sign bit is.
    negative = b.atan2(xp.full((), -1.0, dtype=a.dtype if is_float(b) else "float32")) < 0
    return xp.where(negative, -a.abs(), a.abs())


@lower(aten.isfinite.default)
def isfinite(x: Any) -> Any:
    return (x - x).eq(0) if is_float(x) else xp.ones(*x.shape, dtype="bool")


@lower(aten.frac.default)
def frac(x: Any) -> Any:
    return x - trunc(x)


@lower(aten.deg2rad.default)
@elementwise_in_float
def deg2rad(x: Any) -> Any:
    return to_float(x) * (math.pi / 180.0)


@lower(aten.rad2deg.default)
@elementwise_in_float
def rad2deg(x: Any) -> Any:
    return to_float(x) * (180.0 / math.pi)


@lower(aten.hypot.default)
@elementwise_in_float
def hypot(a: Any, b: Any) -> Any:
    # max * sqrt(1 + (min / max)^2): no overflow where the squares would.
    big, small = a.abs().maximum(b.abs()), a.abs().minimum(b.abs())
    ratio = small / xp.where(big == 0, xp.ones_like(big), big)
    out = big * (ratio * ratio + 1.0).sqrt()
    # An infinite side makes it infinite, even beside NaN (IEEE's hypot).
    infinite = (a.abs() == math.inf) | (b.abs() == math.inf)
    return xp.where(infinite, math.inf, out).astype(out.dtype)


@lower(aten.sgn.default, complex_safe=True)
def sgn(x: Any) -> Any:
    if not is_complex(x):
        return x.sign()
    # z / |z|, and 0 at 0 (`polar`'s and `abs`'s backward of complex numbers).
    magnitude = x.abs()
    unit = x / magnitude._complex(xp.zeros_like(magnitude))
    return xp.where(magnitude.eq(0), xp.zeros_like(x), unit)


@lower(aten.signbit.default)
def signbit(x: Any) -> Any:
    if not is_float(x):
        return x < 0
    return x.atan2(xp.full((), -1.0, dtype=x.dtype)) < 0


@lower(aten.logaddexp2.default)
@elementwise_in_float
def logaddexp2(a: Any, b: Any) -> Any:
    ln2 = math.log(2.0)
    return logaddexp(a * ln2, b * ln2) * (1.0 / ln2)


@lower(aten.fmax.default)
def fmax(a: Any, b: Any) -> Any:
    return xp.where(isnan(a), b, xp.where(isnan(b), a, a.maximum(b)))


@lower(aten.fmin.default)
def fmin(a: Any, b: Any) -> Any:
    return xp.where(isnan(a), b, xp.where(isnan(b), a, a.minimum(b)))


@lower(aten.heaviside.default)
def heaviside(x: Any, values: Any) -> Any:
    return xp.where(x.eq(0), values.astype(x.dtype), (x > 0).astype(x.dtype))


@lower(aten.isposinf.default)
def isposinf(x: Any) -> Any:
    return x.eq(math.inf) if is_float(x) else xp.zeros(*x.shape, dtype="bool")


@lower(aten.isneginf.default)
def isneginf(x: Any) -> Any:
    return x.eq(-math.inf) if is_float(x) else xp.zeros(*x.shape, dtype="bool")


@lower(aten.logical_xor.default)
def logical_xor(a: Any, b: Any) -> Any:
    return a.astype("bool").ne(b.astype("bool"))


@lower(aten.logit.default)
@elementwise_in_float
def logit(x: Any, eps: Any = None) -> Any:
    x = to_float(x)
    if eps is not None:
        # torch's order: below eps is eps, else above 1 - eps is 1 - eps (for eps > 0.5 too).
        x = xp.where(x < eps, eps, xp.where(x > 1.0 - eps, 1.0 - eps, x)).astype(x.dtype)
    return (x / (1.0 - x)).log()


_FINFO = {"float32": (3.4028234663852886e38, 1.1754943508222875e-38), "float64": (1.7976931348623157e308, 0.0),
          "float16": (65504.0, 0.0), "bfloat16": (3.3895313892515355e38, 0.0)}


@lower(aten.nan_to_num.default)
def nan_to_num(x: Any, nan: Any = None, posinf: Any = None, neginf: Any = None) -> Any:
    if not is_float(x):
        return x.clone()
    big = _FINFO[x.dtype][0]
    x = xp.where(isnan(x), xp.full((), 0.0 if nan is None else nan, dtype=x.dtype), x)
    x = xp.where(x.eq(math.inf), xp.full((), big if posinf is None else posinf, dtype=x.dtype), x)
    return xp.where(x.eq(-math.inf), xp.full((), -big if neginf is None else neginf, dtype=x.dtype), x)


@lower(aten.sinc.default)
@elementwise_in_float
def sinc(x: Any) -> Any:
    x = to_float(x)
    px = x * math.pi
    return xp.where(x.eq(0), xp.ones_like(x), px.sin() / xp.where(x.eq(0), xp.ones_like(x), px))
