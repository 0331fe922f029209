"""The torch tensor subclass whose data is an engine tensor, and how views share a base.

A ``LazyTensor`` is a wrapper subclass (no storage of its own) on the ``xlaprof`` device holding
an engine tensor (``_xp``). torch's autograd and Python layers run above it unchanged; each aten
op below them reaches ``__torch_dispatch__`` and is recorded into the engine (``_dispatch``).

Aliasing. torch programs write through views (``x[0].zero_()``, ``w.t()`` saved for backward,
``p.detach()`` in optimizers), and a write through a view must reach its base. The engine's
values are immutable, so a view is a function of its base: it holds its root (the tensor that
owns the data), a forward function (root value -> view value) and a backward one (root value,
new view value -> new root value). Reading a view recomputes it when the root changed since;
writing one rebuilds the root, which every other view then sees. In-place ops on a root simply
rebind its engine value: the old value stays in the graph for whatever read it.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import torch

from .. import _native
from . import _check
from ._device import DEVICE_TYPE, TO_TORCH, engine_dtype

_DEVICE = torch.device(DEVICE_TYPE, 0)
_COMPLEX = frozenset(d for d in TO_TORCH.values() if d.is_complex)

Fwd = Callable[[Any], Any]
Bwd = Callable[[Any, Any], Any]


class LazyTensor(torch.Tensor):
    """A torch tensor on the ``xlaprof`` device: its value is pending in the engine."""

    # The engine value. Not in a slot: `torch.utils.swap_tensors`, which keeps a parameter's
    # identity when a module moves onto the device (`_module`), needs the layout of torch's own
    # tensors (recording costs about 0.1 us more per op than with a slot: 4.1 against 4.0 us on
    # a chain of `x * 1.0001 + 0.5`, same runs).
    _xp: Any
    # A tensor that owns its data has these class defaults; a view sets its own.
    _root: Optional["LazyTensor"] = None
    _fwd: Optional[Fwd] = None
    _bwd: Optional[Bwd] = None
    _gen: int = 0
    _seen: int = 0
    # Whether the dtype is complex, kept beside it: `is_complex()` on a wrapper subclass costs
    # a third of a microsecond, and dispatch asks it of every argument (see `_dispatch`).
    _complex: bool = False
    # A tensor as torch.compile traces it: no engine value, its ops run on a fake (`_compile`).
    _traced: bool = False
    # Whether it reports a layout other than contiguous from offset 0: a view's (`_layout`).
    _strided: bool = False

    @staticmethod
    def __new__(cls, value: Any, requires_grad: bool = False) -> "LazyTensor":
        dtype = TO_TORCH[value.dtype]
        r = torch.Tensor._make_wrapper_subclass(
            cls,
            tuple(value.shape),
            dtype=dtype,
            device=_DEVICE,
            requires_grad=requires_grad,
        )
        # The native dispatcher makes the wrappers of real results itself, the same way
        # (`torch_dispatch.rs`, `Bridge::wrap`): a change here is a change there.
        r._xp = value
        if dtype in _COMPLEX:
            r._complex = True
        return r

    __torch_function__ = torch._C._disabled_torch_function_impl

    # torch.compile: the traceable-subclass protocol, one shape-only inner tensor (`_compile`).
    def __tensor_flatten__(self) -> Any:
        return ["_compile_meta"], None

    # (`_compile` is imported at the end of this module: these run for every argument and
    # result of a compiled graph's call, where an import statement each cost a microsecond.)
    @staticmethod
    def __tensor_unflatten__(inner: Any, ctx: Any, size: Any, stride: Any) -> "LazyTensor":
        return _compile.unflatten(inner, ctx, size, stride)

    # The meta stand-in (`_compile.meta_of`), asked twice per argument per call: natively in
    # the common case, a stand-in made for a tensor that owns its value.
    _compile_meta = _native.StandIn(lambda t: _compile.meta_of(t))

    # Native (no Python frame per op): it takes the common case and hands the rest to
    # `_dispatch.dispatch`.
    __torch_dispatch__ = classmethod(_native.torch_dispatch)  # type: ignore[assignment]

    @property  # type: ignore[override]
    def data(self) -> torch.Tensor:
        # A detached alias (torch's own getter dispatches `detach`, a view here).
        return torch.Tensor.data.__get__(self)  # type: ignore[attr-defined]

    @data.setter
    def data(self, new: torch.Tensor) -> None:
        # `p.data = t` replaces the values (and, in torch, the shape) behind `p` itself; torch's
        # setter updates the metadata, the engine value is rebound here.
        if isinstance(new, LazyTensor):
            x = value(new)
        elif isinstance(new, torch.Tensor):
            x = to_engine(new)
        else:
            raise TypeError(f"data must be a tensor, not {type(new).__name__}")
        # (A laid-out view's strides address its root: the tensor owns its value from now on.)
        owner = new if isinstance(new, LazyTensor) and not new._strided else LazyTensor(x)
        torch.Tensor.data.__set__(self, owner)  # type: ignore[attr-defined]
        self._xp = x
        self._complex = self.dtype in _COMPLEX
        self._root = self._fwd = self._bwd = None
        self._gen += 1
        self.__dict__.pop("_meta", None)  # torch.compile's stand-in was for the old shape

    def tolist(self) -> Any:  # type: ignore[override]
        # torch refuses `tolist` to tensor subclasses: the values, read to the host (a sync).
        return to_cpu(self).tolist()

    def __reduce_ex__(self, protocol: Any) -> Any:  # type: ignore[override]
        # `torch.save` of a tensor or a state_dict on the device: the values, read to the host (a
        # sync), which `torch.load` puts back on the device (torch's own way for a device without
        # storage; `weights_only` loading allows it, `map_location="cpu"` keeps them on the CPU).
        # A view is saved as its values: views hold functions, which do not pickle.
        return (
            torch._utils._rebuild_device_tensor_from_cpu_tensor,
            (to_cpu(self), self.dtype, str(self.device), self.requires_grad),
        )

    def _xp_dtype(self) -> str:
        return engine_dtype(self.dtype)

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        # Never executes: a debugger or a notebook showing a tensor must not run the graph.
        dims = ", ".join(str(d) for d in self.shape)
        extra = ""
        if self.grad_fn is not None:
            extra = f", grad_fn=<{type(self.grad_fn).__name__}>"
        elif self.requires_grad:
            extra = ", requires_grad=True"
        return f"tensor(<lazy {str(self.dtype).replace('torch.', '')}[{dims}]>, device='{_DEVICE}'{extra})"

    def __str__(self) -> str:
        # print(t) shows the values, as torch does: a read the profiler records as a sync.
        text = repr(to_cpu(self))
        return text[:-1] + f", device='{_DEVICE}')" if text.endswith(")") else text

    def __format__(self, format_spec: str) -> str:
        # f"{loss}" of a 0-dim tensor is its number on CUDA and the CPU (torch formats a plain
        # Tensor so, and a subclass as its str): a read, as there.
        if self.dim() == 0:
            return self.detach().item().__format__(format_spec)
        return object.__format__(self, format_spec)


# ---- values, views and writes ----------------------------------------------------------------


# The attributes the bridge keeps on a lazy tensor object (the class's own state, never a user's).
BRIDGE_ATTRIBUTES = frozenset(
    ("_xp", "_root", "_fwd", "_bwd", "_gen", "_seen", "_complex", "_traced", "_strided", "_meta")
)


def value(t: LazyTensor) -> Any:
    """The tensor's current engine value (a view recomputed if its root changed)."""
    root = t._root
    if root is None:
        return t._xp
    if t._seen != root._gen or t._xp is None:
        t._xp = t._fwd(root._xp)  # type: ignore[misc]
        t._seen = root._gen
    return t._xp


