"""Torch's layout of the bridge's views: their strides and storage offsets, as on any device.

A lazy tensor's values are the engine's, in logical order, so the bridge needs no layout of
its own: a tensor that owns its value reports itself contiguous from offset 0. A view reports
what torch would, relative to its root (the tensor that owns the values, contiguous from 0):
`x[1].storage_offset()`, `w.t().stride()` and `is_contiguous()` read as on CUDA, code that
asks them takes the same branches, and Dynamo, which rebuilds a view argument of a compiled
function from its base and checks the strides it gets, accepts it. `as_strided` addresses the
root's values by these strides (`lowerings.views.as_strided`).

The native dispatcher makes the commonest views and their layouts itself, from their base's
layout (`torch_dispatch.rs`: a reshape, a transpose, a permute, an unsqueeze, an alias, a slice
or a select of unit step, and so the pieces of a split or an unbind); the others, and those it
leaves to Python (a complex tensor, a strided slice, a reshape no view of the base's layout can
make), come here through their Python lowerings. Each view op's lowering is wrapped by
`laid_out`: the commonest (a select, a slice, a diagonal, an unbind, a split) by torch's
rules, any other view op by running it on a shape-only (meta) tensor laid out as its argument
is (about 20-35 us).
"""

from typing import Any, Callable, Dict, List, Sequence, Tuple

import torch

from ._tensor import LazyTensor, value
from .lowerings.common import contiguous_strides

aten = torch.ops.aten
_META = torch.device("meta")

Layout = Tuple[Tuple[int, ...], int]


def _select(base: LazyTensor, dim: int, index: int) -> Layout:
    strides = list(base.stride())
    dim %= len(strides)
    offset = base.storage_offset() + (index % base.shape[dim]) * strides[dim]
    del strides[dim]
    return tuple(strides), offset


