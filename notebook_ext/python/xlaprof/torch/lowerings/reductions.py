"""Reductions: sums, means, extrema, variances, norms, products, softmax, and whole-tensor tests.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import xlaprof as xp

from .._device import engine_dtype
from .._tensor import LazyTensor, value
from .common import (Unsupported, aten, dt, half_in_float, is_complex, is_float, reduce_product, reduction_dims,
                     to_float)
from .registry import declare, lower, lower_raw


@lower(aten.renorm.default, autocast="float32")
@half_in_float
def renorm(x: Any, p: float, dim: int, maxnorm: float) -> Any:
    # Each slice along `dim` scaled down to a p-norm of at most maxnorm (torch's 1e-7 guard).
    d = dim % x.ndim
    others = [k for k in range(x.ndim) if k != d]
    if p == math.inf:
        norms = x.abs().amax(others, keepdim=True)
    else:
        norms = (x.abs() ** p).sum(others, keepdim=True) ** (1.0 / p)
    return x * xp.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)


@lower(aten.sum.dim_IntList, complex_safe=True, autocast="float32")
def sum_dim(x: Any, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Any:
    return x.sum(reduction_dims(dim, x.ndim), keepdim=keepdim, dtype=_sum_dtype(x, dtype))


@lower(aten.sum.default, complex_safe=True, autocast="float32")
def sum_all(x: Any, dtype: Any = None) -> Any:
    return x.sum(dtype=_sum_dtype(x, dtype))


def _sum_dtype(x: Any, dtype: Any) -> Optional[str]:
    if dtype is not None:
        return engine_dtype(dtype)
    # torch sums integers and bools as int64.
    return "int64" if not is_float(x) and not is_complex(x) else None


@lower(aten.mean.dim)
def mean_dim(x: Any, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Any:
    return x.mean(reduction_dims(dim, x.ndim), keepdim=keepdim, dtype=dt(dtype))


@lower(aten.mean.default)
def mean_all(x: Any, dtype: Any = None) -> Any:
    return x.mean(dtype=dt(dtype))


@lower(aten.amax.default)
def amax(x: Any, dim: Any = (), keepdim: bool = False) -> Any:
    return x.amax(reduction_dims(dim, x.ndim), keepdim=keepdim)


@lower(aten.amin.default)
def amin(x: Any, dim: Any = (), keepdim: bool = False) -> Any:
    return x.amin(reduction_dims(dim, x.ndim), keepdim=keepdim)


@lower(aten.max.default)
def max_all(x: Any) -> Any:
    return x.max()


@lower(aten.min.default)
def min_all(x: Any) -> Any:
    return x.min()


@lower(aten.max.dim)
def max_dim(x: Any, dim: int, keepdim: bool = False) -> Any:
    values, indices = x.max(dim, keepdim)
    return values, indices


@lower(aten.min.dim)
def min_dim(x: Any, dim: int, keepdim: bool = False) -> Any:
    values, indices = x.min(dim, keepdim)
    return values, indices


@lower(aten.argmax.default)
def argmax(x: Any, dim: Optional[int] = None, keepdim: bool = False) -> Any:
    return x.argmax(dim, keepdim)


@lower(aten.argmin.default)
def argmin(x: Any, dim: Optional[int] = None, keepdim: bool = False) -> Any:
    return x.argmin(dim, keepdim)


@lower(aten.var.correction)
@half_in_float
def var(x: Any, dim: Any = None, correction: Any = None, keepdim: bool = False) -> Any:
    correction = 1 if correction is None else correction
    axes = reduction_dims(dim, x.ndim)
    if float(correction).is_integer():
        return x.var(axes, correction=int(correction), keepdim=keepdim)
    # A fractional correction (torch allows any): the squared deviations over n - correction.
    n = 1
    for a in axes:
        n *= x.shape[a]
    centered = x - x.mean(axes, keepdim=True)
    return (centered * centered).sum(axes, keepdim=keepdim) / max(n - correction, 0.0)


@lower(aten.std.correction)
@half_in_float
def std(x: Any, dim: Any = None, correction: Any = None, keepdim: bool = False) -> Any:
    return var(x, dim, correction, keepdim).sqrt()


@lower(aten.logsumexp.default, autocast="float32")
@half_in_float
def logsumexp(x: Any, dim: Any, keepdim: bool = False) -> Any:
    return to_float(x).logsumexp(reduction_dims(dim, x.ndim), keepdim)


@lower(aten.any.default, aten._is_any_true.default)
def any_all(x: Any) -> Any:
    return x.ne(0).astype("int32").sum() > 0


@lower(aten.any.dim, aten.any.dims)
def any_dim(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return x.ne(0).astype("int32").sum(reduction_dims(dim, x.ndim), keepdim=keepdim) > 0


@lower(aten.all.default, aten._is_all_true.default)
def all_all(x: Any) -> Any:
    return x.eq(0).astype("int32").sum() == 0


@lower(aten.all.dim, aten.all.dims)
def all_dim(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return x.eq(0).astype("int32").sum(reduction_dims(dim, x.ndim), keepdim=keepdim) == 0


@lower(aten._softmax.default)
def softmax(x: Any, dim: int, half_to_float: bool = False) -> Any:
    return _in_float(x, lambda f: f.softmax(dim), half_to_float)


@lower(aten._log_softmax.default)
def log_softmax(x: Any, dim: int, half_to_float: bool = False) -> Any:
    return _in_float(x, lambda f: f.log_softmax(dim), half_to_float)


def _in_float(x: Any, fn: Any, half_to_float: bool) -> Any:
    """``fn(x)``, a half-precision ``x`` computed in float32 and rounded back once (unless
    ``half_to_float``: float32 is then the result's dtype), as torch's kernels compute it."""
    if x.dtype not in ("bfloat16", "float16"):
        return fn(x)
    out = fn(x.astype("float32"))
    return out if half_to_float else out.astype(x.dtype)


@lower(aten._softmax_backward_data.default)
@half_in_float
def softmax_backward(grad: Any, out: Any, dim: int, input_dtype: Any) -> Any:
    return out * (grad - _sum_along(grad * out, dim))


@lower(aten._log_softmax_backward_data.default)
@half_in_float
def log_softmax_backward(grad: Any, out: Any, dim: int, input_dtype: Any) -> Any:
    return grad - out.exp() * _sum_along(grad, dim)


def _sum_along(x: Any, dim: int) -> Any:
    """The sum along the softmax's dim, kept (a 0-d tensor, whose softmax torch allows, is its
    own sum)."""
    return x.sum([dim % x.ndim], keepdim=True) if x.ndim else x


@lower(aten.linalg_vector_norm.default, autocast="float32")
@half_in_float
def vector_norm(x: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Any:
    if dtype is not None:
        x = x.astype(engine_dtype(dtype))
    axes = reduction_dims(dim, x.ndim)
    a = x.abs()
    if ord == 2:
        return (a * a).sum(axes, keepdim=keepdim).sqrt()
    if ord == 1:
        return a.sum(axes, keepdim=keepdim)
    if ord == math.inf:
        return a.amax(axes, keepdim=keepdim)
    if ord == -math.inf:
        return a.amin(axes, keepdim=keepdim)
    if ord == 0:
        return a.ne(0).astype(x.dtype).sum(axes, keepdim=keepdim)
    return a.pow(ord).sum(axes, keepdim=keepdim).pow(1.0 / ord)


@lower(aten.var_mean.correction)
@half_in_float
def var_mean(x: Any, dim: Any = None, correction: Any = None, keepdim: bool = False) -> Any:
    return var(x, dim, correction, keepdim), x.mean(reduction_dims(dim, x.ndim), keepdim=keepdim)


@lower(aten.std_mean.correction)
@half_in_float
def std_mean(x: Any, dim: Any = None, correction: Any = None, keepdim: bool = False) -> Any:
    return std(x, dim, correction, keepdim), x.mean(reduction_dims(dim, x.ndim), keepdim=keepdim)


@lower(aten.allclose.default)
def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Any:
    close = ((a - b).abs() <= atol + rtol * b.abs()) | (a == b)
    if equal_nan:
        close = close | ((a != a) & (b != b))
    return close.logical_not().astype("int64").sum().item() == 0


@lower_raw(aten.equal.default)
def equal(a: LazyTensor, b: Any) -> bool:
    # torch.equal answers a Python bool: a read of one value, as on any device.
    if tuple(a.shape) != tuple(b.shape):
        return False
    same = all_all(value(a).eq(value(b) if isinstance(b, LazyTensor) else b))
    return bool(LazyTensor(same).item())


@lower(aten.norm.ScalarOpt_dim, aten.norm.Scalar)
def norm(x: Any, p: Any = 2, dim: Any = None, keepdim: bool = False) -> Any:
    return vector_norm(x, 2 if p is None else p, dim, keepdim)


@lower(aten.count_nonzero.dim_IntList, aten.count_nonzero.default)
def count_nonzero(x: Any, dim: Any = None) -> Any:
    return x.ne(0).astype("int64").sum(reduction_dims(dim, x.ndim))


@lower(aten.prod.default, autocast="float32")
@half_in_float
def prod_all(x: Any, dtype: Any = None) -> Any:
    if dtype is not None:
        x = x.astype(engine_dtype(dtype))
    if not is_float(x):
        raise Unsupported("prod of integers (exact products)")
    return reduce_product(x, list(range(x.ndim)), False)


@lower(aten.prod.dim_int, autocast="float32")
@half_in_float
def prod_dim(x: Any, dim: int, keepdim: bool = False, dtype: Any = None) -> Any:
    if dtype is not None:
        x = x.astype(engine_dtype(dtype))
    if not is_float(x):
        raise Unsupported("prod of integers (exact products)")
    if x.ndim == 0:
        return x.clone()
    return reduce_product(x, [dim % x.ndim], keepdim)


# torch's autocast lists for CUDA (aten/src/ATen/autocast_mode.cpp) name these ops, which torch
# decomposes into the ones lowered here. (`softmax` and `log_softmax`: torch runs them with
# `dtype=torch.float32` when none is given: the same result.)
declare("frobenius_norm", "nuclear_norm", "linalg_matrix_norm", "softmax", "log_softmax", autocast="float32")