def assign(t: LazyTensor, new: Any) -> LazyTensor:
    """Writes ``new`` into ``t`` (its dtype and shape kept), and through a view into its root."""
    if not hasattr(new, "dtype"):
        new = _native.full(tuple(t.shape), new, dtype=t._xp_dtype())
    if new.dtype != t._xp_dtype():
        new = new.astype(t._xp_dtype())
    shape = tuple(t.shape)
    if tuple(new.shape) != shape:
        new = new.expand(*shape) if shape else new.reshape(())
    rebind(t, new)
    return t


def rebind(t: LazyTensor, new: Any) -> None:
    """The write of ``assign``, of a value known to have ``t``'s dtype and shape (checked by
    ``assign``; a compiled graph's result for the argument it writes, which a compiled optimizer
    step does four times per parameter, is known to)."""
    root = t._root
    if root is None:
        new._take_place_of(t._xp)  # its name (findings, step after step) and its buffer (donated)
        t._xp = new
        t._gen += 1
        return
    whole = t._bwd(root._xp, new)  # type: ignore[misc]
    whole._take_place_of(root._xp)
    root._xp = whole
    root._gen += 1
    t._xp = new
    t._seen = root._gen


def make_view(base: LazyTensor, fwd: Fwd, bwd: Bwd, requires_grad: bool = False,
              bwd_reads_base: bool = True) -> LazyTensor:
    """A view of ``base``: ``fwd`` maps the base's value to the view's, ``bwd`` writes back.
    ``bwd_reads_base=False`` says that ``bwd`` ignores its first argument (a reshape, a
    transpose): a write through a view of this view then does not recompute this view's base
    value for it, which would leave unused nodes in the graph (and the root undonated). Linked
    to its root natively, as the native dispatcher's views are (``torch_dispatch.rs``: ``link``):
    a view of a view reaches the root through its base's steps."""
    v = LazyTensor(fwd(value(base)))
    _native.link_view(v, base, fwd, bwd, bwd_reads_base)
    return v


