"""Counting, ranking, distances and sampling: ``histc``, ``mode``, ``nanmedian``, ``searchsorted`` with a
sorter or batched boundaries, ``cdist`` / ``pdist``, ``multinomial`` (the Gumbel-max trick on the
engine's random stream), ``normal`` with a tensor mean, ``randint_like``, and ``_trilinear``
(``nn.functional.bilinear``)."""

from __future__ import annotations

import math
from typing import Any, Sequence

import xlaprof as xp

from .._device import engine_dtype
from .common import Unsupported, aten, is_float, read_size
from .cumulative import cummax, cummin
from .elementwise import isnan
from .indexing import gather
from .random import random_integers
from .reductions import vector_norm
from .registry import declare, lower


@lower(aten.histc.default)
def histc(x: Any, bins: int = 100, min: Any = 0, max: Any = 0) -> Any:  # noqa: A002 (torch's names)
    """Counts of the values in ``bins`` equal bins over [min, max] (the data's own range when
    both are 0; one wider on each side when that range is a point), values outside left out."""
    flat = x.reshape(-1)
    lo, hi = float(min), float(max)
    if lo == hi:
        if flat.shape[0] == 0:
            lo, hi = lo - 1.0, hi + 1.0
            lo_t, hi_t = xp.full((), lo, dtype=x.dtype), xp.full((), hi, dtype=x.dtype)
        else:
            lo_t, hi_t = flat.amin(), flat.amax()
            point = lo_t.eq(hi_t)
            lo_t, hi_t = xp.where(point, lo_t - 1.0, lo_t), xp.where(point, hi_t + 1.0, hi_t)
    else:
        lo_t, hi_t = xp.full((), lo, dtype=x.dtype), xp.full((), hi, dtype=x.dtype)
    inside = (flat >= lo_t) & (flat <= hi_t) & ~isnan(flat)
    pos = ((flat - lo_t) * bins / (hi_t - lo_t)).floor().astype("int64").clamp(0, bins - 1)
    return xp.zeros(bins, dtype=x.dtype).index_add(0, pos, inside.astype(x.dtype))


@lower(aten.nanmedian.default)
def nanmedian_all(x: Any) -> Any:
    return _nanmedian(x.reshape(-1), 0, False)[0]


@lower(aten.nanmedian.dim)
def nanmedian_dim(x: Any, dim: int, keepdim: bool = False) -> Any:
    if x.ndim == 0:
        return x.clone(), xp.zeros((), dtype="int64")
    return _nanmedian(x, dim % x.ndim, keepdim)


def _nanmedian(x: Any, d: int, keepdim: bool) -> Any:
    """The lower median of the values that are not NaN (NaN where all are), and its index: the
    sort puts NaN last, so the median of k numbers is at (k - 1) // 2."""
    values, indices = x.sort(d, False)
    k = (~isnan(x)).astype("int64").sum([d], keepdim=True) if is_float(x) \
        else xp.full([1 if i == d else n for i, n in enumerate(x.shape)], x.shape[d], dtype="int64")
    at = ((k - 1) // 2).clamp(0, None)
    pick = xp.arange(0, x.shape[d], 1, dtype="int64").reshape(
        *[x.shape[d] if i == d else 1 for i in range(x.ndim)]) == at
    v = xp.where(pick, values, 0).sum([d], keepdim=True)
    i = xp.where(pick, indices, 0).sum([d], keepdim=True)
    v = xp.where(k == 0, math.nan, v).astype(x.dtype) if is_float(x) else v
    return (v, i) if keepdim else (v.squeeze(d), i.squeeze(d))


@lower(aten.searchsorted.Tensor)
def searchsorted(boundaries: Any, values: Any, out_int32: bool = False, right: bool = False,
                 side: Any = None, sorter: Any = None) -> Any:
    """Where each value would go in its row of sorted boundaries: the count of boundaries below
    it (or at most it, ``right``)."""
    if sorter is not None:
        boundaries = _take_last(boundaries, sorter)
    right = right or side == "right"
    if boundaries.ndim == 1:
        b = boundaries
        v = values.unsqueeze(-1)
    else:
        if list(boundaries.shape[:-1]) != list(values.shape[:-1]):
            raise Unsupported("searchsorted with boundaries of other leading dims")
        b = boundaries.unsqueeze(-2)   # [..., 1, m]
        v = values.unsqueeze(-1)       # [..., n, 1]
    hit = (b <= v) if right else (b < v)
    count = hit.astype("int64").sum([hit.ndim - 1])
    return count.astype("int32" if out_int32 else "int64")


def _take_last(x: Any, index: Any) -> Any:
    """``x`` gathered along its last dim by ``index`` (same leading dims)."""
    return gather(x, x.ndim - 1, index)


@lower(aten.bincount.default)
def bincount(x: Any, weights: Any = None, minlength: int = 0) -> Any:
    """How often each value of ``x`` occurs (or its ``weights`` summed): its length is one past
    the largest value, read to the host (a sync, as on CUDA). The dtype is the CPU kernel's:
    int64 counts, float32 weights kept, other weights summed in float64."""
    if x.ndim != 1:
        raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs, not {x.ndim}-d")
    n = x.shape[0]
    size = max(read_size(x.amax(), "aten::bincount", "its input's largest value") + 1, minlength) if n else minlength
    idx = x.astype("int64")
    if weights is None:
        return xp.zeros(size, dtype="int64").index_add(0, idx, xp.ones(n, dtype="int64"))
    dtype = "float32" if weights.dtype == "float32" else "float64"
    return xp.zeros(size, dtype=dtype).index_add(0, idx, weights.astype(dtype))


@lower(aten._cdist_forward.default)
def cdist(x1: Any, x2: Any, p: float, compute_mode: Any = None) -> Any:
    if p == 2 and compute_mode != 2:
        # torch's own way for Euclidean distances (unless told not to): |a|^2 + |b|^2 - 2 a.b,
        # one matrix product instead of a [P, R, M] array of differences.
        return _euclid(x1, x2)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)   # [..., P, R, M]
    return vector_norm(diff, p, [diff.ndim - 1])


