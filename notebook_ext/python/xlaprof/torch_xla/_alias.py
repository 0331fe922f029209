"""``import torch_xla`` resolved to this package: the import hook, the names not provided, and
the environment variables PyTorch/XLA's users set, read as xlaprof's.

The hook maps ``torch_xla`` and every ``torch_xla.X`` onto ``xlaprof.torch_xla`` and
``xlaprof.torch_xla.X``: one module object under both names, so state (the step closures, the
SPMD switch, the global mesh) is never held twice. It is installed only where asked (``python -m
xlaprof.torch_xla``, ``install()``); a real ``torch_xla`` is never shadowed otherwise.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys
from typing import Any, Callable, Optional

from .._plugin import ensure_plugin

NAME = "torch_xla"
OURS = "xlaprof.torch_xla"
DOCS = "docs/torch-xla.md lists what it provides"


def not_provided(module: str, lazy_submodules: tuple = ()) -> Callable[[str], Any]:
    """A module's ``__getattr__``: its lazily imported submodules, and for any other name an
    AttributeError saying that xlaprof does not provide it (never a silent no-op)."""
    public = module.replace(OURS, NAME, 1)

    def __getattr__(name: str) -> Any:
        if name in lazy_submodules:
            return importlib.import_module(f"{module}.{name}")
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"{public}.{name} is not provided by xlaprof's torch_xla layer ({DOCS})")

    return __getattr__


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != NAME and not fullname.startswith(NAME + "."):
            return None
        if fullname == NAME:
            map_environment()  # what the program set before its `import torch_xla`
        ours = OURS + fullname[len(NAME):]
        try:
            found = importlib.util.find_spec(ours)
        except ModuleNotFoundError:
            found = None
        if found is None:
            raise ModuleNotFoundError(
                f"{fullname} is not provided by xlaprof's torch_xla layer ({DOCS})", name=fullname)
        return importlib.util.spec_from_loader(fullname, _Loader(ours), is_package=found.submodule_search_locations is not None)


class _Loader(importlib.abc.Loader):
    def __init__(self, ours: str) -> None:
        self.ours = ours

    def create_module(self, spec: Any) -> Any:
        return importlib.import_module(self.ours)

    def exec_module(self, module: Any) -> None:
        # The import system set the alias's spec on our module: it keeps its own, so that its
        # relative imports and `importlib.reload` still see where it lives.
        own = importlib.util.find_spec(self.ours)
        if own is not None:
            module.__spec__ = own


_finder: Optional[_Finder] = None


def installed() -> bool:
    return _finder is not None


def real_torch_xla() -> Optional[str]:
    """Where a real ``torch_xla`` is installed, or None."""
    if installed():
        return None
    try:
        spec = importlib.util.find_spec(NAME)
    except (ImportError, ValueError):
        return None
    return None if spec is None else (spec.origin or str(spec.submodule_search_locations))


def install_hook() -> None:
    global _finder
    if _finder is not None:
        return
    real = real_torch_xla()
    if real is not None:
        print(f"xlaprof: a real torch_xla is installed ({real}); this process imports xlaprof's "
              f"torch_xla layer in its place, as asked", file=sys.stderr)
    if NAME in sys.modules and sys.modules[NAME].__name__ != OURS:
        raise ImportError("torch_xla was imported before xlaprof's layer was installed: install it "
                          "first (python -m xlaprof.torch_xla, or xlaprof.torch_xla.install() before "
                          "`import torch_xla`)")
    _finder = _Finder()
    sys.meta_path.insert(0, _finder)


# PyTorch/XLA's environment variables, read as xlaprof's. Each entry: the variable, what it maps
# to, and how its value translates (None where xlaprof always does what it asks).
def _debug_level(v: str) -> Optional[str]:
    return v if v in ("1", "2") else None


def _device(v: str) -> Optional[str]:
    return {"CPU": "cpu", "CUDA": "cuda", "GPU": "cuda"}.get(v.strip().upper())


ENVIRONMENT = (
    ("PT_XLA_DEBUG_LEVEL", "XLAPROF_DEBUG", _debug_level),
    ("PJRT_DEVICE", "XLAPROF_DEVICE", _device),
    ("CPU_NUM_DEVICES", "XLAPROF_CPU_DEVICES", lambda v: v),
    ("XLA_PERSISTENT_CACHE_PATH", "XLAPROF_CACHE_DIR", lambda v: v),
    # Always on here: every op and sync carries the user's line, and the HLO is kept per graph.
    ("XLA_IR_DEBUG", None, None),
    ("XLA_HLO_DEBUG", None, None),
)


# The xlaprof variables set from PyTorch/XLA's, with the value set: mapped again, they follow a
# change the program made (a script that sets CPU_NUM_DEVICES before `import torch_xla`).
_mapped: dict = {}


def map_environment() -> None:
    """Sets the xlaprof variable of each PyTorch/XLA variable set (one the user set wins).
    Called when the layer is installed, when the program first imports ``torch_xla``, and
    before the engine starts, which reads them then."""
    for theirs, ours, translate in ENVIRONMENT:
        value = os.environ.get(theirs)
        if value is None or ours is None:
            continue
        if os.environ.get(ours) and os.environ[ours] != _mapped.get(ours):
            continue
        mapped = translate(value)
        if mapped is not None:
            os.environ[ours] = _mapped[ours] = mapped
    if os.environ.get("PJRT_DEVICE", "").strip().upper() == "TPU":
        raise ImportError("PJRT_DEVICE=TPU: xlaprof loads TPU's PJRT plugin by path: set "
                          "XLAPROF_PJRT_PLUGIN to libtpu's library (pip install libtpu)")
    ensure_plugin()  # the plugin of the device asked for, unless the user named one
