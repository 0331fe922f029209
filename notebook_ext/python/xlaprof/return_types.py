"""The named tuples some ops return, as ``torch.return_types``: ``t.max(dim)`` and
``t.min(dim)`` and ``t.sort(dim)`` give ``(values, indices)``."""

from __future__ import annotations

from collections import namedtuple

max = namedtuple("max", ["values", "indices"], module=__name__)
min = namedtuple("min", ["values", "indices"], module=__name__)
sort = namedtuple("sort", ["values", "indices"], module=__name__)

__all__ = ["max", "min", "sort"]
