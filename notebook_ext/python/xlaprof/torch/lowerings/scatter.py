"""Writes by position and reductions by segment: boolean-mask writes, ``masked_scatter``,
``as_strided_scatter``, ``nonzero_static``, ``segment_reduce``, ``embedding_bag``, and the
``unfold`` view. Everything is addressed by flat positions computed on the device, so shapes stay
static: the k-th true entry of a mask is found by a prefix count, never by reading the mask."""

from __future__ import annotations

from typing import Any, Sequence

import xlaprof as xp

from .._tensor import LazyTensor, make_view
from .common import (Unsupported, aten, broadcast_shape, contiguous_strides, expand_to, flat_positions, half_in_float,
                     is_float, to_float, write_rows)
from .cumulative import cumsum
from .indexing import index_put as _index_put_by_integers
from .registry import lower, lower_raw


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _ranks(mask: Any) -> Any:
    """For each entry of a flattened mask, how many true entries come before it."""
    flat = mask.reshape(-1).astype("int64")
    return cumsum(flat, 0) - flat


@lower(aten.index_put.default, autocast="widest")
def index_put(x: Any, indices: Sequence[Any], values: Any, accumulate: bool = False) -> Any:
    masks = [i for i in indices if i is not None and i.dtype == "bool"]
    if not masks:
        return _index_put_by_integers(x, indices, values, accumulate)
    lead = 0
    while indices[lead] is None:
        lead += 1
    mask = indices[lead]
    if len(masks) != 1 or any(i is not None for i in indices[lead + 1:]):
        raise Unsupported("index_put with a boolean mask among other indices")
    rest = list(x.shape[lead + mask.ndim:])
    lead_shape = list(x.shape[:lead])
    # The mask over x's layout: [lead..., mask dims..., 1 per rest dim].
    at = mask.reshape(*([1] * lead), *mask.shape, *([1] * len(rest)))
    values = values.astype(x.dtype)
    per_entry = values.ndim > len(rest) and values.shape[values.ndim - len(rest) - 1] != 1
    if not per_entry:
        v = expand_to(values, [*lead_shape, 1, *rest]).reshape(*lead_shape, *([1] * mask.ndim), *rest)
    else:
        # Values given per true entry: entry k of the mask (in order) takes values[..., k, ...].
        if lead:
            raise Unsupported("index_put of per-entry values under a mask after other dims")
        v = expand_to(values, [values.shape[0], *rest]).reshape(values.shape[0], _numel(rest) or 1)
        picks = _ranks(mask).clamp(0, values.shape[0] - 1)
        v = v.index_select(0, picks).reshape(*mask.shape, *rest)
    if accumulate:
        return x + xp.where(at, v, xp.zeros_like(v))
    return xp.where(at, v, x)


@lower(aten.masked_scatter.default)
def masked_scatter(x: Any, mask: Any, source: Any) -> Any:
    shape = broadcast_shape([x.shape, mask.shape])
    x, mask = expand_to(x, shape), expand_to(mask, shape)
    flat = source.reshape(-1).astype(x.dtype)
    picks = _ranks(mask).clamp(0, max(flat.shape[0] - 1, 0))
    return xp.where(mask, flat.index_select(0, picks).reshape(*x.shape), x)


@lower(aten.masked_scatter_backward.default)
def masked_scatter_backward(grad: Any, mask: Any, sizes: Sequence[int]) -> Any:
    """The source's gradient: the output gradient's masked entries, in order, into the source's
    shape, zeros past them (the entries the mask did not take)."""
    count = _numel(sizes)
    mask = expand_to(mask, grad.shape).reshape(-1)
    at = xp.where(mask, _ranks(mask), count)  # an entry not taken lands past the end
    rows = xp.zeros(count + 1, dtype=grad.dtype).index_add(0, at, grad.reshape(-1))
    return rows[:count].reshape(*sizes)