def wrap(x: Any) -> LazyTensor:
    return LazyTensor(x)


# ---- host <-> engine ------------------------------------------------------------------------


def to_engine(t: torch.Tensor) -> Any:
    """A CPU tensor's values as a new engine tensor (device data)."""
    if t.layout != torch.strided:
        raise TypeError(f"{t.layout} tensors are not supported on the xlaprof device (only strided, dense ones)")
    t = t.detach()
    if t.dtype == torch.bfloat16:  # NumPy has none: its bits cross, as device data (no op)
        return _native.from_bfloat16_bits(np.require(t.contiguous().view(torch.int16).numpy(), requirements="C"))
    dtype = engine_dtype(t.dtype)
    x = _native.from_array(np.require(t.contiguous().numpy(), requirements="C"))
    return x.astype(dtype) if x.dtype != dtype else x


def to_cpu(t: LazyTensor) -> torch.Tensor:
    """Reads a lazy tensor's values into a new CPU tensor (runs what is pending)."""
    x = value(t)
    bounds = _check.before_read(x) if x.is_pending else None
    if bounds is not None:  # the index checks of what the read computes, in its own program
        _native.compute_with(x, [bounds[0]._xp])
    arr = np.asarray(x.numpy(force=True))
    out = torch.from_numpy(np.array(arr, copy=True))
    if out.dtype != t.dtype:
        out = out.to(t.dtype)
    if bounds is not None:
        _check.after_sync(bounds, ahead=False)
    else:
        _check.after_wait()
    return out.reshape(tuple(t.shape))


# ---- the backend kernels torch calls on the device itself ----------------------------------


def _zeros(size: Any, dtype: Optional[torch.dtype]) -> LazyTensor:
    dtype = dtype or torch.get_default_dtype()
    return LazyTensor(_native.zeros(*[int(s) for s in size], dtype=engine_dtype(dtype)))


def empty_memory_format(size, dtype=None, layout=None, device=None, pin_memory=None,  # type: ignore[no-untyped-def]
                        memory_format=None):
    _check_layout(layout)
    return _zeros(size, dtype)


def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):  # type: ignore[no-untyped-def]
    _check_layout(layout)
    return _zeros(size, dtype)


def copy_from(src, dst, non_blocking=False):  # type: ignore[no-untyped-def]
    if isinstance(dst, LazyTensor):
        assign(dst, to_engine(src) if not isinstance(src, LazyTensor) else value(src))
        return dst
    dst.copy_(to_cpu(src))
    return dst


def _check_layout(layout: Any) -> None:
    if layout not in (None, torch.strided):
        raise TypeError(f"{layout} tensors are not supported on the xlaprof device (only strided)")


from . import _compile  # noqa: E402  (imports this module: see `LazyTensor._compile_meta`)
