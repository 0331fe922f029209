"""The bounds of every index checked, as torch's CPU and CUDA kernels check them (on by
default; ``XLAPROF_CHECK=0`` turns it off). XLA's gather and scatter clamp an index that is out
of range, so without the check a wrong index (a token id past the vocabulary, an off-by-one)
reads a neighbour's value silently.

Each indexing op also records its indices' smallest and largest value, on the device, in the
step's own graph; the next sync computes them with everything else, and they are read back
from its results (one small copy, no sync of its own, not a read of the program's: the profile
does not show it). Where syncs return before their programs finish (GPUs: ``XLAPROF_RUN_AHEAD``)
they are read at the next sync instead, once it has queued its own program, so that the host
still runs ahead. An index out of range is then an ``IndexError`` with torch's wording, naming
the op and its line: as CUDA's device-side assertions do, it comes at a sync or read after the
op, not at the op itself. A value read, which computes only what it reads, computes the checks
of the ops its value needs in its own program and leaves the others to the next sync. Indices
on the CPU are checked at once. What it costs a step is measured by
``notebook_ext/bench/index_check.py`` (docs/python.md).

Lowerings check other arguments the same way (``deferred``): a CTC loss's lengths given as
device tensors, which CUDA reads to the host to check and which here decide nothing on the host,
are checked against the input's length at the next sync, with torch's words.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import sys
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch

from .. import _native

aten = torch.ops.aten

ENABLED = os.environ.get("XLAPROF_CHECK", "1") != "0"

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
    # `take` and `put` index the flattened tensor, negative indices from its end.
    return [(a[1], a[0].numel(), 0, True)]


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
    aten.put.default: _take,
    aten.put_.default: _take,
}


# A line as the profiler keeps it: (file, line, function).
Site = Optional[Tuple[str, int, str]]

# Checks recorded and not read yet: a tensor's smallest and largest value (pending on the
# device), the judge of the two once read, which raises if they are out of range, and the
# checked op's result's node, held weakly (`_native.node_handle`; None: any read computes the
# check).
Check = Tuple[Any, Any, Callable[[int, int], None], Optional[Any]]
_pending: List[Check] = []
# Checks taken by a sync: their bounds (one pending tensor) and their judges.
Bounds = Tuple[Any, List[Callable[[int, int], None]]]


# Graphs of torch.compile (backend="xlaprof") are recorded once and replayed at later calls,
# where a check recorded with them would not run: while one is recorded, nothing is checked
# (their indices are not checked yet).
_recording_compiled = [0]


@contextlib.contextmanager
def unchecked() -> Iterator[None]:
    """Ops recorded inside are not checked (a torch.compile graph's recording)."""
    _recording_compiled[0] += 1
    try:
        yield
    finally:
        _recording_compiled[0] -= 1


def bounds_checked(route: Callable[..., Any], func: Any, where: Callable[[], Site]) -> Callable[..., Any]:
    """``route``, its call's indices checked at the next sync (``where()`` is the user's line)."""
    indexed = CHECKED[func]

    def run(a: Tuple[Any, ...], k: Dict[str, Any]) -> Any:
        checks = []
        for index, size, dim, wraps in indexed(a, k) if ENABLED and not _recording_compiled[0] else ():
            if index.numel() == 0:
                continue
            low, high = index.min().to(torch.int64), index.max().to(torch.int64)
            judge = functools.partial(_raise_if_out, size=size, dim=dim, wraps=wraps, op=func.name(), site=where())
            if index.device.type == "cpu":
                judge(int(low), int(high))
            else:
                checks.append((low, high, judge))
        out = route(a, k)
        if checks:
            key = _native.node_handle(out._xp) if isinstance(getattr(out, "_xp", None), _native.Tensor) else None
            _pending.extend((low, high, judge, key) for low, high, judge in checks)
        return out

    return run


def _bounds(checks: List[Check]) -> Optional[Bounds]:
    if not checks:
        return None
    return torch.stack([bound for check in checks for bound in check[:2]]), [check[2] for check in checks]


def before_sync() -> Optional[Bounds]:
    """The pending checks' bounds as one tensor, itself pending, so that the sync about to run
    computes it in its graph; and their judges."""
    taken = _pending[:]
    _pending.clear()  # before any read, which would check them again
    return _bounds(taken)


def before_read(x: Any) -> Optional[Bounds]:
    """The bounds of the pending checks whose ops' results a read of ``x`` (an engine tensor)
    computes, for the read's program to compute too. The others wait for the next sync: a read
    that computes an attention mask does not take the embedding's check beside it, which would
    make its program another one, where it is read before the embedding and where after."""
    if not _pending:
        return None
    keyed = [check[3] for check in _pending if check[3] is not None]
    needed = iter(_native.needs(x, keyed) if keyed else [])
    taken, left = [], []
    for check in _pending:
        (taken if check[3] is None or next(needed) else left).append(check)
    _pending[:] = left
    return _bounds(taken)


def after_sync(bounds: Optional[Bounds], ahead: bool = True) -> None:
    """Reads the bounds syncs computed (a copy of their results) and raises for the first index
    out of range: this sync's, or, where the host runs ahead (unless the caller waited for this
    sync's program: a read), the ones before it."""
    if bounds is not None:
        _unread.append(bounds)
    if _unread:
        _judge(keep=1 if ahead and bounds is not None and _runs_ahead() else 0)


def around_sync(sync: Callable[[], None]) -> None:
    """Runs ``sync`` (a full sync or a step) with the pending checks' bounds in its graph, then
    raises for the first index out of range."""
    bounds = before_sync()
    sync()
    after_sync(bounds)


def after_wait() -> None:
    """After a wait for the device, or a value read (which waited): every bound syncs computed
    so far (the checks still pending wait for the next sync)."""
    if _unread:
        _judge(keep=0)


# Bounds computed by syncs and not judged yet (the last sync's, while its program runs ahead).
_unread: List[Bounds] = []


@functools.lru_cache(maxsize=None)
def _runs_ahead() -> bool:
    return _native.runs_ahead()


def _at_exit() -> None:
    """The program ends with bounds unread (its last step ran ahead): an index out of range there
    is said on stderr, as CUDA says a device-side assertion it meets at the end."""
    try:
        after_wait()
    except (IndexError, RuntimeError) as e:
        print(f"xlaprof: {type(e).__name__}: {e}", file=sys.stderr)


atexit.register(_at_exit)


def _judge(keep: int) -> None:
    while len(_unread) > keep:
        values, judges = _unread.pop(0)
        flat = _native.read_computed(values._xp) if isinstance(values, torch.Tensor) else None
        if flat is None:  # not computed by a sync (a mesh's): read as any value is
            from ._tensor import to_cpu  # the bridge's read itself: this runs inside a dispatched read

            flat = to_cpu(values).tolist()
        for judge, low, high in zip(judges, flat[0::2], flat[1::2]):
            judge(low, high)


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
    _pending.append((low, high, functools.partial(_raise_if_wrong, judge=judge, site=site), None))


def _raise_if_wrong(low: int, high: int, judge: Callable[[int, int], Optional[str]], site: Site) -> None:
    wrong = judge(low, high)
    if wrong is None:
        return
    from ._dispatch import _line_of  # the dispatcher imports this module

    message = f"{wrong} (at {_line_of(site)})"
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
               f"({op}, at {_line_of(site)})")
    _native.caught("check", message, site)
    raise IndexError(message)
