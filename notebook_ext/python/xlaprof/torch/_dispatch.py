"""Where each aten op goes: a lowering, torch's decomposition of it, or the CPU fallback.

1. Lowered ops (``lowerings``); the in-place and ``out=`` forms of lowered functional ops (the
   functional op runs and its result is written into the mutated argument); the ``*_copy``
   forms of lowered views (the view, copied). Each op's route is found once and cached.
2. torch's own decompositions (``torch._decomp``, then the op's CompositeImplicit kernel): the
   pieces come back here, so the engine grows primitives rather than a second lowering path.
3. The CPU fallback: the arguments are read to the host (a sync the profiler records at the
   user's line), the op runs on torch's CPU kernel, the results are uploaded. Counted and timed
   per op (``xt.fallbacks()``); with ``XLAPROF_STRICT=1`` it is an error naming the op instead.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch.optim.optimizer import _foreach_supported_types as _optimizer_types
from torch.utils._foreach_utils import _foreach_supported_types as _utils_types
from torch.utils._pytree import tree_map

from .. import _breaks, _native
from ._device import DEVICE_TYPE, TO_ENGINE, engine_dtype
from . import _check, _compile
from .lowerings.common import Unsupported as _Unsupported
from .lowerings.registry import COMPLEX_SAFE, ENGINE_OPERATORS, FUNCTIONAL, NAMED, NATIVE_VIEWS, RAW
from . import _tensor as _tensor_module
from ._layout import laid_out
from ._tensor import LazyTensor, assign, make_view, to_cpu, to_engine, value

aten = torch.ops.aten

_DECOMPOSITIONS: Dict[Any, Any] = {}
# op name -> [calls, seconds]
_FALLBACKS: Dict[str, List[float]] = {}
_warned: set = set()


def _decompositions() -> Dict[Any, Any]:
    if not _DECOMPOSITIONS:
        from torch._decomp import decomposition_table

        # torch's decompositions into aten ops; its `_refs` go down to `prims`, another op set.
        _DECOMPOSITIONS.update(
            (op, fn)
            for op, fn in decomposition_table.items()
            if getattr(fn, "__module__", "") == "torch._decomp.decompositions"
        )
    return _DECOMPOSITIONS


def strict() -> bool:
    return os.environ.get("XLAPROF_STRICT", "").strip() not in ("", "0")


def fallbacks() -> Dict[str, Tuple[int, float]]:
    """Each aten op that ran on the CPU: (calls, seconds)."""
    return {name: (int(c), s) for name, (c, s) in _FALLBACKS.items()}


# ---- arguments ------------------------------------------------------------------------------

_PLAIN = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.memory_format, torch.layout)


def _unwrap(a: Any) -> Any:
    """An argument as a lowering takes it: a lazy tensor's engine value, a CPU 0-dim tensor as a
    Python number (torch lets one mix with device tensors), other CPU tensors uploaded. By hand,
    not with torch's pytree: this runs for every argument of every op."""
    t = type(a)
    if t is LazyTensor:
        return a._xp if a._root is None else value(a)
    if t in _PLAIN:
        return a
    if t is list or t is tuple:
        return t(_unwrap(v) for v in a)
    if isinstance(a, LazyTensor):
        return value(a)
    if t is complex:
        # A Python complex number is complex64 beside a tensor, as torch's scalars are.
        return _native.from_array(np.array(a, dtype=np.complex64))
    if isinstance(a, torch.Tensor):
        if a.device.type == "cpu":
            if a.dim() == 0:
                return a.item()
            raise _CpuOperand(a)
    return a


def _unwrap_uploading(a: Any) -> Any:
    """``_unwrap`` for the ops that take CPU tensors beside device ones (``_TAKE_CPU_TENSORS``):
    those are uploaded."""
    t = type(a)
    if t is list or t is tuple:
        return t(_unwrap_uploading(v) for v in a)
    if isinstance(a, torch.Tensor) and not isinstance(a, LazyTensor) and a.device.type == "cpu" and a.dim():
        return to_engine(a)
    return _unwrap(a)


class _CpuOperand(Exception):
    """A CPU tensor (not 0-dim) given to an op with device tensors: an error, as on CUDA."""


