"""Complex tensors: the ops lowered for them, and which lowerings take them at all.

The engine has complex64 and complex128 with the arithmetic StableHLO defines for them and XLA's
FFT. Most lowerings were written for real numbers (they cast, compare, take maxima), so the
dispatcher sends an op with a complex argument to its lowering only if the op is in
``registry.COMPLEX_SAFE`` (its lowering's ``complex_safe=True``); any other goes through torch's
decompositions and, failing those, to the CPU, counted like every fallback. ``view_as_real`` and
``view_as_complex`` are views: a write through one reaches the other.
"""

from __future__ import annotations

import math
from typing import Any, List, Sequence

import xlaprof as xp

from .._tensor import LazyTensor, make_view
from .common import aten, is_complex
from .elementwise import angle as _angle_of_reals
from .registry import declare, lower, lower_raw


def _pairs(x: Any) -> Any:
    """``[..., 2]``: each complex value's real and imaginary parts."""
    return xp.stack([x._real(), x._imag()], x.ndim)


def _joined(x: Any) -> Any:
    """Complex values from ``[..., 2]`` pairs."""
    return x[..., 0]._complex(x[..., 1])


@lower_raw(aten.view_as_real.default, complex_safe=True)
def view_as_real(t: LazyTensor) -> LazyTensor:
    return make_view(t, _pairs, lambda v, nv: _joined(nv).astype(v.dtype))


@lower_raw(aten.view_as_complex.default, complex_safe=True)
def view_as_complex(t: LazyTensor) -> LazyTensor:
    return make_view(t, _joined, lambda v, nv: _pairs(nv).astype(v.dtype))


@lower(aten.complex.default, complex_safe=True)
def complex_(re: Any, im: Any) -> Any:
    return re._complex(im)


@lower(aten.polar.default, complex_safe=True)
def polar(magnitude: Any, angle: Any) -> Any:
    return (magnitude * angle.cos())._complex(magnitude * angle.sin())


@lower(aten._conj_physical.default, aten.conj_physical.default, complex_safe=True)
def conj_physical(x: Any) -> Any:
    return x._real()._complex(-x._imag()) if is_complex(x) else x.clone()


@lower_raw(aten._conj.default, complex_safe=True)
def conj(t: LazyTensor) -> LazyTensor:
    return make_view(t, conj_physical, lambda v, nv: conj_physical(nv))


@lower(aten.angle.default, complex_safe=True)
def angle(x: Any) -> Any:
    if is_complex(x):
        return x._imag().atan2(x._real())
    return _angle_of_reals(x)


# ---- Fourier transforms ---------------------------------------------------------------------------


def _scale(x: Any, sizes: Sequence[int], normalization: int, inverse_by_xla: bool) -> Any:
    """torch's ``normalization`` (0: none, 1: by 1/sqrt(n), 2: by 1/n) of a transform over
    ``sizes``; XLA's inverse transforms already divide by n."""
    n = 1
    for s in sizes:
        n *= s
    factor = float(n) if inverse_by_xla else 1.0
    if normalization == 1:
        factor /= math.sqrt(n)
    elif normalization == 2:
        factor /= n
    return x if factor == 1.0 else x * factor


def _to_end(x: Any, dims: Sequence[int]) -> Any:
    rest = [d for d in range(x.ndim) if d not in dims]
    return x.permute(*rest, *dims), rest


def _from_end(x: Any, dims: Sequence[int], rest: List[int]) -> Any:
    order = list(rest) + list(dims)
    inverse = [order.index(d) for d in range(len(order))]
    return x.permute(*inverse)


def _chunks(dims: Sequence[int]) -> List[List[int]]:
    """At most three dims at a time, the last ones last (XLA's FFT takes one to three)."""
    dims = list(dims)
    out = []
    while dims:
        out.insert(0, dims[-3:])
        dims = dims[:-3]
    return out


def _c2c(x: Any, dims: Sequence[int], inverse: bool) -> Any:
    moved, rest = _to_end(x, dims)
    k = len(dims)
    for chunk in _chunks(list(range(moved.ndim - k, moved.ndim))):
        # Bring this chunk's dims last, transform, and put them back.
        others = [d for d in range(moved.ndim) if d not in chunk]
        perm = others + chunk
        inv = [perm.index(d) for d in range(moved.ndim)]
        t = moved.permute(*perm)
        t = t._fft("IFFT" if inverse else "FFT", [t.shape[d] for d in range(t.ndim - len(chunk), t.ndim)])
        moved = t.permute(*inv)
    return _from_end(moved, dims, rest)


@lower(aten._fft_c2c.default, complex_safe=True)
def fft_c2c(x: Any, dim: Sequence[int], normalization: int, forward: bool) -> Any:
    dims = [d % x.ndim for d in dim]
    out = _c2c(x, dims, not forward)
    return _scale(out, [x.shape[d] for d in dims], normalization, not forward)


@lower(aten._fft_r2c.default, complex_safe=True)
def fft_r2c(x: Any, dim: Sequence[int], normalization: int, onesided: bool) -> Any:
    dims = [d % x.ndim for d in dim]
    sizes = [x.shape[d] for d in dims]
    real = x if x.dtype in ("float32", "float64") else x.astype("float32")
    if not onesided:
        full = _c2c(real._complex(xp.zeros_like(real)), dims, False)
        return _scale(full, sizes, normalization, False)
    # The last dim real to complex (halved), then the others complex to complex.
    moved, rest = _to_end(real, dims)
    half = moved._fft("RFFT", [moved.shape[-1]])
    out = _from_end(half, dims, rest)
    if len(dims) > 1:
        out = _c2c(out, dims[:-1], False)
    return _scale(out, sizes, normalization, False)


@lower(aten._fft_c2r.default, complex_safe=True)
def fft_c2r(x: Any, dim: Sequence[int], normalization: int, last_dim_size: int) -> Any:
    dims = [d % x.ndim for d in dim]
    out = _c2c(x, dims[:-1], True) if len(dims) > 1 else x
    moved, rest = _to_end(out, dims[-1:])
    real = moved._fft("IRFFT", [last_dim_size])
    result = _from_end(real, dims[-1:], rest)
    sizes = [x.shape[d] for d in dims[:-1]] + [last_dim_size]
    return _scale(result, sizes, normalization, True)


declare(aten.real, aten.imag, complex_safe=True)
