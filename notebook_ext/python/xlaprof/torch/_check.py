"""``XLAPROF_CHECK=1``: the bounds of every index checked, as torch's CPU and CUDA kernels check
them. XLA's gather and scatter clamp an index that is out of range, so without the check a
wrong index (a token id past the vocabulary, an off-by-one) reads a neighbour's value silently.

With the check, each indexing op computes its indices' smallest and largest value on the device
and reads the two back before it runs (a sync per indexing op: a debugging mode, not a default);
an index out of range is an ``IndexError`` with torch's wording, at the user's line.
"""

from __future__ import annotations

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


def bounds_checked(route: Callable[..., Any], func: Any, where: Callable[[], str]) -> Callable[..., Any]:
    """``route``, after checking the call's indices (``where()`` names the user's line)."""
    indexed = CHECKED[func]

    def run(a: Tuple[Any, ...], k: Dict[str, Any]) -> Any:
        for index, size, dim, wraps in indexed(a, k):
            if index.numel() == 0:
                continue
            low, high = int(index.min().item()), int(index.max().item())
            bad: Optional[int] = None
            if high >= size:
                bad = high
            elif low < (-size if wraps else 0):
                bad = low
            if bad is not None:
                message = (
                    f"index {bad} is out of bounds for dimension {dim} with size {size} "
                    f"({func.name()}, at {where()}; XLAPROF_CHECK=1)"
                )
                _native.caught("check", message)
                raise IndexError(message)
        return route(a, k)

    return run