# Ops whose CUDA kernels take CPU tensors beside device ones, as torch allows: the indices of
# advanced indexing (`x[cpu_index]`, `x[cpu_index] = v`).
_TAKE_CPU_TENSORS = frozenset((
    aten.index.Tensor, aten._unsafe_index.Tensor, aten.index_put.default, aten._unsafe_index_put.default,
))


def _mixed_devices(func: Any, a: Tuple[Any, ...], k: Dict[str, Any]) -> RuntimeError:
    """CUDA's error for a CPU tensor among device tensors, naming the argument and the user's line
    (torch would otherwise copy it to the device every step, silently)."""
    names = [p.name for p in func._schema.arguments]
    given = list(zip(names, a)) + list(k.items())
    arg, shape = "an argument", None
    for name, v in given:
        for t in v if isinstance(v, (list, tuple)) else (v,):
            if isinstance(t, torch.Tensor) and not isinstance(t, LazyTensor) and t.device.type == "cpu" and t.dim():
                arg, shape = f"`{name}`", list(t.shape)
                break
        if shape is not None:
            break
    file, line = _user_frame()
    return RuntimeError(
        f"Expected all tensors to be on the same device, but {arg} of {func.name()} "
        f"(a tensor of shape {shape}) is on cpu, different from other tensors on {DEVICE_TYPE}:0, at "
        f"{file}:{line}: move it with .to(xt.device()) or create it on the device (a 0-dim CPU tensor "
        "may be mixed in, as torch allows)"
    )


def _wrap(x: Any) -> Any:
    t = type(x)
    if t is tuple or t is list:
        return t(_wrap(v) for v in x)
    if x is None or t in (LazyTensor, bool, int, float):
        return x
    return LazyTensor(x)


def _is_device(d: Any) -> bool:
    if d is None:
        return False
    return torch.device(d).type == DEVICE_TYPE


# ---- dispatch -------------------------------------------------------------------------------

Route = Callable[[Tuple[Any, ...], Dict[str, Any]], Any]
# Each op's route, found on its first call: the lookups below run once per op, not per call.
_ROUTES: Dict[Any, Route] = {}
# The native dispatcher's table (`src/py/torch_dispatch.rs`, which defines the numbers written
# here: `_native.DISPATCH_CODES`): an op whose route is a functional lowering, a raw one, or the
# in-place form of a functional one, noted here when its route is found; from then on the
# native dispatcher runs it itself when its arguments are plain, and hands it here otherwise.
_NATIVE: Dict[Any, Tuple[int, Callable[..., Any], int]] = {}
_CODES = _native.DISPATCH_CODES
_NATIVE_FUNCTIONAL, _NATIVE_RAW, _NATIVE_IN_PLACE, _NATIVE_VIEW = (
    _CODES["routes"][kind] for kind in ("functional", "raw", "in_place", "view"))
# Raw lowerings of the commonest views (`lowerings.views.view`, `alias`, `permute`, `transpose`,
# `t_`, `unsqueeze`: their `native_view=`): the native dispatcher makes these views itself, the
# same way, and calls the lowering only for arguments it does not take.
_VIEW = _CODES["views"]
_NATIVE_VIEWS = {op: _VIEW[name] for op, name in NATIVE_VIEWS.items()}
# Functional lowerings that are one engine operator when their first argument is a tensor
# (`lowerings.elementwise.add`: `a.add(b)`, `sub`, `mul`: `a * b`, `div`: `a / b`: their
# `engine_operator=`): the native dispatcher calls the operator itself, without the lowering's
# frame.
_OPERATOR = _CODES["operators"]
_ENGINE_OPERATORS = {op: _OPERATOR[name] for op, name in ENGINE_OPERATORS.items()}