def _euclid(x1: Any, x2: Any) -> Any:
    n1 = (x1 * x1).sum([x1.ndim - 1], keepdim=True)               # [..., P, 1]
    n2 = (x2 * x2).sum([x2.ndim - 1], keepdim=True).transpose(-2, -1)   # [..., 1, R]
    return (n1 + n2 - (x1 @ x2.transpose(-2, -1)) * 2.0).clamp(0.0, None).sqrt()


@lower(aten._cdist_backward.default)
def cdist_backward(grad: Any, x1: Any, x2: Any, p: float, dist: Any) -> Any:
    """The gradient for ``x1`` (autograd asks again with the operands swapped for ``x2``), as
    torch's kernel computes it: each difference's share of its distance, 0 where a distance is 0."""
    g = _distance_grad(grad, x1.unsqueeze(-2) - x2.unsqueeze(-3), dist.unsqueeze(-1), p)
    g = g.sum([g.ndim - 2])
    # Batch dims broadcast from x2's: summed back to x1's shape.
    extra = g.ndim - x1.ndim
    if extra:
        g = g.sum(list(range(extra)))
    ones = [d for d in range(x1.ndim - 2) if x1.shape[d] == 1 and g.shape[d] != 1]
    return g.sum(ones, keepdim=True) if ones else g


def _distance_grad(grad: Any, diff: Any, dist: Any, p: float) -> Any:
    """``grad * d dist / d diff`` for the p-norms ``dist`` of differences ``diff`` ([..., M] with
    ``dist`` and ``grad`` broadcast over M)."""
    g = grad.unsqueeze(-1) if grad.ndim < diff.ndim else grad
    zero = xp.zeros_like(diff)
    if p == 0:
        return zero
    if p == 1:
        return g * diff.sign()
    if p == math.inf:
        return xp.where(diff.abs() == dist, g * diff.sign(), zero)
    if p == 2:
        share = diff / dist
    else:
        share = diff * diff.abs().pow(p - 2) / dist.pow(p - 1)
        if p < 1:
            share = xp.where(diff == 0, zero, share)
    return xp.where(dist == 0, zero, g * share)


def _pairs(n: int) -> Any:
    """``row * n + col`` of each pair ``row < col``, row by row (``pdist``'s order)."""
    i = xp.arange(0, n, 1, dtype="int64").reshape(n, 1)
    count = n * (n - 1) // 2
    slots = xp.arange(0, count, 1, dtype="int64")
    # Pair k is (i, j) with i the largest row whose first pair index is at most k.
    firsts = i.reshape(-1) * (2 * n - i.reshape(-1) - 1) // 2                    # [n]
    row = (firsts.reshape(1, n) <= slots.reshape(count, 1)).astype("int64").sum([1]) - 1
    col = slots - firsts.index_select(0, row) + row + 1
    return row * n + col


@lower(aten._pdist_forward.default)
def pdist(x: Any, p: float = 2.0) -> Any:
    n = x.shape[0]
    if n < 2:
        return xp.zeros(0, dtype=x.dtype)
    full = (_euclid(x, x) if p == 2 else vector_norm(x.unsqueeze(1) - x.unsqueeze(0), p, [2])).reshape(-1)
    return full.index_select(0, _pairs(n))


@lower(aten._pdist_backward.default)
def pdist_backward(grad: Any, x: Any, p: float, dist: Any) -> Any:
    """Each pair's gradient reaches both its rows: the pairs' gradients and distances laid out as
    symmetric [n, n] matrices (0 on the diagonal), then ``cdist``'s gradient of ``x`` against itself."""
    n = x.shape[0]
    if n < 2:
        return xp.zeros_like(x)
    at = _pairs(n)
    upper = xp.zeros(n * n, dtype=grad.dtype).index_add(0, at, grad).reshape(n, n)
    distances = xp.zeros(n * n, dtype=dist.dtype).index_add(0, at, dist).reshape(n, n)
    full_grad, full_dist = upper + upper.transpose(0, 1), distances + distances.transpose(0, 1)
    return _distance_grad(full_grad, x.unsqueeze(1) - x.unsqueeze(0), full_dist.unsqueeze(-1), p).sum([1])


