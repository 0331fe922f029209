"""The one table of lowered aten ops and of what the dispatcher and autocast need to know of each.

Two kinds of lowerings:
- ``@lower(...)`` functional ops: their tensor arguments arrive as engine values (a CPU 0-dim
  tensor, which torch lets mix with device tensors, as a Python number), their engine results are
  wrapped back into lazy tensors;
- ``@lower_raw(...)`` ops that need the lazy tensors themselves: views (which alias their base)
  and ops that write into an argument.
In-place (``add_``) and ``out=`` forms of a lowered functional op need no entry: the dispatcher
runs the functional op and writes the result back (``_dispatch``). What is not here goes through
torch's decompositions into ops that are, and only then to the CPU fallback.

Each op's properties are written once, in its lowering's decorator:
- ``complex_safe=True``: the lowering is right for complex arguments (movement and views, and
  arithmetic the engine defines for complex numbers). The dispatcher sends an op with a complex
  argument to its lowering only if its overload packet is in ``COMPLEX_SAFE`` (``_dispatch``).
- ``autocast=`` one of ``AUTOCAST_POLICIES``: torch's CUDA rule for the op under
  ``torch.autocast`` (``_autocast``), by aten name, for all its overloads.
- ``native_view=`` (``lower_raw``) / ``engine_operator=`` (``lower``): the native dispatcher
  (``src/py/torch_dispatch.rs``) makes the view or calls the engine's operator itself; the value
  names an entry of ``_native.DISPATCH_CODES["views"]`` / ``["operators"]``, which ``_dispatch``
  turns into the numbers Rust defines.
``declare(...)`` gives the same properties to ops that have no lowering of their own here (torch
decomposes them into ops that do) or that a loop lowers.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, Optional, Set, Tuple

FUNCTIONAL: Dict[Any, Callable[..., Any]] = {}
RAW: Dict[Any, Callable[..., Any]] = {}
NAMED: Dict[str, Callable[..., Any]] = {}
# op (or name) -> the module whose lowering registered it (`lowerings.elementwise`, ...).
FAMILY: Dict[Any, str] = {}

# Overload packets whose lowerings take complex arguments.
COMPLEX_SAFE: Set[Any] = set()
AUTOCAST_POLICIES = ("lower_precision", "float32", "widest")
# aten name -> autocast policy.
AUTOCAST: Dict[str, str] = {}
# op -> the name of the view the native dispatcher makes of it, or of the engine operator it calls.
NATIVE_VIEWS: Dict[Any, str] = {}
ENGINE_OPERATORS: Dict[Any, str] = {}

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def lower(*ops: Any, complex_safe: bool = False, autocast: Optional[str] = None,
          engine_operator: Optional[str] = None) -> Decorator:
    """A functional lowering of ``ops``."""
    _note(ops, complex_safe, autocast)
    for op in ops if engine_operator else ():
        ENGINE_OPERATORS[op] = engine_operator

    family = _caller()

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            FUNCTIONAL[op] = fn
            FAMILY[op] = family
        return fn

    return register


def lower_named(*names: str) -> Decorator:
    """A functional lowering of ops by name (``namespace::op``): ops that other libraries
    define (``transformers::grouped_mm_fallback``), which exist only once those are imported."""
    family = _caller()

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for name in names:
            NAMED[name] = fn
            FAMILY[name] = family
        return fn

    return register


def lower_raw(*ops: Any, complex_safe: bool = False, autocast: Optional[str] = None,
              native_view: Optional[str] = None) -> Decorator:
    """A lowering of ``ops`` that takes and returns the lazy tensors themselves."""
    _note(ops, complex_safe, autocast)
    for op in ops if native_view else ():
        NATIVE_VIEWS[op] = native_view

    family = _caller()

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            RAW[op] = fn
            FAMILY[op] = family
        return fn

    return register


def declare(*ops: Any, complex_safe: bool = False, autocast: Optional[str] = None) -> None:
    """The properties of ops without a lowering of their own here: aten ops or overload
    packets, or aten names (for ``autocast`` alone: torch's lists name ops some torch builds
    lack)."""
    _note(ops, complex_safe, autocast)


def _note(ops: Tuple[Any, ...], complex_safe: bool, autocast: Optional[str]) -> None:
    if autocast is not None and autocast not in AUTOCAST_POLICIES:
        raise ValueError(f"autocast={autocast!r}: one of {AUTOCAST_POLICIES}")
    for op in ops:
        if complex_safe:
            COMPLEX_SAFE.add(getattr(op, "overloadpacket", op))
        if autocast is not None:
            name = op if isinstance(op, str) else aten_name(op)
            if AUTOCAST.setdefault(name, autocast) != autocast:
                raise ValueError(f"{name}: autocast {AUTOCAST[name]!r} and {autocast!r}")


def aten_name(op: Any) -> str:
    """``addmm`` for ``aten.addmm.default`` and ``aten.addmm``."""
    packet = getattr(op, "overloadpacket", op)
    return packet._qualified_op_name.split("::")[-1]


def autocast_ops(policy: str) -> Tuple[str, ...]:
    """The aten names autocast runs under ``policy``."""
    return tuple(name for name, p in AUTOCAST.items() if p == policy)


def _caller() -> str:
    """The module that called the decorator (a family's, or for ``linalg``'s own ``lower``, it)."""
    frame = sys._getframe(2)
    while frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return frame.f_globals.get("__name__", "?")