def dispatch(func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    if _compile.tracing and _compile.any_traced(args, kwargs):
        return _compile.traced_dispatch(func, args, kwargs)
    route = _ROUTES.get(func)
    if route is None:
        route = _route(func)
        if _check.ENABLED and func in _check.CHECKED:
            # Every call through the check: the native dispatcher does not take the op.
            _NATIVE.pop(func, None)
            route = _check.bounds_checked(route, func, _user_site)
        _ROUTES[func] = route
    return route(args, kwargs)


def _route(func: Any) -> Route:
    special = _SPECIAL.get(func)
    if special is not None:
        return special
    raw = RAW.get(func)
    if raw is not None:
        if func.is_view:  # its views laid out as torch lays them out (`_layout`)
            raw = laid_out(func, raw)
        view = _NATIVE_VIEWS.get(func)
        _NATIVE[func] = (_NATIVE_VIEW, raw, view) if view else (_NATIVE_RAW, raw, 0)
        return _real_only(_or_else(lambda a, k: raw(*a, **k), func), func)
    fn = FUNCTIONAL.get(func) or NAMED.get(func.name())
    if fn is not None:
        _NATIVE[func] = (_NATIVE_FUNCTIONAL, fn, _ENGINE_OPERATORS.get(func, 0))
        unwrap = _unwrap_uploading if func in _TAKE_CPU_TENSORS else _unwrap

        def functional(a: Tuple[Any, ...], k: Dict[str, Any]) -> Any:
            try:
                args = [unwrap(v) for v in a]
                kwargs = {n: unwrap(v) for n, v in k.items()} if k else k
            except _CpuOperand:
                raise _mixed_devices(func, a, k) from None
            return _wrap(fn(*args, **kwargs))

        return _real_only(_or_else(functional, func), func)
    each = _foreach_route(func)
    if each is not None:
        return _or_else(each, func)
    mutating = _mutating_route(func)
    if mutating is not None:
        return _or_else(mutating, func)
    copy = _copy_variant_route(func)
    if copy is not None:
        return _or_else(copy, func)
    return _unlowered(func)


def _real_only(route: Route, func: Any) -> Route:
    """``route``, unless an argument is complex and the op's lowering was written for real
    numbers (``complex_safe=`` in the registry: ``COMPLEX_SAFE``): then what an op without a lowering does."""
    if func.overloadpacket in COMPLEX_SAFE:
        return route
    instead = _unlowered(func)

    def run(a: Tuple[Any, ...], k: Dict[str, Any]) -> Any:
        for v in a:
            if type(v) is LazyTensor and v._complex:
                return instead(a, k)
            if type(v) in (list, tuple) and any(type(t) is LazyTensor and t._complex for t in v):
                return instead(a, k)
        if k and any(type(v) is LazyTensor and v._complex for v in k.values()):
            return instead(a, k)
        return route(a, k)

    return run


def _foreach_route(func: Any) -> Optional[Route]:
    """``torch._foreach_add_(xs, ys)`` and the other multi-tensor ops (what torch's optimizers and
    ``clip_grad_norm_`` call on accelerators): the per-tensor op for each element, each taking
    its own route (so lowered and recorded as one op would be), without a torch dispatch per
    element (each goes to the native dispatcher). Lists are taken element by element, single
    values are shared; a tensor of scalars (``_foreach_addcdiv_.Tensor``) gives each element its
    own value. An in-place op without a per-tensor in-place form (``_foreach_maximum_``) writes
    the functional op's results into the first list."""
    name = func._schema.name.split("::")[-1]
    if not name.startswith("_foreach_"):
        return None
    base = name[len("_foreach_"):]
    packet, by_keyword = _FOREACH_AS.get(base, (getattr(aten, base, None), ()))
    write_back = packet is None and base.endswith("_")
    if write_back:
        packet = getattr(aten, base[:-1], None)
    if packet is None:
        return None
    lists = [str(a.type).startswith("List[") for a in func._schema.arguments]
    # `_foreach_addcdiv_.Tensor(..., Tensor scalars)`: a CPU tensor of one scalar per element.
    per_element_scalars = [a.name == "scalars" and str(a.type) == "Tensor" for a in func._schema.arguments]
    returns_list = bool(func._schema.returns)
    schema_names = [a.name for a in func._schema.arguments]
    moved = sorted(schema_names.index(n) for n in by_keyword)
    overloads: Dict[Tuple[str, ...], Tuple[Any, List[str]]] = {}

    def each(a: Tuple[Any, ...], k: Dict[str, Any]) -> Any:
        per_element = []
        count = next(len(v) for v, is_list in zip(a, lists) if is_list)  # `pow(2.0, xs)` too
        for i in range(count):
            args = []
            for v, is_list, scalars in zip(a, lists, per_element_scalars):
                if is_list:
                    v = v[i]
                elif scalars and not isinstance(v, LazyTensor):
                    v = v[i].item()
                args.append(v)
            keywords = dict(k)
            for position in reversed(moved):
                if position < len(args):
                    keywords[schema_names[position]] = args.pop(position)
            kinds = tuple("t" if isinstance(v, torch.Tensor) else "s" for v in args) + tuple(keywords)
            found = overloads.get(kinds)
            if found is None:
                found = overloads[kinds] = _overload_for(packet, args, keywords)
            op, by_name = found
            positional = len(args) - len(by_name)
            keywords.update(zip(by_name, args[positional:]))
            out = _per_element(LazyTensor, op, (), tuple(args[:positional]), keywords)
            if write_back:
                assign(args[0], value(out))
            per_element.append(out)
        return per_element if returns_list else None

    return each


# Foreach ops whose per-tensor op has another name, and their last arguments, which it takes by
# keyword.
_FOREACH_AS = {"norm": (aten.linalg_vector_norm, ("dtype",))}

# The native dispatcher, which hands back to `dispatch` what it does not take.
_per_element = _native.torch_dispatch


def _overload_for(packet: Any, args: List[Any], kwargs: Dict[str, Any]) -> Tuple[Any, List[str]]:
    """The overload of ``packet`` that a call with these arguments means, and the names of its
    keyword-only parameters that arguments past its positional ones fill (the foreach ops take
    ``addcmul``'s ``value`` by position): each argument of the kind its parameter takes, a number
    also where a tensor is taken when nothing else fits (as torch passes a number given for a
    tensor)."""
    def fits(value: Any, param: Any, loose: bool) -> bool:
        kind = str(param.real_type)
        if kind.startswith("Optional["):
            if value is None:
                return True
            kind = kind[len("Optional["):-1]
        if isinstance(value, torch.Tensor):
            return kind == "Tensor"
        if isinstance(value, torch.dtype):
            return kind == "ScalarType"
        if isinstance(value, (list, tuple)):
            return kind.startswith("List[")
        if isinstance(value, (bool, int, float)):
            scalar = kind in ("number", "Scalar", "int", "float", "bool", "SymInt")
            return scalar or (loose and kind == "Tensor")
        return False

    def slots(op: Any, loose: bool) -> Optional[List[str]]:
        params = op._schema.arguments
        positional = [p for p in params if not p.kwarg_only]
        keyword = [p for p in params if p.kwarg_only and p.name not in kwargs]
        ordered = positional + keyword
        if len(args) > len(ordered) or any(n not in {p.name for p in params} for n in kwargs):
            return None
        if any(p.default_value is None and not str(p.type).startswith("Optional")
               for p in ordered[len(args):] if not p.kwarg_only):
            return None
        if not all(fits(v, p, loose) for v, p in zip(args, ordered)):
            return None
        return [p.name for p in ordered[len(positional):len(args)]]

    ops = [getattr(packet, n) for n in packet.overloads()]
    for loose in (False, True):
        for op in ops:
            by_name = slots(op, loose)
            if by_name is not None:
                return op, by_name
    raise _Unsupported(f"no overload of {packet} takes {args}")


def _copy_variant_route(func: Any) -> Optional[Route]:
    """``permute_copy``, ``view_copy``, ...: the view op, then a copy that aliases nothing."""
    name = func._schema.name.split("::")[-1]
    if not name.endswith("_copy"):
        return None
    view = getattr(getattr(aten, name[: -len("_copy")], None), func._overloadname, None)
    if view is None or (view not in RAW and view not in FUNCTIONAL):
        return None
    inner = _route(view)

    def copied(a: Tuple[Any, ...], k: Dict[str, Any]) -> Any:
        return _wrap(_copy_out(inner(a, k)))

    return copied


def _copy_out(x: Any) -> Any:
    if isinstance(x, (tuple, list)):
        return type(x)(_copy_out(v) for v in x)
    return value(x).clone() if isinstance(x, LazyTensor) else x


def _or_else(route: Route, func: Any) -> Route:
    """``route``, or where an op goes without a lowering when the lowering declines the call."""
    def run(a: Tuple[Any, ...], k: Dict[str, Any]) -> Any:
        try:
            return route(a, k)
        except _Unsupported:
            return _unlowered(func)(a, k)

    return run


_COMPOSITE = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)


