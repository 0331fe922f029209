"""Debugging tools that name the user's line: ``forbid_sync()``, ``detect_anomaly()`` and
``explain()``.

``forbid_sync()`` is a block that promises not to touch the device's values: inside it, running
a graph (``sync()``, ``step()``, reading a pending value) or reading a value (``.item()``,
``.numpy()``, ``print``) raises ``SyncError`` at the line that did it, naming what it did.
Recording ops, shapes and ``repr`` never count. As an assertion in a test::

    with xp.forbid_sync():
        loss = train_step(batch)        # a hidden `.item()` inside fails here, at its line

``explain(*tensors)`` describes the graph that computing the tensors would run (each node's op,
shape and source line; which inputs are device data and which host scalars) without compiling,
running or reading anything.
"""

from __future__ import annotations

from typing import Any

from . import _native


def forbid_sync() -> Any:
    """A block in which running a graph or reading a value is a ``SyncError`` at its line."""
    return _native._Block("forbid_sync")


def detect_anomaly() -> Any:
    """A block whose syncs are checked for NaN and Inf on the device (one scalar read per sync);
    a hit is an ``AnomalyError`` naming the op that made the first, its line and its inputs'
    ranges (the graph runs again with every intermediate checked). ``XLAPROF_DEBUG_NANS=1`` does
    the same for the whole program."""
    return _native._Block("detect_anomaly")


class Explanation(str):
    """The text of ``explain()``; shown as is (not quoted) in a notebook or a REPL."""

    def __repr__(self) -> str:
        return str(self)


def explain(*tensors: Any) -> Explanation:
    """The graph that computing ``tensors`` would run, described without running it."""
    engine = [getattr(t, "_xp", t) for t in tensors]  # a torch LazyTensor holds an engine tensor
    return Explanation(_native.explain(engine))
