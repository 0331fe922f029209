"""Views, which alias their base (a write through one reaches it), their ``*_scatter`` and
backward forms, and in-place ops that change a tensor's shape.
"""

from __future__ import annotations

from typing import Any, List, Sequence

import torch

import xlaprof as xp
from xlaprof import _native

from .._tensor import LazyTensor, make_view, value
from .common import aten, diag_len, diagonal_of
from .registry import declare, lower, lower_raw


@lower(aten.slice_backward.default)
def slice_backward(grad: Any, input_sizes: Sequence[int], dim: int, start: int, end: int, step: int) -> Any:
    base = xp.zeros(*input_sizes, dtype=grad.dtype)
    return _slice_scatter(base, grad, dim % len(input_sizes), start, end, step)


@lower(aten.select_backward.default)
def select_backward(grad: Any, input_sizes: Sequence[int], dim: int, index: int) -> Any:
    dim = dim % len(input_sizes)
    index = index % input_sizes[dim]
    base = xp.zeros(*input_sizes, dtype=grad.dtype)
    return _slice_scatter(base, grad.unsqueeze(dim), dim, index, index + 1, 1)


@lower(aten.slice_scatter.default)
def slice_scatter(x: Any, src: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> Any:
    return _slice_scatter(x, src, dim % x.ndim, start, end, step)


@lower(aten.select_scatter.default)
def select_scatter(x: Any, src: Any, dim: int, index: int) -> Any:
    dim = dim % x.ndim
    index = index % x.shape[dim]
    return _slice_scatter(x, src.unsqueeze(dim), dim, index, index + 1, 1)


def _bounds(n: int, start: Any, end: Any, step: int) -> range:
    return range(n)[slice(start, end, step)]


def _slice_scatter(base: Any, src: Any, dim: int, start: Any, end: Any, step: int) -> Any:
    """``base`` with ``base[..., start:end:step, ...] = src`` along ``dim``: the engine's values
    are immutable, so the slice is padded into place and chosen by a mask."""
    n = base.shape[dim]
    r = _bounds(n, start, end, step)
    if len(r) == 0:
        return base
    src = src.astype(base.dtype)
    if step == 1:
        pads = [(0, 0)] * base.ndim
        pads[dim] = (r.start, n - r.stop)
        placed = src.pad(pads, 0)
        mask = xp.ones(*src.shape, dtype="bool").pad(pads, False)
        return xp.where(mask, placed, base)
    # A strided slice: gather each kept position's source row by an index map.
    positions = xp.arange(0, n, 1, dtype="int64")
    inside = (positions >= r.start) & (positions <= r[-1]) & ((positions - r.start).remainder(step) == 0)
    source_row = ((positions - r.start).div(step, rounding_mode="floor")).clamp(0, len(r) - 1)
    gathered = src.index_select(dim, source_row)
    shape = [1] * base.ndim
    shape[dim] = n
    return xp.where(inside.reshape(*shape), gathered, base)


def _view_shape(x: Any, size: Sequence[int]) -> List[int]:
    """``size`` with its -1 inferred (the engine's rule); as given where no reshape fits, so that
    the reshape's error names both shapes and the user's line."""
    size = [int(s) for s in size]
    total = 1
    for s in x.shape:
        total *= s
    return _native.infer_dims(total, size) or size


@lower_raw(aten.view.default, aten._unsafe_view.default, aten.reshape.default, complex_safe=True, native_view="reshape")
def view(t: LazyTensor, size: Sequence[int]) -> LazyTensor:
    base_shape = tuple(t.shape)
    shape = _view_shape(value(t), size)
    return make_view(t, lambda r: r.reshape(*shape), lambda r, nv: nv.reshape(*base_shape),
                     bwd_reads_base=False)


@lower_raw(aten.alias.default, aten.detach.default, complex_safe=True, native_view="alias")
@lower_raw(aten.lift_fresh.default, native_view="alias")
def alias(t: LazyTensor) -> LazyTensor:
    return make_view(t, lambda r: r, lambda r, nv: nv, bwd_reads_base=False)


@lower_raw(aten.permute.default, complex_safe=True, native_view="permute")
def permute(t: LazyTensor, dims: Sequence[int]) -> LazyTensor:
    n = t.dim()
    dims = [d % n for d in dims]
    inverse = [dims.index(i) for i in range(n)]
    return make_view(t, lambda r: r.permute(*dims), lambda r, nv: nv.permute(*inverse),
                     bwd_reads_base=False)


@lower_raw(aten.transpose.int, complex_safe=True, native_view="transpose")
def transpose(t: LazyTensor, d0: int, d1: int) -> LazyTensor:
    if t.dim() == 0:
        return alias(t)
    return make_view(t, lambda r: r.transpose(d0, d1), lambda r, nv: nv.transpose(d0, d1),
                     bwd_reads_base=False)


@lower_raw(aten.t.default, complex_safe=True, native_view="t")
def t_(t: LazyTensor) -> LazyTensor:
    return transpose(t, 0, 1) if t.dim() == 2 else alias(t)


@lower_raw(aten.unsqueeze.default, complex_safe=True, native_view="unsqueeze")
def unsqueeze(t: LazyTensor, dim: int) -> LazyTensor:
    dim = dim % (t.dim() + 1)
    return make_view(t, lambda r: r.unsqueeze(dim), lambda r, nv: nv.squeeze(dim),
                     bwd_reads_base=False)


@lower_raw(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, complex_safe=True)
def squeeze(t: LazyTensor, dim: Any = None) -> LazyTensor:
    shape = list(t.shape)
    if dim is None:
        dims = list(range(len(shape)))
    elif isinstance(dim, int):
        dims = [dim % max(len(shape), 1)]
    else:  # squeeze.dims: exactly those (none for an empty list)
        dims = [d % max(len(shape), 1) for d in dim]
    new = [s for i, s in enumerate(shape) if not (i in dims and s == 1)]
    return make_view(t, lambda r: r.reshape(*new), lambda r, nv: nv.reshape(*shape),
                     bwd_reads_base=False)


@lower_raw(aten.expand.default, complex_safe=True)
def expand(t: LazyTensor, size: Sequence[int], implicit: bool = False) -> LazyTensor:
    # Not a view: torch forbids writes through an expanded tensor (its elements share memory).
    x = value(t)
    lead = len(size) - x.ndim
    full = [int(x.shape[i - lead]) if s == -1 else int(s) for i, s in enumerate(size)]
    return LazyTensor(x.expand(*full))


@lower_raw(aten.slice.Tensor, complex_safe=True, native_view="slice")
def slice_(t: LazyTensor, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> LazyTensor:
    n = t.dim()
    dim = dim % n
    length = t.shape[dim]
    r = _bounds(length, start, end, step)
    index = tuple(slice(None) if d != dim else slice(r.start, r.stop, r.step) for d in range(n))
    if len(r) == 0:
        shape = list(t.shape)
        shape[dim] = 0
        return LazyTensor(xp.zeros(*shape, dtype=value(t).dtype))
    return make_view(
        t,
        lambda v: v[index],
        lambda v, nv: _slice_scatter(v, nv, dim, r.start, r.stop, r.step),
    )


@lower_raw(aten.select.int, complex_safe=True, native_view="select")
def select(t: LazyTensor, dim: int, index: int) -> LazyTensor:
    dim = dim % t.dim()
    index = index % t.shape[dim]
    key = tuple(slice(None) if d != dim else index for d in range(t.dim()))
    return make_view(
        t,
        lambda v: v[key],
        lambda v, nv: _slice_scatter(v, nv.unsqueeze(dim), dim, index, index + 1, 1),
    )


@lower_raw(aten.split.Tensor, complex_safe=True)
def split(t: LazyTensor, split_size: int, dim: int = 0) -> List[LazyTensor]:
    length = t.shape[dim % t.dim()]
    sizes = [min(split_size, length - i) for i in range(0, length, split_size)] or [0]
    return split_with_sizes(t, sizes, dim)


@lower_raw(aten.split_with_sizes.default, complex_safe=True)
def split_with_sizes(t: LazyTensor, sizes: Sequence[int], dim: int = 0) -> List[LazyTensor]:
    out, start = [], 0
    for s in sizes:
        # Each piece made natively, as `aten.slice` is, where the native dispatcher can.
        piece = _native.torch_view("slice", (t, dim, start, start + s))
        out.append(slice_(t, dim, start, start + s, 1) if piece is None else piece)
        start += s
    return out


@lower_raw(aten.unbind.int, complex_safe=True)
def unbind(t: LazyTensor, dim: int = 0) -> List[LazyTensor]:
    out = []
    for i in range(t.shape[dim % t.dim()]):
        row = _native.torch_view("select", (t, dim, i))  # as `aten.select` is made
        out.append(select(t, dim, i) if row is None else row)
    return out


def _diag_mask(rows: int, cols: int, offset: int) -> Any:
    r = xp.arange(0, rows, 1, dtype="int64").unsqueeze(1)
    c = xp.arange(0, cols, 1, dtype="int64").unsqueeze(0)
    return (c - r).eq(offset)


def _diag_embed_into(base: Any, diag: Any, offset: int, d1: int, d2: int) -> Any:
    """``base`` with its (offset) diagonal over dims d1, d2 replaced by ``diag`` (last dim)."""
    rest = [i for i in range(base.ndim) if i not in (d1, d2)]
    rows, cols = base.shape[d1], base.shape[d2]
    n = diag_len(rows, cols, offset)
    if n == 0:
        return base
    # Row r of the embedded matrix holds diag[r - start_row] at column r + offset.
    start_row = 0 if offset >= 0 else -offset
    r = xp.arange(0, rows, 1, dtype="int64")
    pick = (r - start_row).clamp(0, n - 1)
    per_row = diag.index_select(diag.ndim - 1, pick).unsqueeze(-1)  # [..., rows, 1]
    mask = _diag_mask(rows, cols, offset)
    order = rest + [d1, d2]
    moved = base.permute(*order)
    placed = xp.where(mask, per_row.expand(*moved.shape), moved)
    inverse = [order.index(i) for i in range(base.ndim)]
    return placed.permute(*inverse)


@lower_raw(aten.diagonal.default)
def diagonal(t: LazyTensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> LazyTensor:
    n = t.dim()
    d1, d2 = dim1 % n, dim2 % n
    return make_view(
        t,
        lambda v: diagonal_of(v, offset, d1, d2),
        lambda v, nv: _diag_embed_into(v, nv.astype(v.dtype), offset, d1, d2),
    )


@lower(aten.diag_embed.default)
def diag_embed(x: Any, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:
    n = x.shape[-1] + abs(offset)
    out_ndim = x.ndim + 1
    d1, d2 = dim1 % out_ndim, dim2 % out_ndim
    lead = list(x.shape[:-1])
    shape = []
    it = iter(lead)
    for i in range(out_ndim):
        shape.append(n if i in (d1, d2) else next(it))
    return _diag_embed_into(xp.zeros(*shape, dtype=x.dtype), x, offset, d1, d2)


@lower(aten.diagonal_scatter.default)
def diagonal_scatter(x: Any, src: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    return _diag_embed_into(x, src.astype(x.dtype), offset, dim1 % x.ndim, dim2 % x.ndim)


@lower_raw(aten.as_strided.default, complex_safe=True)
def as_strided(t: LazyTensor, size: Sequence[int], stride: Sequence[int], storage_offset: Any = None) -> LazyTensor:
    # The strides address the storage, the root's values in order (a view reports its layout
    # in its root: `_layout`), so the view is a gather of those positions from the root and a
    # write scatters back. (A view of another dtype than its root's addresses its own values.)
    root = t._root if t._root is not None and t._root.dtype == t.dtype else t
    offset = int(storage_offset if storage_offset is not None else t.storage_offset() if root is not t else 0)
    size = [int(s) for s in size]
    positions = xp.full((), offset, dtype="int64")
    for i, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[i] = n
        positions = positions + xp.arange(0, n, 1, dtype="int64").reshape(*shape) * int(s)
    flat_positions = positions.expand(*size).reshape(-1) if size else positions.reshape(1)

    def fwd(v: Any) -> Any:
        return v.reshape(-1).index_select(0, flat_positions).reshape(*size)

    def bwd(v: Any, nv: Any) -> Any:
        flat = v.reshape(-1)
        old = flat.index_select(0, flat_positions)
        return flat.index_add(0, flat_positions, nv.reshape(-1).astype(v.dtype) - old).reshape(*v.shape)

    return make_view(root, fwd, bwd)


def _reshape_in_place(t: LazyTensor, new: Any) -> LazyTensor:
    """``t`` itself takes ``new``'s shape and values: torch's data setter re-describes the
    tensor object that C++ callers hold (`matmul` squeezes its own result in place)."""
    new._take_place_of(t._xp)
    t.data = LazyTensor(new)  # (the data setter: the object re-described, its value rebound)
    return t


@lower_raw(aten.squeeze_.dim, aten.squeeze_.default, aten.squeeze_.dims, complex_safe=True)
def squeeze_in_place(t: LazyTensor, dim: Any = None) -> LazyTensor:
    return _reshape_in_place(t, value(squeeze(t, dim)))


@lower_raw(aten.unsqueeze_.default, complex_safe=True)
def unsqueeze_in_place(t: LazyTensor, dim: int) -> LazyTensor:
    return _reshape_in_place(t, value(unsqueeze(t, dim)))


@lower_raw(aten.transpose_.default, complex_safe=True)
def transpose_in_place(t: LazyTensor, d0: int, d1: int) -> LazyTensor:
    return _reshape_in_place(t, value(transpose(t, d0, d1)))


@lower_raw(aten.t_.default, complex_safe=True)
def t_in_place(t: LazyTensor) -> LazyTensor:
    return _reshape_in_place(t, value(t_(t)))


@lower_raw(aten.resize_as_.default)
def resize_as_(t: LazyTensor, template: Any, memory_format: Any = None) -> LazyTensor:
    return resize_(t, list(template.shape), memory_format)


@lower_raw(aten.resize_.default)
def resize_(t: LazyTensor, size: Sequence[int], memory_format: Any = None) -> LazyTensor:
    size = [int(s) for s in size]
    if list(t.shape) == size:
        return t
    old = value(t).reshape(-1)
    n = 1
    for s in size:
        n *= s
    have = old.shape[0]
    # torch keeps the first elements and leaves new ones uninitialized: zeros here.
    flat = old[0:n] if n <= have else xp.cat([old, xp.zeros(n - have, dtype=old.dtype)], 0)
    return _reshape_in_place(t, flat.reshape(*size))


# Views torch decomposes into the ones above, right for complex arguments as those are.
declare(aten._reshape_alias, aten.narrow, aten.as_strided_, complex_safe=True)