def _unlowered(func: Any) -> Route:
    decomposition = _decompositions().get(func)
    implicit = func is not aten.to.dtype_layout and torch._C._dispatch_has_kernel_for_dispatch_key(
        func.name(), "CompositeImplicitAutograd"
    )
    # A custom op (``torch.library.custom_op``) whose implementation is for every device: it is
    # written in torch ops, and runs on these tensors as on CUDA's. An aten op's explicit kernel
    # is C++ that may touch memory, so aten ops are not taken this way.
    composite = func.namespace != "aten" and torch._C._dispatch_has_kernel_for_dispatch_key(
        func.name(), "CompositeExplicitAutograd"
    )

    def run(a: Tuple[Any, ...], k: Dict[str, Any]) -> Any:
        if decomposition is not None:
            out = decomposition(*a, **k)
            if out is not NotImplemented:
                return out
        if implicit:
            out = func.decompose(*a, **k)
            if out is not NotImplemented:
                return out
        if composite:
            return func.redispatch(_COMPOSITE, *a, **k)
        return _fallback(func, a, k)

    return run


def _to_copy(a: Tuple[Any, ...], k: Dict[str, Any]) -> Any:
    src = a[0]
    device = k.get("device")
    dtype = k.get("dtype")
    if device is not None and not _is_device(device):
        # `.cpu()` / `.to("cpu")`: the host reads the values (a sync).
        out = to_cpu(src)
        return out.to(dtype) if dtype is not None else out
    if not isinstance(src, LazyTensor):
        # `.to(device)` of a CPU tensor: its values are uploaded.
        x = to_engine(src)
        return LazyTensor(x.astype(engine_dtype(dtype)) if dtype is not None else x)
    x = value(src)
    return LazyTensor(x.astype(engine_dtype(dtype)) if dtype is not None else x.clone())