def _slice(base: LazyTensor, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> Layout:
    strides = list(base.stride())
    dim %= len(strides)
    # torch's own clamping of the start (`slice` in TensorShape.cpp); the end sets the size.
    n = base.shape[dim]
    start = 0 if start is None else int(start)
    if start < 0:
        start += n
    start = min(max(start, 0), n)
    offset = base.storage_offset() + start * strides[dim]
    strides[dim] *= int(step)
    return tuple(strides), offset


def _diagonal(base: LazyTensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Layout:
    strides = list(base.stride())
    dim1 %= len(strides)
    dim2 %= len(strides)
    start = base.storage_offset()
    n1, n2 = base.shape[dim1], base.shape[dim2]
    size = min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2)
    if size > 0:  # torch leaves an empty diagonal's offset where its base's is
        start += offset * strides[dim2] if offset >= 0 else -offset * strides[dim1]
    step = strides[dim1] + strides[dim2]
    kept = [s for d, s in enumerate(strides) if d not in (dim1, dim2)]
    return tuple(kept) + (step,), start


def _unbind(base: LazyTensor, dim: int = 0) -> List[Layout]:
    return [_select(base, dim, i) for i in range(base.shape[dim % base.dim()])]


def _split(base: LazyTensor, size: int, dim: int = 0) -> List[Layout]:
    n = base.shape[dim % base.dim()]
    return [_slice(base, dim, i, i + size) for i in range(0, max(n, 1), max(int(size), 1))]


def _split_with_sizes(base: LazyTensor, sizes: Sequence[int], dim: int = 0) -> List[Layout]:
    starts = [0]
    for s in sizes:
        starts.append(starts[-1] + int(s))
    return [_slice(base, dim, a, b) for a, b in zip(starts, starts[1:])]


# The layouts torch gives these ops' views, computed as it does (`TensorShape.cpp`): the
# commonest views cost no run on a meta tensor.
_RULES: Dict[Any, Callable[..., Layout]] = {
    aten.select.int: _select, aten.slice.Tensor: _slice, aten.diagonal.default: _diagonal,
}
_LIST_RULES: Dict[Any, Callable[..., List[Layout]]] = {
    aten.unbind.int: _unbind, aten.split.Tensor: _split,
    aten.split_with_sizes.default: _split_with_sizes,
}

# View ops whose result is laid out contiguously from 0 when their argument is: the layout is
# computed only for an argument laid out otherwise.
_KEEP_CONTIGUOUS = frozenset((
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.alias.default,
    aten.detach.default, aten.lift_fresh.default, aten.unsqueeze.default, aten.squeeze.default,
    aten.squeeze.dim, aten.squeeze.dims,
))


def meta_like(t: LazyTensor) -> torch.Tensor:
    """A meta tensor of ``t``'s shape, dtype and layout, in storage as large as its root's
    values."""
    root = t._root if t._root is not None else t
    size = root.numel() * root.element_size() // t.element_size()
    storage = torch.empty(size, dtype=t.dtype, device=_META)
    return storage.as_strided(tuple(t.shape), t.stride(), t.storage_offset())


def _by_meta(func: Any, base: LazyTensor, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """The op run on a meta tensor laid out as ``base`` is (`meta_like`): the meta result, or
    ``None`` where it is no view of its argument (a reshape that had to copy, or a view the
    layout does not allow)."""
    m = meta_like(base)
    try:
        out = func(m, *args[1:], **kwargs)
    except RuntimeError:
        return None
    outs = out if isinstance(out, (list, tuple)) else (out,)
    if not all(torch._C._is_alias_of(o, m) for o in outs):
        return None
    return out


def laid_out(func: Any, raw: Callable[..., Any]) -> Callable[..., Any]:
    """``raw`` (a view op's lowering) with its views given torch's layout for ``func``."""
    rule = _RULES.get(func)
    list_rule = _LIST_RULES.get(func)
    keeps = func in _KEEP_CONTIGUOUS

    def run(*args: Any, **kwargs: Any) -> Any:
        out = raw(*args, **kwargs)
        base = args[0] if args else None
        if type(base) is not LazyTensor or base._traced:
            return out
        strided = base.__dict__.get("_strided", False)
        if keeps and not strided:
            return out
        if type(out) is LazyTensor:
            if out._root is None:  # not a view in the engine (an expand, an empty slice)
                return out
            if rule is not None and not kwargs:
                return _relaid(out, rule(base, *args[1:]))
            meta = _by_meta(func, base, args, kwargs)
            if meta is None:
                return _copy(out)
            return _relaid(out, (meta.stride(), meta.storage_offset()))
        if type(out) in (list, tuple) and any(type(v) is LazyTensor for v in out):
            if list_rule is not None and not kwargs:
                layouts = list_rule(base, *args[1:])
            else:
                meta = _by_meta(func, base, args, kwargs)
                if meta is None:
                    return out
                layouts = [(m.stride(), m.storage_offset()) for m in meta]
            laid = [
                _relaid(v, layout) if type(v) is LazyTensor and v._root is not None else v
                for v, layout in zip(out, layouts)
            ]
            return type(out)(laid)
        return out

    return run


def _relaid(view: LazyTensor, layout: Layout) -> LazyTensor:
    """``view`` as a wrapper that reports ``layout`` (the same engine view: its attributes)."""
    strides, offset = tuple(layout[0]), int(layout[1])
    if offset == 0 and strides == tuple(contiguous_strides(view.shape)):
        return view
    if view._strided and view.storage_offset() == offset and view.stride() == strides:
        return view  # laid out already (made natively: `split`'s and `unbind`'s pieces)
    t = torch.Tensor._make_wrapper_subclass(
        LazyTensor, tuple(view.shape), strides=strides, storage_offset=offset,
        dtype=view.dtype, device=view.device, requires_grad=view.requires_grad,
    )
    t.__dict__.update(view.__dict__)
    t._strided = True
    return t


def _copy(view: LazyTensor) -> LazyTensor:
    """What a view torch's layout does not allow becomes: its values, a tensor of their own.
    torch would refuse the view (`x.t().view(-1)`); here a tensor another device lays out
    otherwise may be viewed that way (the bridge lays out every computed result contiguously,
    where CUDA keeps its operands' layout), so the view is taken, as a copy."""
    return LazyTensor(value(view))
