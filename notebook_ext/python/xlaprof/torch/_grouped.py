"""Grouped matrix products (mixture-of-experts layers): rows sorted by group, each group's rows
times its own matrix, with the group boundaries given as values (`offs`, cumulative ends).

torch's `_grouped_mm` and Hugging Face's `transformers::grouped_mm_fallback` (the op its MoE
layers call under torch.compile) read the boundaries on the host and loop over the groups: a
sync and a graph per step, and shapes that follow the data. Here every group's product is taken
over all the rows and the rows outside the group are masked off, so the shapes are static and
the boundaries stay on the device: E times the arithmetic of the loop, for the handful of
experts such layers have, in one graph.
"""

from __future__ import annotations

from typing import Any

import xlaprof as xp

from ._lowerings import aten, lower, lower_named


def _membership(offs: Any, rows: int, dtype: str) -> Any:
    """(groups, rows): 1 where a row belongs to a group, from the groups' cumulative ends."""
    ends = offs.astype("int64")
    starts = xp.cat([xp.zeros(1, dtype="int64"), ends[:-1]])
    r = xp.arange(rows, dtype="int64").unsqueeze(0)
    return (r >= starts.unsqueeze(1)).logical_and(r < ends.unsqueeze(1)).astype(dtype)


def grouped(x: Any, w: Any, offs: Any) -> Any:
    """x (rows, k) sorted by group, w (groups, k, n): each row times its group's matrix."""
    mask = _membership(offs, x.shape[0], x.dtype)
    return ((x.unsqueeze(0) @ w) * mask.unsqueeze(2)).sum(0)


def grouped_backward(x: Any, w: Any, offs: Any, grad: Any) -> Any:
    mask = _membership(offs, x.shape[0], x.dtype).unsqueeze(2)  # (groups, rows, 1)
    grad_x = ((grad.unsqueeze(0) @ w.transpose(1, 2)) * mask).sum(0)
    grad_w = (x.unsqueeze(0) * mask).transpose(1, 2) @ grad.unsqueeze(0)
    return grad_x, grad_w


@lower(aten._grouped_mm.default)
def grouped_mm(x: Any, w: Any, offs: Any = None, bias: Any = None, out_dtype: Any = None) -> Any:
    if offs is None or x.ndim != 2 or w.ndim != 3:
        from ._lowerings import _Unsupported

        raise _Unsupported("a grouped product without groups or of other ranks")
    out = grouped(x, w, offs)
    return out if bias is None else out + bias


lower_named("transformers::grouped_mm_fallback")(grouped)
lower_named("transformers::grouped_mm_fallback_backward")(grouped_backward)