def _local_scalar_dense(a: Tuple[Any, ...], k: Dict[str, Any]) -> Any:
    return to_cpu(a[0]).item()


def _copy_(a: Tuple[Any, ...], k: Dict[str, Any]) -> Any:
    dst, src = a[0], a[1]
    if not isinstance(dst, LazyTensor):
        dst.copy_(to_cpu(src))
        return dst
    if isinstance(src, LazyTensor):
        return assign(dst, value(src))
    return assign(dst, to_engine(src) if isinstance(src, torch.Tensor) else src)


_SPECIAL: Dict[Any, Route] = {
    aten._to_copy.default: _to_copy,
    aten._local_scalar_dense.default: _local_scalar_dense,
    aten.copy_.default: _copy_,
}


def _functional_form(func: Any, name: str) -> Any:
    """The overload of ``name`` that an in-place op computes: the one of the same name when it
    takes a tensor first, as the in-place op does, else the one with the in-place op's argument
    types (``pow_.Scalar`` is ``x.pow_(2)``, which is ``pow.Tensor_Scalar``; ``pow.Scalar`` is
    ``2 ** x``)."""
    packet = getattr(aten, name, None)
    if packet is None:
        return None
    same = getattr(packet, func._overloadname, None)
    if same is not None and str(same._schema.arguments[0].type) == "Tensor":
        return same
    kinds = [str(a.type) for a in func._schema.arguments]
    overloads = [getattr(packet, n) for n in packet.overloads()]
    return next((op for op in overloads if [str(a.type) for a in op._schema.arguments] == kinds), None)


def _functional_of_out(func: Any, outs: List[str]) -> Any:
    """The overload an ``out=`` op computes: the one whose arguments are the out op's but its
    outputs, by name and type, and perhaps keyword-only ones with defaults besides (a factory's
    ``dtype=``, ``device=``). Overload names do not pair up: ``div.out`` is
    ``div.Tensor``, ``div.out_mode`` is ``div.Tensor_mode``, ``sum.IntList_out`` is
    ``sum.dim_IntList``, ``std.out`` is ``std.dim``, not ``std.default``."""
    want = [(a.name, str(a.type)) for a in func._schema.arguments if a.name not in outs]
    names = {n for n, _ in want}
    packet = func.overloadpacket
    for name in packet.overloads():
        op = getattr(packet, name)
        arguments = op._schema.arguments
        if any(_writes(a) for a in arguments):
            continue
        extra = [a.kwarg_only and a.has_default_value() and a.name not in names for a in arguments]
        if [(a.name, str(a.type)) for a, more in zip(arguments, extra) if not more] == want:
            return op
    return None