@lower(aten.scatter.reduce)
def scatter_legacy_reduce(x: Any, dim: int, index: Any, src: Any, reduce: str) -> Any:
    how = {"add": "sum", "multiply": "prod"}.get(reduce)
    if how is None:
        raise ValueError(f"scatter: reduce must be 'add' or 'multiply', not {reduce!r}")
    return scatter_reduce(x, dim, index, src, how, True)


@lower(aten.as_strided_scatter.default)
def as_strided_scatter(x: Any, src: Any, size: Sequence[int], stride: Sequence[int],
                       storage_offset: Any = None) -> Any:
    positions = xp.full((), int(storage_offset or 0), dtype="int64")
    for d, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        positions = positions + xp.arange(0, n, 1, dtype="int64").reshape(*shape) * s
    positions = positions.expand(*size).reshape(-1) if size else positions.reshape(1)
    rows = src.astype(x.dtype).reshape(-1)
    return write_rows(x.reshape(-1), positions, rows).reshape(*x.shape)


@lower(aten.nonzero_static.default)
def nonzero_static(x: Any, size: int, fill_value: int = -1) -> Any:
    """The coordinates of the first ``size`` nonzero entries (row-major), padded with
    ``fill_value``: a stable sort that puts the nonzero entries first, in their order."""
    if size == 0 or x.ndim == 0:
        return xp.zeros(size, x.ndim, dtype="int64")
    nz = x.reshape(-1).ne(0)
    n = nz.shape[0]
    _, order = (~nz).astype("int32").sort(0, False)
    if size > n:
        order = xp.cat([order, xp.zeros(size - n, dtype="int64")], 0)
        nz = xp.cat([nz, xp.zeros(size - n, dtype="bool")], 0)
    flat = order[:size]
    found = xp.arange(0, size, 1, dtype="int64") < nz.astype("int64").sum()
    coords = []
    for stride, dim in zip(contiguous_strides(x.shape), x.shape):
        coords.append((flat // stride).remainder(dim) if dim else flat)
    out = xp.stack(coords, 1)
    return xp.where(found.unsqueeze(1), out, fill_value)


def _segment_ids(starts: Any, n: int) -> Any:
    """For each of ``n`` rows, the segment it is in, given where each segment starts (sorted,
    int64): a count of the starts at or before it, by a prefix sum of marks (linear memory)."""
    marks = xp.zeros(n + 1, dtype="int64").index_add(0, starts.clamp(0, n), xp.ones(starts.shape[0], dtype="int64"))
    return cumsum(marks[:n], 0) - 1


@lower(aten.segment_reduce.default)
def segment_reduce(data: Any, reduce: str, lengths: Any = None, indices: Any = None, offsets: Any = None,
                   axis: int = 0, unsafe: bool = False, initial: Any = None) -> Any:
    if indices is not None or data.ndim == 0:
        raise Unsupported("segment_reduce by indices")
    axis %= data.ndim
    if offsets is not None:
        lengths = offsets[..., 1:] - offsets[..., :-1]
    if lengths.ndim != 1 or axis != 0:
        raise Unsupported("segment_reduce over batched lengths")
    segments = lengths.shape[0]
    n = data.shape[0]
    ends = cumsum(lengths.astype("int64"), 0)
    # Row i belongs to the segment whose end is the first one past i.
    seg = _segment_ids(ends - lengths.astype("int64"), n)
    # Rows past the last segment's end belong to none: they land on a segment clamped below and
    # are masked by the counts (empty segments keep their initial value).
    rest = list(data.shape[1:])
    fill = initial
    if fill is None:
        fill = {"sum": 0.0, "mean": float("nan"), "prod": 1.0, "max": float("-inf"), "min": float("inf")}[reduce]
    base = xp.full((segments, *rest), float(fill), dtype=data.dtype)
    count = xp.zeros(segments, dtype="int64").index_add(0, seg.clamp(0, segments - 1),
                                                        xp.ones(n, dtype="int64"))
    seg = seg.clamp(0, segments - 1)
    empty = (count == 0).reshape(segments, *([1] * len(rest)))
    if reduce in ("max", "min"):
        out = base.index_reduce(0, seg, data, "amax" if reduce == "max" else "amin", include_self=initial is not None)
    elif reduce == "prod":
        out = _index_prod(base, 0, seg, data, initial is not None)
    else:
        zero = xp.zeros((segments, *rest), dtype=data.dtype)
        total = zero.index_add(0, seg, data) + (float(initial) if initial is not None else 0.0)
        if reduce == "mean":
            total = total / count.maximum(1).astype(data.dtype).reshape(segments, *([1] * len(rest)))
        out = total
    return xp.where(empty, base, out)


@lower(aten._segment_reduce_backward.default)
def segment_reduce_backward(grad: Any, output: Any, data: Any, reduce: str, lengths: Any = None, offsets: Any = None,
                            axis: int = 0, initial: Any = None) -> Any:
    """Each row's share of its segment's gradient, as torch's kernel gives it: all of it for a
    sum, an equal part for a mean, an equal part to each row that is the maximum (minimum), and
    the product of the others for a product (zeros counted apart, as division cannot)."""
    if data.ndim == 0 or axis % data.ndim != 0:
        raise Unsupported("segment_reduce's backward over another axis")
    if offsets is not None:
        lengths = offsets[..., 1:] - offsets[..., :-1]
    if lengths.ndim != 1:
        raise Unsupported("segment_reduce's backward over batched lengths")
    segments, n, rest = lengths.shape[0], data.shape[0], [1] * (data.ndim - 1)
    lengths = lengths.astype("int64")
    seg = _segment_ids(cumsum(lengths, 0) - lengths, n).clamp(0, max(segments - 1, 0))
    # Rows past the last segment's end belong to none.
    inside = (xp.arange(0, n, 1, dtype="int64") < lengths.sum()).reshape(n, *rest)
    g, out = grad.index_select(0, seg), output.index_select(0, seg)
    zero = xp.zeros_like(data)
    if reduce == "sum":
        share = g
    elif reduce == "mean":
        share = g / lengths.maximum(1).astype(data.dtype).index_select(0, seg).reshape(n, *rest)
    elif reduce in ("max", "min"):
        hit = data == out
        ties = xp.zeros((segments, *data.shape[1:]), dtype=data.dtype).index_add(0, seg, hit.astype(data.dtype))
        share = xp.where(hit, g / ties.index_select(0, seg).maximum(1.0), zero)
    elif reduce == "prod":
        zeros_in = xp.zeros((segments, *data.shape[1:]), dtype="int64").index_add(0, seg, data.eq(0).astype("int64"))
        zeros_in = zeros_in.index_select(0, seg)
        nonzero = segment_reduce(xp.where(data.eq(0), xp.ones_like(data), data), "prod", lengths,
                                 initial=initial).index_select(0, seg)
        others = xp.where(data.eq(0), xp.where(zeros_in == 1, nonzero, zero),
                          xp.where(zeros_in == 0, nonzero / xp.where(data.eq(0), xp.ones_like(data), data), zero))
        share = g * others
    else:
        raise Unsupported(f"segment_reduce's backward of {reduce!r}")
    return xp.where(inside, share, zero)


@lower(aten._embedding_bag_backward.default)
def embedding_bag_backward(grad: Any, indices: Any, offsets: Any, offset2bag: Any, bag_size: Any,
                           maximum_indices: Any, num_weights: int, scale_grad_by_freq: bool, mode: int,
                           sparse: bool = False, per_sample_weights: Any = None, padding_idx: int = -1) -> Any:
    """The weights' gradient: each bag's gradient back to its rows (divided by the bag's size
    for a mean, times each row's weight where given; for a max, to the row each maximum came
    from), none to ``padding_idx``, each row's divided by how often it was looked up when
    ``scale_grad_by_freq``."""
    if sparse:
        raise Unsupported("embedding_bag's sparse gradient")
    dim = grad.shape[1]
    if mode == 2:
        flat = maximum_indices.reshape(-1).astype("int64")
        column = xp.arange(0, dim, 1, dtype="int64").reshape(1, dim).expand(*maximum_indices.shape).reshape(-1)
        at = xp.where(flat >= 0, flat * dim + column, num_weights * dim)  # an empty bag's lands past the end
        rows = xp.zeros(num_weights * dim + 1, dtype=grad.dtype).index_add(0, at, grad.reshape(-1))
        return rows[:num_weights * dim].reshape(num_weights, dim)
    idx = indices.reshape(-1).astype("int64")
    bag = offset2bag.astype("int64")
    rows = grad.index_select(0, bag)
    if mode == 1:
        rows = rows / bag_size.maximum(1).astype(grad.dtype).index_select(0, bag).unsqueeze(1)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.astype(grad.dtype).reshape(-1, 1)
    if padding_idx >= 0:
        rows = xp.where((idx != padding_idx).unsqueeze(1), rows, xp.zeros_like(rows))
    if scale_grad_by_freq:
        counts = xp.zeros(num_weights, dtype="int64").index_add(0, idx, xp.ones(idx.shape[0], dtype="int64"))
        rows = rows / counts.index_select(0, idx).maximum(1).astype(grad.dtype).unsqueeze(1)
    return xp.zeros((num_weights, dim), dtype=grad.dtype).index_add(0, idx, rows)


@lower(aten._embedding_bag_dense_backward.default)
def embedding_bag_dense_backward(grad: Any, indices: Any, offset2bag: Any, bag_size: Any, maximum_indices: Any,
                                 num_weights: int, scale_grad_by_freq: bool, mode: int, per_sample_weights: Any,
                                 padding_idx: int = -1) -> Any:
    return embedding_bag_backward(grad, indices, None, offset2bag, bag_size, maximum_indices, num_weights,
                                  scale_grad_by_freq, mode, False, per_sample_weights, padding_idx)


@lower(aten._embedding_bag_per_sample_weights_backward.default)
def embedding_bag_per_sample_weights_backward(grad: Any, weight: Any, indices: Any, offsets: Any, offset2bag: Any,
                                              mode: int, padding_idx: int = -1) -> Any:
    """Each lookup's weight's gradient: its bag's gradient dotted with its row (0 for
    ``padding_idx``); torch takes per-sample weights in sum mode only."""
    if mode != 0:
        raise ValueError("embedding_bag_backward: per_sample_weights only supported for mode='sum'")
    idx = indices.reshape(-1).astype("int64")
    dots = (grad.index_select(0, offset2bag.astype("int64")) * weight.index_select(0, idx)).sum([1])
    return xp.where(idx != padding_idx, dots, xp.zeros_like(dots)) if padding_idx >= 0 else dots


@lower(aten._embedding_bag_forward_only.default, aten._embedding_bag.default)
@half_in_float
def embedding_bag(weight: Any, indices: Any, offsets: Any, scale_grad_by_freq: bool = False, mode: int = 0,
                  sparse: bool = False, per_sample_weights: Any = None, include_last_offset: bool = False,
                  padding_idx: int = -1) -> Any:
    """``(output, offset2bag, bag_size, max_indices)`` as torch's CPU kernel returns them: each
    bag sums (0), averages (1) or takes the max (2) of its rows; ``padding_idx`` rows are left
    out of every bag."""
    if indices.ndim != 1:
        raise Unsupported("embedding_bag with 2-d indices")
    n, dim = indices.shape[0], weight.shape[1]
    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    offset2bag = _segment_ids(offsets[:bags].astype("int64"), n).clamp(0, max(bags - 1, 0))
    idx = indices.astype("int64")
    keep = idx != padding_idx if padding_idx >= 0 else xp.ones(n, dtype="bool")
    rows = weight.index_select(0, idx)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.astype(rows.dtype).unsqueeze(1)
    kept = keep.astype("int64")
    bag_size = xp.zeros(bags, dtype="int64").index_add(0, offset2bag, kept)
    if mode == 2:
        low = xp.full((bags, dim), float("-inf"), dtype=weight.dtype)
        masked = xp.where(keep.unsqueeze(1), rows, float("-inf"))
        out = low.index_reduce(0, offset2bag, masked, "amax", include_self=True)
        # The index of the row each maximum came from (the first one, as torch's scan keeps).
        hit = (masked == out.index_select(0, offset2bag)) & keep.unsqueeze(1)
        first = xp.where(hit, xp.arange(0, n, 1, dtype="int64").reshape(-1, 1), n)
        which = xp.full((bags, dim), n, dtype="int64").index_reduce(0, offset2bag, first, "amin", include_self=True)
        max_indices = xp.where(which < n, idx.index_select(0, which.clamp(0, n - 1).reshape(-1)).reshape(bags, dim), -1)
        empty = (bag_size == 0).unsqueeze(1)
        out = xp.where(empty, xp.zeros_like(out), out)
        max_indices = xp.where(empty, -1, max_indices)
    else:
        out = xp.zeros((bags, dim), dtype=weight.dtype).index_add(
            0, offset2bag, xp.where(keep.unsqueeze(1), rows, xp.zeros_like(rows)))
        if mode == 1:
            out = out / bag_size.maximum(1).astype(out.dtype).unsqueeze(1)
        max_indices = xp.zeros(bags if mode == 1 else 0, dtype="int64")
    return out, offset2bag, bag_size, max_indices


@lower_raw(aten.unfold.default)
def unfold(t: LazyTensor, dimension: int, size: int, step: int) -> LazyTensor:
    """Windows of ``size`` every ``step`` along ``dimension``, as a new last dim: a view, so a
    write through it reaches the base (overlapping windows: the mean of their writes)."""
    shape = list(t.shape)
    if not shape:
        return make_view(t, lambda v: v.reshape(1), lambda v, nv: nv.reshape(()))
    d = dimension % len(shape)
    count = (shape[d] - size) // step + 1
    index = ((xp.arange(0, count, 1, dtype="int64") * step).reshape(count, 1)
             + xp.arange(0, size, 1, dtype="int64").reshape(1, size)).reshape(-1)

    def fwd(v: Any) -> Any:
        taken = v.index_select(d, index)                       # [..., count * size, ...]
        split = taken.reshape(*shape[:d], count, size, *shape[d + 1:])
        return split.permute(*range(d + 1), *range(d + 2, len(shape) + 1), d + 1)

    def bwd(v: Any, nv: Any) -> Any:
        back = nv.permute(*range(d + 1), len(shape), *range(d + 1, len(shape)))
        rows = back.reshape(*shape[:d], count * size, *shape[d + 1:]).astype(v.dtype)
        moved = v.transpose(d, 0)
        rows = rows.transpose(d, 0)
        written = write_rows(moved, index, rows)
        return written.transpose(d, 0)

    return make_view(t, fwd, bwd)


@lower(aten.scatter_add.default, autocast="widest")
def scatter_add(x: Any, dim: int, index: Any, src: Any) -> Any:
    if x.ndim == 0:
        return x + src.reshape(())
    flat = flat_positions(x, dim % x.ndim, index).reshape(-1)
    rows = _crop_to(src, index.shape).reshape(-1).astype(x.dtype)
    return x.reshape(-1).index_add(0, flat, rows).reshape(*x.shape)


def _crop_to(src: Any, shape: Sequence[int]) -> Any:
    if list(src.shape) == list(shape):
        return src
    return src[tuple(slice(0, n) for n in shape)]


@lower(aten.scatter.src, aten.scatter.value)
def scatter(x: Any, dim: int, index: Any, src: Any) -> Any:
    if x.ndim == 0:
        return (src.reshape(()) if hasattr(src, "shape") else xp.full((), src, dtype=x.dtype)).astype(x.dtype)
    flat = flat_positions(x, dim % x.ndim, index).reshape(-1)
    if hasattr(src, "shape"):
        rows = _crop_to(src, index.shape).reshape(-1).astype(x.dtype)
    else:
        rows = xp.full((flat.shape[0],), src, dtype=x.dtype)
    return write_rows(x.reshape(-1), flat, rows).reshape(*x.shape)


def _index_prod(base: Any, dim: int, index: Any, rows: Any, include_self: bool) -> Any:
    """The product of each value (unless left out) and the rows sent to it along ``dim``: the
    engine scatters by sum, max and min, so a product is exp(sum(log|x|)) with its sign and its
    zeros counted apart (as ``reduce_product``)."""
    if not include_self:
        shape = [1] * base.ndim
        shape[dim] = base.shape[dim]
        hits = xp.zeros(base.shape[dim], dtype="int64").index_add(0, index, xp.ones(index.shape[0], dtype="int64"))
        reached = (hits > 0).reshape(*shape).expand(*base.shape)
        base = xp.where(reached, xp.ones_like(base), base)

    def summed(v: Any, of_rows: Any) -> Any:
        return v.index_add(dim, index, of_rows)

    fb, fr = to_float(base), to_float(rows)
    logs = summed(xp.where(fb.eq(0), xp.ones_like(fb), fb.abs()).log(),
                  xp.where(fr.eq(0), xp.ones_like(fr), fr.abs()).log())
    negatives = summed((base < 0).astype("int64"), (rows < 0).astype("int64"))
    zeros = summed(base.eq(0).astype("int64"), rows.eq(0).astype("int64"))
    sign = 1.0 - negatives.remainder(2).astype(fb.dtype) * 2.0
    value = xp.where(zeros > 0, xp.zeros_like(fb), logs.exp() * sign)
    return value if is_float(base) else value.round().astype(base.dtype)


@lower(aten.index_reduce.default)
def index_reduce(x: Any, dim: int, index: Any, source: Any, reduce: str, include_self: bool = True) -> Any:
    if x.ndim == 0:
        # A 0-d tensor is one value that every index names.
        out = index_reduce(x.reshape(1), 0, index.reshape(-1), source.reshape(-1), reduce, include_self)
        return out.reshape(())
    d = dim % x.ndim
    source = source.astype(x.dtype)
    if reduce == "prod":
        return _index_prod(x, d, index, source, include_self)
    return x.index_reduce(d, index, source, reduce, include_self=include_self)


@lower(aten.scatter_reduce.two)
def scatter_reduce(x: Any, dim: int, index: Any, src: Any, reduce: str, include_self: bool = True) -> Any:
    if x.ndim == 0:
        raise Unsupported(f"scatter_reduce of a 0-d tensor with reduce={reduce!r}")
    flat = flat_positions(x, dim % x.ndim, index).reshape(-1)
    rows = _crop_to(src, index.shape).reshape(-1).astype(x.dtype)
    if reduce in ("amax", "amin"):
        out = x.reshape(-1).index_reduce(0, flat, rows, reduce, include_self=include_self)
        return out.reshape(*x.shape)
    if reduce == "prod":
        return _index_prod(x.reshape(-1), 0, flat, rows, include_self).reshape(*x.shape)
    n = 1
    for s in x.shape:
        n *= s
    hits = xp.zeros(n, dtype="int64").index_add(0, flat, xp.ones(flat.shape[0], dtype="int64"))
    base = x.reshape(-1)
    if not include_self:
        base = xp.where(hits > 0, xp.zeros_like(base), base)
    total = base.index_add(0, flat, rows)
    if reduce == "sum":
        return total.reshape(*x.shape)
    count = hits + (1 if include_self else 0)
    count = count.maximum(1).astype(x.dtype)
    mean = total / count if is_float(x) else total.div(count, rounding_mode="floor")
    return mean.astype(x.dtype).reshape(*x.shape)
