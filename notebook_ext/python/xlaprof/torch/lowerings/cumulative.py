"""Cumulative ops: prefix sums, products, extrema and log-sum-exps.
"""

from __future__ import annotations

import math
from typing import Any

import xlaprof as xp

from .._device import engine_dtype
from .common import Unsupported, aten, half_in_float, is_float, triangle
from .elementwise import isnan
from .registry import lower


@lower(aten.cumsum.default, autocast="float32")
@half_in_float
def cumsum(x: Any, dim: int, dtype: Any = None) -> Any:
    if dtype is not None:
        x = x.astype(engine_dtype(dtype))
    elif not is_float(x):
        x = x.astype("int64")
    if x.ndim == 0:
        return x.clone()
    d = dim % x.ndim
    return _prefix_sum_last(x.transpose(d, x.ndim - 1)).transpose(d, x.ndim - 1)


_SCAN_BLOCK = 128


def _prefix_sum_last(x: Any) -> Any:
    """Inclusive prefix sums along the last dim. Up to a block, a product with the
    upper-triangular ones (one dot, fused by XLA); longer, the same within blocks of 128, plus the
    prefix sums of the blocks' totals before each block: O(n) memory and O(128 n) work, where one
    n x n product would need n^2 of both."""
    n = x.shape[-1]
    if n <= _SCAN_BLOCK:
        return x.matmul(triangle(xp.ones(n, n, dtype=x.dtype), 0, lower_part=False))
    lead = list(x.shape[:-1])
    blocks = -(-n // _SCAN_BLOCK)
    padded = x.pad([(0, 0)] * len(lead) + [(0, blocks * _SCAN_BLOCK - n)])
    within = _prefix_sum_last(padded.reshape(*lead, blocks, _SCAN_BLOCK))   # [..., blocks, b]
    totals = within[..., _SCAN_BLOCK - 1]                                   # [..., blocks]
    before = _prefix_sum_last(totals) - totals
    out = (within + before.unsqueeze(-1)).reshape(*lead, blocks * _SCAN_BLOCK)
    return out[..., :n]


def _cumulative_extreme(x: Any, dim: int, largest: bool) -> Any:
    """cummax (``largest``) or cummin along ``dim`` with the index each value came from (the
    latest, as PyTorch's), as cumsum is made: over an [n, n] view of the prefixes, one reduction
    each. A position outside a prefix takes the prefix's own last value, which is in it, so no
    sentinel is needed for any dtype; NaN propagates, and its index is the NaN's."""
    if x.ndim == 0:
        return x.clone(), xp.zeros((), dtype="int64")
    d = dim % x.ndim
    moved = x.transpose(d, x.ndim - 1)
    n = moved.shape[-1]
    lead = tuple(moved.shape[:-1])
    rows = moved.unsqueeze(-2).expand(*lead, n, n)        # [..., i, j] = x[j]
    own = moved.unsqueeze(-1).expand(*lead, n, n)         # [..., i, j] = x[i]
    j = xp.arange(n).reshape(1, n)
    upto = j <= xp.arange(n).reshape(n, 1)
    prefix = xp.where(upto, rows, own)
    values = prefix.amax(-1) if largest else prefix.amin(-1)
    hit = upto & ((rows == values.unsqueeze(-1)) | isnan(rows))
    indices = xp.where(hit, j.expand(*lead, n, n), -1).amax(-1)
    return values.transpose(d, x.ndim - 1), indices.transpose(d, x.ndim - 1)


@lower(aten.cummax.default)
def cummax(x: Any, dim: int) -> Any:
    return _cumulative_extreme(x, dim, True)


@lower(aten.cummin.default)
def cummin(x: Any, dim: int) -> Any:
    return _cumulative_extreme(x, dim, False)


@lower(aten.cumprod.default, autocast="float32")
@half_in_float
def cumprod(x: Any, dim: int, dtype: Any = None) -> Any:
    if dtype is not None:
        x = x.astype(engine_dtype(dtype))
    elif not is_float(x):
        raise Unsupported("cumprod of integers (exact products)")
    if x.ndim == 0:
        return x.clone()
    # |prefix product| = exp(prefix sum of log|x|); its sign flips with each negative factor;
    # it is 0 from the first zero on.
    zero = x.eq(0)
    mag = cumsum(xp.where(zero, xp.ones_like(x), x.abs()).log(), dim).exp()
    negatives = cumsum((x < 0).astype(x.dtype), dim)
    sign = 1.0 - (negatives.remainder(2.0)) * 2.0
    seen_zero = cumsum(zero.astype(x.dtype), dim) > 0
    return xp.where(seen_zero, xp.zeros_like(x), mag * sign)


@lower(aten.logcumsumexp.default)
@half_in_float
def logcumsumexp(x: Any, dim: int) -> Any:
    if x.ndim == 0:
        return x.clone()
    d = dim % x.ndim
    m = x.amax([d], keepdim=True)
    m = xp.where(m.abs().eq(math.inf), xp.zeros_like(m), m)
    return cumsum((x - m).exp(), d).log() + m