def _mutating_route(func: Any) -> Optional[Route]:
    """``x.add_(y)`` and ``torch.add(x, y, out=z)`` as the lowered functional op plus a write."""
    schema = func._schema
    name = schema.name.split("::")[-1]
    if name.endswith("_") and schema.arguments and _writes(schema.arguments[0]):
        functional = _functional_form(func, name[:-1])
        if functional is None or (functional not in FUNCTIONAL and functional not in _SPECIAL):
            return None
        inner = _route(functional)
        kind, fn, operator = _NATIVE.get(functional, (None, None, 0))
        if kind == _NATIVE_FUNCTIONAL:
            _NATIVE[func] = (_NATIVE_IN_PLACE, fn, operator)

        def in_place(a: Tuple[Any, ...], k: Dict[str, Any]) -> Any:
            result = inner(a, k)
            assign(a[0], value(result))
            return a[0]

        return in_place
    outs = [a.name for a in schema.arguments if a.kwarg_only and _writes(a)]
    if not outs:
        return None
    functional = _functional_of_out(func, outs)
    if functional is None or functional not in FUNCTIONAL:
        return None
    inner = _route(functional)

    def out_form(a: Tuple[Any, ...], k: Dict[str, Any]) -> Any:
        targets = [k[o] for o in outs]
        result = inner(a, {n: v for n, v in k.items() if n not in outs})
        results = result if isinstance(result, (tuple, list)) else (result,)
        if any(tuple(t.shape) != tuple(r.shape) for t, r in zip(targets, results)):
            raise _Unsupported("a resize of `out`: the fallback does it")
        for target, r in zip(targets, results):
            assign(target, value(r))
        return targets[0] if len(targets) == 1 else tuple(targets)

    return out_form


def _writes(arg: Any) -> bool:
    return arg.alias_info is not None and arg.alias_info.is_write


# ---- the CPU fallback -----------------------------------------------------------------------


