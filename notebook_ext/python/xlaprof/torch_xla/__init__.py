"""PyTorch/XLA's API over xlaprof: programs written for ``torch_xla`` run unchanged, on any PJRT
plugin, with the profiler built in.

    python -m xlaprof.torch_xla train.py --flags        # `import torch_xla` is this package
    python -m xlaprof.torch_xla --reference train.py    # the same program on CPU eager
    xlaprof run --torch-xla -- python train.py          # followed live in the terminal UI

In a notebook, ``xlaprof.torch_xla.install()`` before ``import torch_xla``. Every name provided,
what it maps to and what is missing: docs/torch-xla.md. A name not provided is an ImportError or
an AttributeError that says so.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

import xlaprof as xp

from . import _alias, _eager, _target, amp, runtime
from .distributed import xla_multiprocessing

__version__ = "2.9.0+xlaprof"

__getattr__ = _alias.not_provided(__name__, (
    "_XLAC", "core", "debug", "experimental", "test", "utils",
))


def install(reference: bool = False) -> None:
    """Makes ``import torch_xla`` (and its submodules) this package, in this process; with
    ``reference``, mapped onto CPU eager. Call it before the program imports ``torch_xla``."""
    _alias.map_environment()
    if reference:
        _target.use_reference()
    _alias.install_hook()
    amp.take_xla_autocast()


def device(index: Optional[int] = None) -> torch.device:
    """The device (``torch_xla.device()``); with SPMD, the one device over the mesh."""
    return _target.device(index)


def devices() -> List[torch.device]:
    """The devices of this process: one (SPMD's several are one device to the program)."""
    return [device()]


def real_devices() -> List[str]:
    """The engine's devices, by the plugin's kind (``CPU:0``, ...)."""
    return [f"{runtime.device_type()}:{i}" for i in range(runtime.addressable_runtime_device_count())]


def device_count() -> int:
    return len(real_devices())


def sync(wait: bool = False, reset_scope: bool = True) -> None:
    """Runs what is pending and ends the step (``xm.mark_step()``), then the step closures."""
    _target.sync(wait)


def compile(f: Optional[Callable[..., Any]] = None, full_graph: Optional[bool] = False,
            name: Optional[str] = None, max_different_graphs: Optional[int] = None,
            custom_compile_options: Optional[Dict[str, Any]] = None) -> Any:
    """``f`` traced lazily and run as one program per call, a step at its end (without ``f``, a
    block or a decorator). ``full_graph=True``: a sync inside (a value read, ``.item()``) is an
    error at its line. ``max_different_graphs=N``: compiling more than N graphs for ``f`` is an
    error. ``name`` names the call's region in the profile."""
    if custom_compile_options:
        raise TypeError("torch_xla.compile(custom_compile_options=...) is not provided by xlaprof's "
                        f"torch_xla layer (XLA flag overrides; {_alias.DOCS})")
    region = _Region(name, bool(full_graph), max_different_graphs)
    return region if f is None else region(f)


def step() -> Any:
    """``with torch_xla.step():`` the block is one step (``torch_xla.compile()`` as a block)."""
    return compile()


class _Region:
    """What ``torch_xla.compile`` makes: a block, or a decorator of a function, whose calls are
    each recorded lazily and end a step."""

    def __init__(self, name: Optional[str], full_graph: bool, max_graphs: Optional[int]) -> None:
        self.name, self.full_graph, self.max_graphs = name, full_graph, max_graphs
        self.compiled = 0  # graphs compiled at this region's steps
        self._open: List[List[Any]] = []

    def __call__(self, f: Callable[..., Any]) -> Callable[..., Any]:
        region = _Region(self.name or getattr(f, "__name__", None) or str(f), self.full_graph, self.max_graphs)

        @functools.wraps(f)
        def compiled(*args: Any, **kwargs: Any) -> Any:
            with region:
                return f(*args, **kwargs)

        return compiled

    def __enter__(self) -> "_Region":
        target = _target.current()
        if not target.reference:
            xp.sync()  # what is pending before is not the function's graph
        # What the block is inside, entered in order and left in reverse: no generator, whose
        # frames (contextlib's) would stand between the program's line and the step's sync.
        inside = [_eager.suspended(), target.scope(self._label())]
        if self.full_graph:
            inside.append(target.forbid_sync())
        for block in inside:
            block.__enter__()
        self._open.append(inside)
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> Any:
        for block in reversed(self._open.pop()):
            block.__exit__(kind, error, trace)
        if kind is not None:
            # As PyTorch/XLA's does, what the function recorded runs even when it failed (a
            # failure of that shows the function's as its context).
            _target.step()
            if isinstance(error, xp.SyncError) and self.full_graph:
                what = str(error).split(", inside forbid_sync()")[0]
                raise xp.SyncError(f"torch_xla.compile({self._label()}, full_graph=True) needs more than "
                                   f"one graph: {what}") from None
            return None
        target = _target.current()
        before = xp.counters()["compiles"] if self.max_graphs is not None and not target.reference else None
        _target.step()
        if before is not None:
            self.compiled += xp.counters()["compiles"] - before
            if self.compiled > self.max_graphs:
                raise RuntimeError(
                    f"torch_xla.compile: {self._label()} compiled {self.compiled} different graphs, more "
                    f"than max_different_graphs={self.max_graphs}: its inputs' shapes or the Python values "
                    "it branches on change between calls (the profile's recompile findings say which)")
        return None

    def _label(self) -> str:
        return self.name or "torch_xla.compile"


def manual_seed(seed: int, device: Any = None) -> None:
    """Seeds the device's random numbers (on the reference run, the CPU's: torch's)."""
    _target.manual_seed(seed)


def launch(fn: Callable[..., Any], args: Tuple[Any, ...] = (), start_method: str = "spawn",
           debug_single_process: bool = False) -> None:
    """Runs ``fn(index, *args)`` per process. Under torchrun each process is one already; else
    one process (``distributed.xla_multiprocessing.spawn`` says why)."""
    if runtime.is_spmd():
        raise NotImplementedError("torch_xla.launch does not run SPMD programs (as in PyTorch/XLA): "
                                  "call the function directly")
    if torch.distributed.is_torchelastic_launched():
        fn(int(os.environ.get("LOCAL_RANK", "0")), *args)
        return
    xla_multiprocessing.spawn(fn, args=args, nprocs=1 if debug_single_process else None,
                              start_method=start_method)