@lower(aten.multinomial.default)
def multinomial(probs: Any, num_samples: int, replacement: bool = False, generator: Any = None) -> Any:
    """Samples by the Gumbel-max trick: ``argmax(log p + g)`` with standard Gumbel noise ``g``
    draws index i with probability p_i; the top ``num_samples`` of one draw sample without
    replacement."""
    logp = probs.astype("float32").log()
    n = probs.shape[-1]
    lead = list(probs.shape[:-1])
    if replacement:
        u = xp.rand(*lead, num_samples, n).clamp(1e-20, 1.0)
        scores = logp.unsqueeze(-2) - (-(u.log())).log()
        return scores.argmax(-1).astype("int64")
    u = xp.rand(*lead, n).clamp(1e-20, 1.0)
    scores = logp - (-(u.log())).log()
    _, order = scores.sort(-1, True)
    keep = tuple([slice(None)] * len(lead) + [slice(0, num_samples)])
    return order[keep]


@lower(aten.normal.Tensor_float)
def normal_tensor_float(mean: Any, std: float = 1.0, generator: Any = None) -> Any:
    return xp.randn(*mean.shape, dtype=mean.dtype) * std + mean


@lower(aten.normal.float_Tensor)
def normal_float_tensor(mean: float, std: Any, generator: Any = None) -> Any:
    return xp.randn(*std.shape, dtype=std.dtype) * std + mean


@lower(aten.randint_like.default)
def randint_like(x: Any, high: int, dtype: Any = None, layout: Any = None, device: Any = None,
                 pin_memory: Any = None, memory_format: Any = None) -> Any:
    return randint_like_low(x, 0, high, dtype)


@lower(aten.randint_like.low_dtype)
def randint_like_low(x: Any, low: int, high: int, dtype: Any = None, layout: Any = None,
                     device: Any = None, pin_memory: Any = None, memory_format: Any = None) -> Any:
    return random_integers(x.shape, low, high, engine_dtype(dtype) if dtype is not None else x.dtype)


@lower(aten._trilinear.default)
def trilinear(i1: Any, i2: Any, i3: Any, expand1: Sequence[int], expand2: Sequence[int],
              expand3: Sequence[int], sumdim: Sequence[int], unroll_dim: int = 1) -> Any:
    """Each input with size-1 dims inserted at its ``expand`` positions, multiplied, summed over
    ``sumdim`` (what ``nn.functional.bilinear`` asks for)."""
    def spread(t: Any, expand: Sequence[int]) -> Any:
        for d in sorted(expand):
            t = t.unsqueeze(d)
        return t

    prod = spread(i1, expand1) * spread(i2, expand2) * spread(i3, expand3)
    return prod.sum(list(sumdim)) if sumdim else prod


@lower(aten.bucketize.Tensor)
def bucketize(values: Any, boundaries: Any, out_int32: bool = False, right: bool = False) -> Any:
    return searchsorted(boundaries, values, out_int32, right)


# torch's autocast list for CUDA (aten/src/ATen/autocast_mode.cpp) names these ops, which torch
# decomposes into the ones lowered here.
declare("dist", "pdist", "cdist", autocast="float32")


@lower(aten.mode.default)
def mode(x: Any, dim: int = -1, keepdim: bool = False) -> Any:
    """The most frequent value along ``dim`` and the index of its last occurrence, as torch's CPU
    kernel has them (of equally frequent values, the smallest), from a stable sort: each sorted
    value's run of equals, its length, the longest first run. NaNs count as one value here;
    torch's kernel answers for them as its sort of NaNs happens to fall."""
    if x.ndim == 0:
        return x.clone(), xp.zeros((), dtype="int64")
    d = dim % x.ndim
    last = x.ndim - 1
    values, order = x.transpose(d, last).sort(last, False)
    n = values.shape[last]
    same = values[..., 1:] == values[..., :-1]
    if is_float(x):
        same = same | (isnan(values[..., 1:]) & isnan(values[..., :-1]))
    edge = xp.ones(*values.shape[:-1], 1, dtype="bool")
    starts, ends = xp.cat([edge, ~same], last), xp.cat([~same, edge], last)
    at = xp.arange(0, n, 1, dtype="int64").expand(*values.shape)
    first = cummax(xp.where(starts, at, 0), last)[0]
    final = cummin(xp.where(ends, at, n - 1).flip([last]), last)[0].flip([last])
    best = (final - first).argmax(last, keepdim=True)
    value = gather(values, last, best)
    index = gather(order, last, gather(final, last, best))
    value, index = value.transpose(d, last), index.transpose(d, last)
    return (value, index) if keepdim else (value.squeeze(d), index.squeeze(d))