def _fallback(func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    full = str(func.name())  # aten::add.Tensor, or a custom op's namespace::name
    name = full.replace("aten::", "")
    if any(isinstance(a, torch.Tensor) and a.is_sparse for a in _tensors(args, kwargs)):
        raise TypeError(f"{full}: sparse tensors are not supported on the xlaprof device")
    if _breaks.breaking("fallback"):
        file, line = _user_frame()
        message = (
            f"XLAPROF_BREAK=fallback: {full} at {os.path.basename(file)}:{line} is not lowered by "
            "xlaprof: it would run on the CPU, which splits the graph and copies its operands to the host"
        )
        _native.caught("break_on", message)
        raise _native.BreakError(message)
    if strict():
        file, line = _user_frame()
        raise NotImplementedError(
            f"{full} at {os.path.basename(file)}:{line} is not lowered by xlaprof, and "
            "XLAPROF_STRICT=1 forbids running it on the CPU"
        )
    if name not in _warned:
        _warned.add(name)
        file, line = _user_frame()
        warnings.warn_explicit(
            f"{full} is not lowered by xlaprof: it runs on the CPU, which splits the graph and "
            "copies its operands to the host (XLAPROF_STRICT=1 makes this an error)",
            UserWarning,
            file,
            line,
        )
    start = time.perf_counter()

    def down(a: Any) -> Any:
        if isinstance(a, LazyTensor):
            return to_cpu(a)
        if isinstance(a, torch.device) and a.type == DEVICE_TYPE:
            return torch.device("cpu")
        return a

    cpu_args = tree_map(down, args)
    cpu_kwargs = tree_map(down, kwargs)
    to_device = False
    if "device" in kwargs and _is_device(kwargs["device"]):
        cpu_kwargs["device"] = torch.device("cpu")
        to_device = True
    out = func(*cpu_args, **cpu_kwargs)

    # Writes into the arguments reach the lazy tensors they came from.
    written: Dict[int, LazyTensor] = {}
    flat_sources = list(args) + [kwargs.get(a.name) for a in func._schema.arguments if a.kwarg_only]
    flat_cpu = list(cpu_args) + [cpu_kwargs.get(a.name) for a in func._schema.arguments if a.kwarg_only]
    for src, cpu in zip(flat_sources, flat_cpu):
        if isinstance(src, LazyTensor) and isinstance(cpu, torch.Tensor):
            written[id(cpu)] = src
    for arg, src, cpu in zip(func._schema.arguments, flat_sources, flat_cpu):
        if _writes(arg) and isinstance(src, LazyTensor):
            assign(src, to_engine(cpu))
        elif _writes(arg) and isinstance(src, (list, tuple)):  # `Tensor(a!)[]`: each element
            for s, c in zip(src, cpu):
                if isinstance(s, LazyTensor):
                    assign(s, to_engine(c))

    uploads = to_device or any(isinstance(a, LazyTensor) for a in _tensors(args, kwargs))

    # A view the CPU returned cannot alias its lazy base: reading it is right, writing through
    # it is an error that says so (never a write that silently goes nowhere).
    views = any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)

    def up(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and not isinstance(x, LazyTensor):
            if id(x) in written:
                return written[id(x)]
            if not uploads:
                return x
            copy = LazyTensor(to_engine(x))
            return _unaliased_view(copy, full) if views else copy
        return x

    result = tree_map(up, out)
    seconds = time.perf_counter() - start
    _native.host_fallback(full, seconds)  # at once: the profiler dates it from its end
    entry = _FALLBACKS.setdefault(name, [0, 0.0])
    entry[0] += 1
    entry[1] += seconds
    return result


def _unaliased_view(t: LazyTensor, op: str) -> LazyTensor:
    def no_write(root: Any, new: Any) -> Any:
        raise NotImplementedError(
            f"{op} ran on the CPU (no lowering), so the view it returned is a copy: a write "
            "through it cannot reach the tensor it views"
        )

    return make_view(t, lambda r: r, no_write)


def _user_code_frame() -> Any:
    """The innermost frame outside torch and xlaprof: where the user called the op."""
    torch_dir = os.path.dirname(torch.__file__)
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if not (path.startswith(torch_dir) or path.startswith(ours)):
            return frame
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _user_frame() -> Tuple[str, int]:
    """Where the user called the op: its file's path and line."""
    frame = _user_code_frame()
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("<unknown>", 0)


def _user_line() -> str:
    """`train.py:12 in step`: the user's line, as errors and tools name it."""
    return _line_of(_user_site())


def _user_site() -> Optional[Tuple[str, int, str]]:
    """The user's line as (file, line, function), as the profiler keeps it."""
    frame = _user_code_frame()
    if frame is None:
        return None
    return frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name


def _line_of(site: Optional[Tuple[str, int, str]]) -> str:
    if site is None:
        return "<unknown>"
    return f"{os.path.basename(site[0])}:{site[1]} in {site[2]}"


def _tensors(args: Any, kwargs: Any) -> List[torch.Tensor]:
    found: List[torch.Tensor] = []

    def visit(a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            found.append(a)
        return a

    tree_map(visit, (args, kwargs))
    return found


_native.torch_bridge_init(
    LazyTensor,
    _NATIVE,
    dispatch,
    value,
    assign,
    _Unsupported,
    list(_PLAIN),
    torch.Tensor._make_wrapper_subclass,
    {name: dtype for dtype, name in TO_ENGINE.items()},
    _tensor_module._DEVICE,
)

# torch's optimizers and `clip_grad_norm_` take their multi-tensor (foreach) paths only for the
# tensor types in these lists; torch's own DTensor adds itself the same way. The foreach ops are
# lowered here (`_foreach_route`): an optimizer step is a few dispatches, not one per op and
# parameter (AdamW's step on GPT-2's parameters records in about 60 % of the time).
for _types in (_optimizer_types, _utils_types):
    if LazyTensor not in _types:
        _types.append(LazyTensor)

