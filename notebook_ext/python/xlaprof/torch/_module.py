"""Moving a module onto the device, or off it, keeps its parameters as on CUDA: the same objects.

On CUDA, ``model.to("cuda")`` changes each parameter in place (``param.data = moved``), so a
parameter shared by two modules (GPT-2's ``lm_head.weight is transformer.wte.weight``) stays one
parameter, an optimizer made before the move still holds the model's parameters, and attributes
set on a parameter survive. torch does that only between tensor types whose storage it can swap
(CPU and CUDA); for any other device type ``Module._apply`` makes a new ``Parameter`` for each
module that holds one, so a tied weight became two, trained apart: silently another model.

``Module._apply`` is wrapped (once, by ``register``): after torch's conversion, every parameter
that changed between the device and another one becomes, in place, a parameter with the moved
value (``torch.utils.swap_tensors``, torch's own way to change a tensor object's contents while
keeping its identity), and every module that held it holds it again. Conversions that do not
touch the device are left as torch made them.

A lazy module (``nn.LazyLinear``) moved before its first call keeps its uninitialized
parameters and buffers, as on CUDA: they stay uninitialized, marked for the device, and are made
there, with the dtype of the move, when the first call gives them a shape.

A module moved onto the device names its parameters and buffers for the profiler
(``model.lm_head.weight``): findings say which tensor changed or stopped being donated by that
name, not by the line that last wrote it. The module's own name is the caller's variable.
"""

from __future__ import annotations

import linecache
import os
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch.nn.parameter import UninitializedTensorMixin

from .. import _native
from ._tensor import _DEVICE, BRIDGE_ATTRIBUTES, LazyTensor, value


_original_apply: Callable[..., Any] = torch.nn.Module._apply
_converting = threading.local()


def register() -> None:
    """Wraps ``torch.nn.Module._apply`` (idempotent)."""
    if torch.nn.Module._apply is not _apply:
        torch.nn.Module._apply = _apply  # type: ignore[method-assign]
    if UninitializedTensorMixin.materialize is not _materialize:
        UninitializedTensorMixin.materialize = _materialize  # type: ignore[method-assign]
    # A lazy tensor is a traceable subclass (for torch.compile, `_compile`), which `_apply`
    # takes as a reason to swap each moved parameter for a new `Parameter` of it (attributes
    # lost, the parameter a view of the moved tensor); the swap here is the one that keeps them.
    module_code = torch.nn.modules.module
    traceable = module_code.is_traceable_wrapper_subclass
    if not getattr(traceable, "_xlaprof", False):
        def is_traceable_wrapper_subclass(t: Any) -> bool:
            return not isinstance(t, LazyTensor) and traceable(t)

        is_traceable_wrapper_subclass._xlaprof = True  # type: ignore[attr-defined]
        module_code.is_traceable_wrapper_subclass = is_traceable_wrapper_subclass


