"""``torch_xla.experimental.eager_mode(True)``: each op runs at once, as PyTorch/XLA's eager mode
runs it (each op its own small program, compiled once per op and shape and then found in the
cache), outside ``torch_xla.compile``, which records its function lazily as one program.

A dispatch mode, entered while eager mode is on: after each op whose results are on the device,
a sync computes them (a sync runs every pending tensor: only that op's results are pending).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import xlaprof as xp
import xlaprof.torch as xt


class _EachOpAtOnce(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if not _suspended[0] and any(xt.is_lazy(t) for t in tree_leaves(out)):
            xp.sync()
        return out


# The mode while eager mode is on; `torch_xla.compile` blocks inside it.
_mode: Any = None
_suspended = [0]


def set_on(enable: bool) -> None:
    global _mode
    if enable and _mode is None:
        _mode = _EachOpAtOnce()
        _mode.__enter__()
    elif not enable and _mode is not None:
        _mode.__exit__(None, None, None)
        _mode = None


def is_on() -> bool:
    return _mode is not None


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Lazy again inside (``torch_xla.compile``'s function)."""
    _suspended[0] += 1
    try:
        yield
    finally:
        _suspended[0] -= 1
