"""Sorting: the engine's stable sort, and what is built from it (``topk``, ``kthvalue``,
``median``, ``argsort``, ``nonzero``, ``unique``).
"""

from __future__ import annotations

import math
from typing import Any

import xlaprof as xp

from .common import Unsupported, aten, is_float, read_size
from .cumulative import cumsum
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
def nonzero(x: Any, op: str = "aten::nonzero", what: str = "the count of its nonzero entries") -> Any:
    """The indices of the nonzero elements, row-major. Their count is the result's length: data
    that the graph's shape needs, read to the host here (a sync, as on CUDA; the profiler hears
    of it as ``op``'s size read); the indices themselves come from the device (a stable sort puts
    the nonzero positions first, in order), so only one number crosses, not the tensor."""
    flat = x.reshape(-1)
    total = flat.shape[0]
    mask = flat.ne(0)
    count = read_size(mask.astype("int64").sum(), op, what)
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


def _runs(values: Any) -> Any:
    """For sorted (or consecutive) flat ``values``: which run of equal values each is in, and
    how many runs there are, a count read to the host (the result's length, as on CUDA)."""
    n = values.shape[0]
    starts = xp.cat([xp.ones(1, dtype="bool"), values[1:] != values[:-1]], 0) if n else xp.zeros(0, dtype="bool")
    run = cumsum(starts.astype("int64"), 0) - 1 if n else xp.zeros(0, dtype="int64")
    count = read_size(starts.astype("int64").sum(), "aten::unique", "the count of its distinct values") if n else 0
    return run, count


def _unique_of(flat: Any, order: Any, inverse_shape: Any, return_inverse: bool, return_counts: bool) -> Any:
    """``flat`` in ``order`` (a permutation that brings equal values together), collapsed to one
    value a run; each element's run (shaped ``inverse_shape``) and each run's length where asked,
    empty otherwise, as torch's kernels return them."""
    values = flat.index_select(0, order) if order is not None else flat
    run, count = _runs(values)
    n = values.shape[0]
    if count == 0:
        out = xp.zeros(0, dtype=flat.dtype)
    else:
        out = xp.zeros(count, dtype=flat.dtype).index_reduce(0, run, values, "amax", include_self=False)
    if return_inverse:
        placed = run if order is None else xp.zeros(n, dtype="int64").index_add(0, order, run)
        inverse = placed.reshape(*inverse_shape)
    else:
        inverse = xp.zeros(0, dtype="int64")
    counts = (xp.zeros(count, dtype="int64").index_add(0, run, xp.ones(n, dtype="int64"))
              if return_counts else xp.zeros(0, dtype="int64"))
    return out, inverse, counts


@lower(aten._unique2.default)
def unique2(x: Any, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False) -> Any:
    """``torch.unique``: the distinct values, in ascending order (CUDA's answer to ``sorted=False``
    too), by a stable sort."""
    flat = x.reshape(-1)
    _, order = flat.sort(0, False) if flat.shape[0] else (flat, xp.zeros(0, dtype="int64"))
    return _unique_of(flat, order, x.shape, return_inverse, return_counts)


@lower(aten._unique.default)
def unique(x: Any, sorted: bool = True, return_inverse: bool = False) -> Any:
    out, inverse, _ = unique2(x, sorted, return_inverse, False)
    return out, inverse


@lower(aten.unique_consecutive.default)
def unique_consecutive(x: Any, return_inverse: bool = False, return_counts: bool = False, dim: Any = None) -> Any:
    if dim is not None:
        raise Unsupported("unique_consecutive along a dim")
    return _unique_of(x.reshape(-1), None, x.shape, return_inverse, return_counts)
