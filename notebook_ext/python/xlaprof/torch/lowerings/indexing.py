"""Integer-array indexing: every form becomes one flat ``index_select`` or ``index_add``; and
``gather``, ``index_select``, ``index_add``, ``index_fill``, ``put``, embeddings.
"""

from __future__ import annotations

from typing import Any, Sequence

import xlaprof as xp

from .common import (Unsupported, aten, broadcast_shape, contiguous_strides, expand_to, flat_positions,
                     write_rows)
from .reductions import vector_norm
from .registry import lower
from .sort import nonzero


@lower(aten.index_select.default, complex_safe=True)
def index_select(x: Any, dim: int, index: Any) -> Any:
    if x.ndim == 0:  # torch indexes a 0-d tensor as one element along dim 0
        return x.reshape(1).index_select(0, index.reshape(-1)).reshape(())
    return x.index_select(dim, index)


@lower(aten.index_add.default)
def index_add(x: Any, dim: int, index: Any, source: Any, alpha: Any = 1) -> Any:
    source = source if alpha == 1 else source * alpha
    if x.ndim == 0:
        return x.reshape(1).index_add(0, index.reshape(-1), source.reshape(-1)).reshape(())
    return x.index_add(dim, index, source)


@lower(aten.embedding.default)
def embedding(weight: Any, indices: Any, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Any:
    flat = indices.reshape(-1)
    return weight.index_select(0, flat).reshape(*indices.shape, weight.shape[1])


@lower(aten.masked_select.default, complex_safe=True)
def masked_select(x: Any, mask: Any) -> Any:
    """The entries under ``mask`` (both broadcast), in order: a read of their count, as on CUDA."""
    shape = broadcast_shape([x.shape, mask.shape])
    flat_mask = expand_to(mask, shape).reshape(-1)
    return _index(expand_to(x, shape).reshape(-1), _masks_as_positions([flat_mask], "aten::masked_select"))


@lower(aten.embedding_renorm.default)
def embedding_renorm(weight: Any, indices: Any, max_norm: float, norm_type: float) -> Any:
    """``nn.Embedding(max_norm=...)``: each row looked up whose norm is over ``max_norm`` scaled
    down to it (torch's kernel, which writes the rows in place: ``embedding_renorm_``)."""
    hit = xp.zeros(weight.shape[0], dtype="int64").index_add(
        0, indices.reshape(-1).astype("int64"), xp.ones(indices.numel(), dtype="int64")) > 0
    norms = vector_norm(weight, norm_type, [1], keepdim=True)
    over = hit.unsqueeze(1) & (norms > max_norm)
    return xp.where(over, weight * (max_norm / (norms + 1e-7)), weight)


@lower(aten.embedding_dense_backward.default)
def embedding_dense_backward(grad: Any, indices: Any, num_weights: int, padding_idx: int,
                             scale_grad_by_freq: bool) -> Any:
    flat = indices.reshape(-1)
    rows = grad.reshape(-1, grad.shape[-1])
    if padding_idx >= 0:
        rows = xp.where(flat.ne(padding_idx).unsqueeze(1), rows, xp.zeros_like(rows))
    return xp.zeros(num_weights, grad.shape[-1], dtype=grad.dtype).index_add(0, flat, rows)


@lower(aten.put.default)
def put(x: Any, index: Any, source: Any, accumulate: bool = False) -> Any:
    n = 1
    for s in x.shape:
        n *= s
    flat, idx = x.reshape(-1), index.reshape(-1)
    idx = xp.where(idx < 0, idx + n, idx)
    rows = source.reshape(-1).astype(x.dtype)
    if not accumulate:
        hit = xp.zeros(n, dtype="int64").index_add(0, idx, xp.ones(idx.shape[0], dtype="int64")) > 0
        flat = xp.where(hit, xp.zeros_like(flat), flat)
    return flat.index_add(0, idx, rows).reshape(*x.shape)


def _advanced_index(x: Any, indices: Sequence[Any]) -> Any:
    """``x[indices]`` (torch's ``index.Tensor``) as (x with the indexed dims first and merged,
    the flat position of each picked element, the result's shape)."""
    indices = list(indices) + [None] * (x.ndim - len(indices))
    for i in indices:
        if i is not None and i.dtype == "bool":
            raise Unsupported("a boolean mask index has a data-dependent shape")
    indexed = [d for d, i in enumerate(indices) if i is not None]
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    rest = [d for d in range(x.ndim) if d not in indexed]
    # The indexed dims go first (torch's rule when they are not adjacent; when they are, the
    # result's dims are moved back below).
    moved = x.permute(*(indexed + rest)) if indexed + rest != list(range(x.ndim)) else x
    idx_shape = [x.shape[d] for d in indexed]
    bshape = broadcast_shape([indices[d].shape for d in indexed])
    flat = None
    for d, stride in zip(indexed, contiguous_strides(idx_shape)):
        i = indices[d].astype("int64")
        i = xp.where(i < 0, i + x.shape[d], i)
        term = i * stride if stride != 1 else i
        flat = term if flat is None else flat + term
    flat = flat.expand(*bshape) if list(flat.shape) != bshape else flat
    rest_shape = [x.shape[d] for d in rest]
    count = 1
    for n in idx_shape:
        count *= n
    merged = moved.reshape(count, *rest_shape)
    return merged, flat, bshape, rest_shape, adjacent, indexed


def _masks_as_positions(indices: Sequence[Any], op: str) -> list:
    """Each boolean mask among ``indices`` as the positions of its true entries, one integer
    index per dim it covers (``x[mask]`` is ``x[mask.nonzero().unbind(1)]``): the count is the
    result's length, read to the host by ``nonzero`` (a sync, as on CUDA: ``op``'s size read)."""
    out: list = []
    for i in indices:
        if i is not None and i.dtype == "bool":
            found = nonzero(i, op, "the count of true entries in its boolean mask")
            out.extend(found[:, d] for d in range(i.ndim))
        else:
            out.append(i)
    return out


@lower(aten.index.Tensor, complex_safe=True)
def index(x: Any, indices: Sequence[Any]) -> Any:
    return _index(x, _masks_as_positions(indices, "aten::index"))


def _index(x: Any, indices: Sequence[Any]) -> Any:
    merged, flat, bshape, rest_shape, adjacent, indexed = _advanced_index(x, indices)
    out = merged.index_select(0, flat.reshape(-1)).reshape(*bshape, *rest_shape)
    first = indexed[0]
    if adjacent and first > 0:
        # x[:, idx]: the broadcast dims take the place of the indexed ones.
        nb = len(bshape)
        order = list(range(nb, nb + first)) + list(range(nb)) + list(range(nb + first, out.ndim))
        out = out.permute(*order)
    return out


@lower(aten.index_put.default, autocast="widest")
def index_put(x: Any, indices: Sequence[Any], values: Any, accumulate: bool = False) -> Any:
    merged, flat, bshape, rest_shape, adjacent, indexed = _advanced_index(x, indices)
    first = indexed[0]
    target = list(bshape) + rest_shape
    if adjacent and first > 0:
        # values are laid out as the result of x[:, idx]: move the broadcast dims first.
        nb = len(bshape)
        lead = [x.shape[d] for d in range(first)]
        full = lead + list(bshape) + [x.shape[d] for d in range(indexed[-1] + 1, x.ndim)]
        v = expand_to(values.astype(x.dtype), full)
        order = list(range(first, first + nb)) + list(range(first)) + list(range(first + nb, len(full)))
        v = v.permute(*order)
    else:
        v = expand_to(values.astype(x.dtype), target)
    picks = 1
    for n in bshape:
        picks *= n
    rows = v.reshape(picks, *rest_shape)
    pos = flat.reshape(-1)
    added = merged.index_add(0, pos, rows) if accumulate else write_rows(merged, pos, rows)
    rest = [d for d in range(x.ndim) if d not in indexed]
    moved_shape = [x.shape[d] for d in indexed + rest]
    out = added.reshape(*moved_shape)
    perm = indexed + rest
    if perm != list(range(x.ndim)):
        out = out.permute(*[perm.index(d) for d in range(x.ndim)])
    return out


@lower(aten.gather.default)
def gather(x: Any, dim: int, index: Any, sparse_grad: bool = False) -> Any:
    if 0 in index.shape:
        return xp.zeros(*index.shape, dtype=x.dtype)
    if x.ndim == 0:
        return x.clone() if index.ndim == 0 else x.expand(*index.shape).clone()
    flat = flat_positions(x, dim % x.ndim, index)
    return x.reshape(-1).index_select(0, flat.reshape(-1)).reshape(*index.shape)


@lower(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)
def index_fill(x: Any, dim: int, index: Any, v: Any) -> Any:
    if x.ndim == 0:
        return xp.full((), v, dtype=x.dtype) if not hasattr(v, "shape") else v.astype(x.dtype).reshape(())
    d = dim % x.ndim
    hit = xp.zeros(x.shape[d], dtype="int32").index_add(0, index.reshape(-1).astype("int64"),
                                                        xp.ones(index.numel(), dtype="int32")) > 0
    shape = [1] * x.ndim
    shape[d] = x.shape[d]
    fill = v.astype(x.dtype) if hasattr(v, "shape") else xp.full((), v, dtype=x.dtype)
    return xp.where(hit.reshape(*shape), fill, x)