def _apply(self: torch.nn.Module, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
    # torch's `_apply` recurses into the children: only the outermost call restores identities.
    if getattr(_converting, "active", False):
        return _original_apply(self, fn, recurse)
    modules = list(self.modules()) if recurse else [self]
    # Whether each was on the device is noted now: a parameter held twice is swapped at its first
    # holder, before the second is looked at.
    held: List[Tuple[torch.nn.Module, str, torch.Tensor, bool]] = [
        (m, key, p, isinstance(p, LazyTensor)) for m in modules for key, p in m._parameters.items() if p is not None
    ]
    uninitialized = [(table, key, t) for m in modules for table in (m._parameters, m._buffers)
                     for key, t in table.items() if isinstance(t, UninitializedTensorMixin)]
    on_device = _count_on_device(self) if recurse else 0
    _converting.active = True
    try:
        out = _original_apply(self, fn, recurse)
    finally:
        _converting.active = False
    for table, key, t in uninitialized:
        moved = table[key]
        if isinstance(moved, LazyTensor):
            # torch made an empty tensor of it on the device, no longer uninitialized: the
            # module would never give it its shape. It stays as it was, made on the device later.
            t._xlaprof_device_dtype = moved.dtype
            table[key] = t
    if torch.__future__.get_overwrite_module_params_on_conversion():
        return out  # the user asked for new parameter objects
    kept: Dict[int, torch.Tensor] = {}
    for module, key, old, was_lazy in held:
        new = module._parameters[key]
        if new is None or new is old or isinstance(new, LazyTensor) == was_lazy:
            continue
        if id(old) not in kept:
            kept[id(old)] = _in_place(old, new)
        module._parameters[key] = kept[id(old)]  # type: ignore[assignment]
    if recurse and _count_on_device(self) > on_device:
        _name_tensors(self)
    return out


_original_materialize = UninitializedTensorMixin.materialize


def _materialize(self: Any, shape: Any, device: Any = None, dtype: Any = None) -> None:
    """An uninitialized parameter or buffer moved to the device is made there, in place (the
    module and any optimizer keep the object), as what torch would have made it."""
    device_dtype = vars(self).get("_xlaprof_device_dtype")
    if device_dtype is None or device is not None:
        return _original_materialize(self, shape, device, dtype)
    made = torch.empty(shape, device=_DEVICE, dtype=dtype or device_dtype)
    if issubclass(self.cls_to_become, torch.nn.Parameter):
        fresh = LazyTensor(value(made), requires_grad=self.requires_grad)
        fresh._is_param = True
    else:
        fresh = made
    del vars(self)["_xlaprof_device_dtype"]
    _swap(self, fresh)


def _count_on_device(module: torch.nn.Module) -> int:
    return sum(isinstance(t, LazyTensor) for kind in (module.parameters(), module.buffers()) for t in kind)


_TORCH_DIR = os.path.dirname(torch.__file__)
_BRIDGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _name_tensors(module: torch.nn.Module) -> None:
    """Names the engine values of ``module``'s parameters and buffers on the device
    ``<module>.<qualified name>`` (a tied weight once, by its first name, as torch lists it)."""
    prefix = _module_name(module)
    for kind in (module.named_parameters(), module.named_buffers()):
        for name, t in kind:
            if isinstance(t, LazyTensor) and not t._traced:
                value(t).name = f"{prefix}.{name}"


def _module_name(module: torch.nn.Module) -> str:
    """The user's name for ``module``: the variable that holds it in the frame that moved it, or
    the one that line assigns (``model = Net().to(dev)``), else its class name."""
    frame: Optional[Any] = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith((_TORCH_DIR, _BRIDGE_DIR)):
        frame = frame.f_back
    if frame is None:
        return type(module).__name__
    for name, v in frame.f_locals.items():
        if v is module:
            return name
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    return _native.assigned_variable(line) or type(module).__name__


def _swap(t: torch.Tensor, other: torch.Tensor) -> None:
    """``torch.utils.swap_tensors(t, other)``, ``t``'s gradient hooks kept. A hook registered
    on a tensor (``p.register_hook(clip)``, ``register_post_accumulate_grad_hook``) lives in the
    autograd state of the tensor's data, which the swap hands to ``other``, while the hooks' table
    stays with ``t``'s Python object: the hooks then never ran, and a gradient clipped or masked
    by one trained unclipped, silently. Set again, the table registers them on ``t``'s new data,
    as ``param.data = moved`` keeps them on CUDA."""
    hooks, post_hooks = t._backward_hooks, t._post_accumulate_grad_hooks
    torch.utils.swap_tensors(t, other)
    if hooks:
        t._backward_hooks = hooks
    if post_hooks:
        t._post_accumulate_grad_hooks = post_hooks


def _in_place(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """``old`` with ``new``'s value, device and gradient, where torch can swap them (else ``new``,
    which every holder of ``old`` then shares: still one parameter)."""
    if isinstance(new, LazyTensor):
        # A parameter that owns its value (torch's `Parameter(moved)` is a detached view of the
        # moved tensor: writes through it would take the slower way of views).
        fresh: torch.Tensor = LazyTensor(value(new), requires_grad=old.requires_grad)
    else:
        fresh = new
    grad, old_grad = new.grad, old.grad
    # Attributes set on the parameter (`p._is_hf_initialized`, `p.sequence_parallel`) stay, as
    # `param.data = moved` keeps them on CUDA.
    carried = {k: v for k, v in vars(old).items() if k not in BRIDGE_ATTRIBUTES}
    try:
        # A gradient held counts as a use of the tensor, which swap_tensors refuses.
        new.grad = None
        old.grad = None
        vars(fresh).update(carried)
        if isinstance(fresh, LazyTensor):
            fresh._is_param = True  # what `nn.Parameter(t)` marks a tensor subclass with
        _swap(old, fresh)
    except RuntimeError:
        # A tensor torch cannot swap (a weak reference to it, another use of it): the holders
        # share the new parameter instead.
        old.grad = old_grad
        new.grad = grad
        vars(new).update(carried)
        return new
    old.grad = grad
    return old
