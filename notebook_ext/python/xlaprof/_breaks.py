"""Break on a cause: ``xp.break_on("recompile", "sync", "fallback")`` or, for a whole program,
``XLAPROF_BREAK=recompile,sync,fallback``. What it breaks on raises ``BreakError`` at the user's
line, saying what happened and why (a notebook's ``%debug``, or ``python -m pdb``, then stops
there):

- ``recompile``: a call site compiled another graph; the message says what changed, as the
  recompile finding does. The sync runs to its end first: nothing pending is lost.
- ``sync``: a value read ran the pending graph (a hidden sync: ``.item()``, ``print``, ``if t:``).
- ``fallback``: a torch op with no lowering was about to run on the CPU (before it runs).
"""

from __future__ import annotations

import os
from typing import FrozenSet

from . import _native

CAUSES = ("recompile", "sync", "fallback")
_on: FrozenSet[str] = frozenset()


def break_on(*causes: str) -> None:
    """Breaks on ``causes`` from now on (none: stops breaking)."""
    global _on
    unknown = [c for c in causes if c not in CAUSES]
    if unknown:
        raise ValueError(f"break_on: unknown cause {unknown[0]!r}; the causes are {', '.join(CAUSES)}")
    _native.break_on("recompile" in causes, "sync" in causes)
    _on = frozenset(causes)


def breaking(cause: str) -> bool:
    return cause in _on


def from_env() -> None:
    """``XLAPROF_BREAK=recompile,sync,fallback``, read when xlaprof is imported."""
    value = os.environ.get("XLAPROF_BREAK", "").strip()
    if value:
        try:
            break_on(*[c.strip() for c in value.split(",") if c.strip()])
        except ValueError as e:
            raise ValueError(f"XLAPROF_BREAK={value}: {e}") from None
