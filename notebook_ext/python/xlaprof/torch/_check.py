"""``XLAPROF_CHECK=1``: the bounds of every index checked, as torch's CPU and CUDA kernels check
them. XLA's gather and scatter clamp an index that is out of range, so without the check a
wrong index (a token id past the vocabulary, an off-by-one) reads a neighbour's value silently.

With the check, each indexing op also records its indices' smallest and largest value, on the
device, in the step's own graph; the next sync computes them with everything else and reads them
back together (one small copy, no sync of its own; a value read, which computes only what it
reads, checks them in a graph of their own). An index out of range is then an ``IndexError``
with torch's wording, naming the op and its line: as CUDA's device-side assertions do, it comes at
the sync or read after the op, not at the op itself. Indices on the CPU are checked at once.

Lowerings check other arguments the same way (``deferred``): a CTC loss's lengths given as
device tensors, which CUDA reads to the host to check and which here decide nothing on the host,
are checked against the input's length at the next sync, with torch's words.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from .. import _native

aten = torch.ops.aten

ENABLED = os.environ.get("XLAPROF_CHECK", "") not in ("", "0")

# Per op: the index tensors of a call, each with the size it indexes, the dimension, and
# whether negative indices count from the end (advanced indexing) or are errors.
Indexed = List[Tuple[Any, int, int, bool]]


def _advanced(a: Tuple[Any, ...], k: Dict[str, Any]) -> Indexed:
    self, indices = a[0], a[1] if len(a) > 1 else k.get("indices", [])
    return [(i, self.shape[d], d, True) for d, i in enumerate(indices)
            if i is not None and i.dtype not in (torch.bool, torch.uint8)]


def _along(dim_at: int, index_at: int) -> Callable[[Tuple[Any, ...], Dict[str, Any]], Indexed]:
    def indexed(a: Tuple[Any, ...], k: Dict[str, Any]) -> Indexed:
        self, dim, index = a[0], a[dim_at], a[index_at]
        dim = dim % max(self.dim(), 1)
        return [(index, self.shape[dim] if self.dim() else 1, dim, False)]

    return indexed


def _embedding(a: Tuple[Any, ...], k: Dict[str, Any]) -> Indexed:
    return [(a[1], a[0].shape[0], 0, False)]


def _take(a: Tuple[Any, ...], k: Dict[str, Any]) -> Indexed:
    return [(a[1], a[0].numel(), 0, False)]


CHECKED: Dict[Any, Callable[[Tuple[Any, ...], Dict[str, Any]], Indexed]] = {
    aten.index.Tensor: _advanced,
    aten.index_put.default: _advanced,
    aten.index_put_.default: _advanced,
    aten._index_put_impl_.default: _advanced,
    aten.index_select.default: _along(1, 2),
    aten.gather.default: _along(1, 2),
    aten.scatter.src: _along(1, 2),
    aten.scatter.value: _along(1, 2),
    aten.scatter_.src: _along(1, 2),
    aten.scatter_.value: _along(1, 2),
    aten.scatter_add.default: _along(1, 2),
    aten.scatter_add_.default: _along(1, 2),
    aten.index_add.default: _along(1, 2),
    aten.index_copy.default: _along(1, 2),
    aten.index_fill.int_Scalar: _along(1, 2),
    aten.embedding.default: _embedding,
    aten.take.default: _take,
}


# A line as the profiler keeps it: (file, line, function).
Site = Optional[Tuple[str, int, str]]

# Checks recorded and not read yet: a tensor's smallest and largest value (pending on the
# device), and the judge of the two once read, which raises if they are out of range.
_pending: List[Tuple[Any, Any, Callable[[int, int], None]]] = []


def bounds_checked(route: Callable[..., Any], func: Any, where: Callable[[], Site]) -> Callable[..., Any]:
    """``route``, its call's indices checked at the next sync (``where()`` is the user's line)."""
    indexed = CHECKED[func]

    def run(a: Tuple[Any, ...], k: Dict[str, Any]) -> Any:
        for index, size, dim, wraps in indexed(a, k):
            if index.numel() == 0:
                continue
            low, high = index.min().to(torch.int64), index.max().to(torch.int64)
            judge = functools.partial(_raise_if_out, size=size, dim=dim, wraps=wraps, op=func.name(), site=where())
            if index.device.type == "cpu":
                judge(int(low), int(high))
            else:
                _pending.append((low, high, judge))
        return route(a, k)

    return run


def before_sync() -> Optional[Tuple[Any, int]]:
    """The pending checks' bounds as one tensor, itself pending, so that the sync about to run
    computes it in its graph; and how many checks it holds."""
    if not _pending:
        return None
    return torch.stack([bound for check in _pending for bound in check[:2]]), len(_pending)


def after_sync(bounds: Optional[Tuple[Any, int]]) -> None:
    """Reads the bounds a sync computed (a copy) and raises for the first index out of range."""
    if bounds is None:
        return
    values, count = bounds
    checks = _pending[:count]
    del _pending[:count]  # before the read, which would check them again
    from ._tensor import to_cpu  # the bridge's read itself: this runs inside a dispatched read

    flat = to_cpu(values).tolist()
    for (_, _, judge), low, high in zip(checks, flat[0::2], flat[1::2]):
        judge(low, high)


def around_sync(sync: Callable[[], None]) -> None:
    """Runs ``sync`` (a full sync or a step) with the pending checks' bounds in its graph, then
    raises for the first index out of range."""
    bounds = before_sync()
    sync()
    after_sync(bounds)


def after_read() -> None:
    """After a value read: the checks still pending, in a graph of their own."""
    if _pending:
        after_sync(before_sync())


def deferred(values: Any, judge: Callable[[int, int], Optional[str]]) -> None:
    """``values`` (an integer tensor on the device, or an engine value) judged at the next sync
    by its smallest and largest value: ``judge(low, high)`` returns what is wrong, in torch's
    words, or None. What is wrong is then a ``RuntimeError`` naming the user's line, and a finding
    the profiler shows. (A tensor with no values has nothing to judge.)"""
    from ._dispatch import _user_site  # the dispatcher imports this module
    from ._tensor import LazyTensor

    if not isinstance(values, torch.Tensor):
        values = LazyTensor(values)
    if values.numel() == 0:
        return
    site = _user_site()
    low, high = values.min().to(torch.int64), values.max().to(torch.int64)
    _pending.append((low, high, functools.partial(_raise_if_wrong, judge=judge, site=site)))


def _raise_if_wrong(low: int, high: int, judge: Callable[[int, int], Optional[str]], site: Site) -> None:
    wrong = judge(low, high)
    if wrong is None:
        return
    from ._dispatch import _line_of  # the dispatcher imports this module

    message = f"{wrong} (at {_line_of(site)}; XLAPROF_CHECK=1)"
    _native.caught("range_check", message, site)
    raise RuntimeError(message)


def _raise_if_out(low: int, high: int, size: int, dim: int, wraps: bool, op: str, site: Site) -> None:
    bad: Optional[int] = None
    if high >= size:
        bad = high
    elif low < (-size if wraps else 0):
        bad = low
    if bad is None:
        return
    from ._dispatch import _line_of  # the dispatcher imports this module

    message = (f"index {bad} is out of bounds for dimension {dim} with size {size} "
               f"({op}, at {_line_of(site)}; XLAPROF_CHECK=1)")
    _native.caught("check", message, site)
    raise IndexError(message)
