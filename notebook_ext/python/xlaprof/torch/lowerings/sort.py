"""Sorting: the engine's stable sort, and what is built from it (``topk``, ``kthvalue``,
``median``, ``argsort``, ``nonzero``).
"""

from __future__ import annotations

import math
from typing import Any

import xlaprof as xp

from .common import Unsupported, aten, is_float
from .elementwise import isnan
from .registry import lower


@lower(aten.sort.default)
def sort(x: Any, dim: int = -1, descending: bool = False) -> Any:
    values, indices = x.sort(dim, descending)
    return values, indices


@lower(aten.sort.stable)
def sort_stable(x: Any, stable: Any = None, dim: int = -1, descending: bool = False) -> Any:
    return sort(x, dim, descending)


@lower(aten.topk.default)
def topk(x: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
    if x.ndim == 0:
        return x.clone(), xp.zeros((), dtype="int64")
    values, indices = x.sort(dim, largest)
    d = dim % x.ndim
    keep = tuple(slice(None) if i != d else slice(0, k) for i in range(x.ndim))
    return values[keep], indices[keep]


@lower(aten.kthvalue.default)
def kthvalue(x: Any, k: int, dim: int = -1, keepdim: bool = False) -> Any:
    if x.ndim == 0:
        return x.clone(), xp.zeros((), dtype="int64")
    values, indices = x.sort(dim, False)
    d = dim % x.ndim
    pick = tuple(slice(None) if i != d else slice(k - 1, k) for i in range(x.ndim))
    v, i = values[pick], indices[pick]
    return (v, i) if keepdim else (v.squeeze(d), i.squeeze(d))


@lower(aten.median.default)
def median_all(x: Any) -> Any:
    flat = x.reshape(-1)
    n = flat.shape[0]
    values, _ = flat.sort(0, False)
    # torch's median is the lower of the two middle values; NaN (sorted last) wins.
    nan_any = isnan(flat).astype("int32").sum() > 0 if is_float(x) else None
    mid = values[(n - 1) // 2]
    return xp.where(nan_any, xp.full((), math.nan, dtype=x.dtype), mid) if nan_any is not None else mid


@lower(aten.median.dim)
def median_dim(x: Any, dim: int, keepdim: bool = False) -> Any:
    if x.ndim == 0:
        return x.clone(), xp.zeros((), dtype="int64")
    d = dim % x.ndim
    n = x.shape[d]
    if is_float(x):
        raise Unsupported("median along a dim of floats: NaN picks its own index")
    return kthvalue(x, (n - 1) // 2 + 1, d, keepdim)


@lower(aten.argsort.default, aten.argsort.stable)
def argsort(x: Any, *args: Any, **kwargs: Any) -> Any:
    dim = kwargs.get("dim", args[0] if args and not isinstance(args[0], bool) else -1)
    descending = kwargs.get("descending", args[1] if len(args) > 1 else False)
    return x.sort(dim, descending)[1]


@lower(aten.nonzero.default)
def nonzero(x: Any) -> Any:
    """The indices of the nonzero elements, row-major. Their count is the result's length: data
    that the graph's shape needs, read to the host here (a sync, as on CUDA, where the profiler
    reports it as one); the indices themselves come from the device (a stable sort puts the
    nonzero positions first, in order), so only one number crosses, not the tensor."""
    flat = x.reshape(-1)
    total = flat.shape[0]
    mask = flat.ne(0)
    count = int(mask.astype("int64").sum().item())
    if x.ndim == 0 or total == 0 or count == 0:
        return xp.zeros((count, x.ndim), dtype="int64")
    positions = xp.arange(0, total, 1, dtype="int64")
    first, _ = xp.where(mask, positions, positions + total).sort(0, False)
    found = first[0:count]
    coordinates, stride = [], 1
    for size in reversed(x.shape):
        coordinates.insert(0, (found // stride) % size)
        stride *= size
    return xp.stack(coordinates, 1)
