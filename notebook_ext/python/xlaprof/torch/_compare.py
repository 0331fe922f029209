"""``compare_with_eager(fn, *args)``: runs ``fn`` on the device and in torch's CPU eager, and
compares every aten op's output, so a wrong lowering is named by its op and the user's line
instead of showing up as a loss that drifts after many steps.

Both runs go under a dispatch mode that sees each aten op as torch calls it (above the bridge on
the device, above the CPU kernels in eager) and keeps its outputs: on the device they stay
pending until one sync at the end computes them all in one graph. The two sequences of ops are
paired by data flow (see `_compare`; an op the device runs another way is paired by its values,
an op seen by one run only is skipped), and the first pair beyond tolerance is the divergence.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from .. import _native
from ._dispatch import _line_of, _user_site


class _Op:
    """One aten op as a run saw it: its inputs and outputs (the objects themselves, held, so
    their ids stay theirs), and the user's line."""

    __slots__ = ("name", "inputs", "outputs", "values", "site", "view")

    def __init__(self, name: str, inputs: List[Any], outputs: List[Any], values: Optional[List[Any]],
                 site: Optional[Tuple[str, int, str]], view: bool) -> None:
        self.name, self.inputs, self.outputs, self.values, self.site = name, inputs, outputs, values, site
        self.view = view

    @property
    def line(self) -> str:
        return _line_of(self.site)


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: List[_Op] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        # The values as the op made them: a later in-place op changes the tensor itself (on the
        # device, the copy is one more node of the graph the final sync computes).
        values = [t.detach().clone() for t in outputs] if _valued(func) else None
        view = bool(getattr(func, "is_view", False))
        self.ops.append(_Op(str(func.overloadpacket), inputs, outputs, values, _user_site(), view))
        return out


# Ops whose outputs are not values to compare: allocations (whatever memory held) and random
# draws (the device's generator is not torch's CPU one). Their outputs still pair the ops that
# use them.
_ALLOCATIONS = {"aten.empty", "aten.empty_like", "aten.empty_strided", "aten.empty_permuted",
                "aten.new_empty", "aten.new_empty_strided", "aten.resize_"}
_RANDOM = ("rand", "normal", "uniform", "bernoulli", "dropout", "multinomial", "exponential",
           "cauchy", "geometric", "log_normal", "random_")


def _valued(func: Any) -> bool:
    """Whether an op's outputs are values to keep. A view's are (not compared: they are its
    input's, compared where they were made; but they pair an op the device ran another way)."""
    name = str(func.overloadpacket)
    return not (name in _ALLOCATIONS or any(r in name for r in _RANDOM))


@dataclass
class Divergence:
    op: str
    line: str
    max_error: float
    tolerance: float
    shape: Tuple[int, ...]
    expected_range: Tuple[float, float]
    got_range: Tuple[float, float]

    def __str__(self) -> str:
        return (
            f"`{self.op}` at {self.line}: max |device - eager| = {self.max_error:.3g} over {list(self.shape)} "
            f"(tolerance {self.tolerance:.3g}); eager's values in [{self.expected_range[0]:.4g}, "
            f"{self.expected_range[1]:.4g}], the device's in [{self.got_range[0]:.4g}, {self.got_range[1]:.4g}]"
        )


@dataclass
class Comparison:
    """What ``compare_with_eager`` found: ops compared, and the first divergence (or None)."""

    compared: int
    skipped: int
    by_value: int = 0
    first: Optional[Divergence] = None
    worst: List[Tuple[str, str, float]] = field(default_factory=list)

    def __str__(self) -> str:
        head = f"compared {self.compared} aten ops with torch's CPU eager ({self.skipped} seen by one run only"
        if self.by_value:
            head += f", {self.by_value} run another way on the device, paired by their values"
        head += ")"
        if self.first is None:
            return head + ": every output within tolerance"
        return f"{head}: the first divergence is {self.first}"

    __repr__ = __str__


def _to(value: Any, device: Any) -> Any:
    """A module copied to `device`; tensors (also inside lists, tuples and dicts) moved there."""
    if isinstance(value, torch.nn.Module):
        return copy.deepcopy(value).to(device)

    def move(t: Any) -> Any:
        if isinstance(t, torch.Tensor):
            return t.detach().to(device).requires_grad_(t.requires_grad)
        return t

    return tree_map(move, value)


def compare_with_eager(fn: Callable[..., Any], *args: Any, rtol: float = 1e-4, atol: float = 1e-5, **kwargs: Any) -> Comparison:
    """Runs ``fn(*args, **kwargs)`` on the device and in CPU eager (modules are copied, tensors
    moved), compares every aten op's output, and names the first beyond ``atol + rtol * |eager|``.
    Random ops are not compared (the device draws its own numbers): seed nothing on it, or leave
    dropout off."""
    from . import device, sync

    dev = device()
    cpu_args, dev_args = [_to(a, "cpu") for a in args], [_to(a, dev) for a in args]
    cpu_kwargs = {k: _to(v, "cpu") for k, v in kwargs.items()}
    dev_kwargs = {k: _to(v, dev) for k, v in kwargs.items()}
    with _Recorder() as eager:
        fn(*cpu_args, **cpu_kwargs)
    with _Recorder() as lazy:
        fn(*dev_args, **dev_kwargs)
    sync()  # every recorded output computed in one graph
    for op in lazy.ops:  # and read once
        if op.values is not None:
            op.values = [t.cpu() for t in op.values]
    # The runs start from the same values: each module's parameters and buffers, each tensor.
    roots = {id(e): d for e, d in zip(_leaves(cpu_args, cpu_kwargs), _leaves(dev_args, dev_kwargs))}
    return _compare(eager.ops, lazy.ops, roots, rtol, atol)


def _leaves(args: List[Any], kwargs: Any) -> List[torch.Tensor]:
    out: List[torch.Tensor] = []
    for a in [*args, *kwargs.values()]:
        if isinstance(a, torch.nn.Module):
            out += [*a.parameters(), *a.buffers()]
        else:
            out += [t for t in tree_flatten(a)[0] if isinstance(t, torch.Tensor)]
    return out


def _compare(eager: List[_Op], lazy: List[_Op], roots: dict, rtol: float, atol: float) -> Comparison:
    """Pairs the runs' ops by data flow, not by order (autograd may run a backward's ops in
    another order on each backend): an eager op's pair is the device's op of the same name whose
    inputs are the pairs of its inputs; its outputs are then paired, and compared."""
    result = Comparison(compared=0, skipped=0)
    pair = dict(roots)  # id of an eager tensor -> the device's tensor
    waiting: dict = {}
    by_name: dict = {}
    for op in lazy:
        waiting.setdefault((op.name, tuple(id(t) for t in op.inputs)), []).append(op)
        by_name.setdefault(op.name, []).append(op)
    taken: set = set()
    used: set = set()  # device tensors paired by value
    position = {id(o): i for i, o in enumerate(lazy)}
    cursor = 0  # where the device's run is: the last op paired
    for op in eager:
        key = (op.name, tuple(id(pair[id(t)]) if id(t) in pair else -1 for t in op.inputs))
        found = next((o for o in waiting.get(key, []) if id(o) not in taken), None)
        if found is None and -1 in key[1]:
            # An input made outside any op (`torch.tensor(...)` inside the model): the first op
            # of this name whose other inputs agree, and the constant is paired through it.
            shapes = [tuple(t.shape) for t in op.outputs]
            candidates = [
                o for o in by_name.get(op.name, []) if id(o) not in taken and len(o.inputs) == len(key[1])
                and all(k == -1 or k == id(t) for k, t in zip(key[1], o.inputs))
                and [tuple(t.shape) for t in o.outputs] == shapes
            ]
            # Paired by name and shape only, an op is paired with one that agrees with it (the
            # gradient buffers autograd fills are alike): a divergence is named only between ops
            # paired by data flow, never by a guess.
            if op.values is not None:
                candidates = [o for o in candidates if o.values is not None
                              and _errors(op.values, o.values, rtol, atol)[0] == 0]
            found = candidates[0] if candidates else None
            if found is not None:
                for e, d in zip(op.inputs, found.inputs):
                    pair.setdefault(id(e), d)
        if found is None:
            window = lazy[max(0, cursor - _NEAR): cursor + _NEAR]
            near = sorted(window, key=lambda o: abs(position[id(o)] - cursor))
            if _pair_by_value(op, near, pair, used, rtol, atol):
                result.by_value += 1
            else:
                result.skipped += 1
            continue
        taken.add(id(found))
        cursor = position[id(found)]
        for e, d in zip(op.outputs, found.outputs):
            pair[id(e)] = d
        if op.view or op.values is None or found.values is None:
            continue
        over, worst, divergence = _errors(op.values, found.values, rtol, atol)
        if divergence is None:
            continue
        result.compared += 1
        result.worst.append((op.name, op.line, worst))
        if result.first is None and over:
            want, got, limit = divergence
            result.first = Divergence(op.name, op.line, worst, limit, tuple(want.shape), _range(want), _range(got))
            _native.caught("compare_with_eager", f"diverged from torch's CPU eager: {result.first}", found.site)
    return result


# How far from where the device's run is (the last op paired) an op run another way is looked
# for: a decomposition's ops, or a formula's, lie together.
_NEAR = 64


def _pair_by_value(op: _Op, candidates: List[_Op], pair: dict, used: set, rtol: float, atol: float) -> bool:
    """An eager op the device ran another way (a fused CPU kernel, such as CPU attention, that
    the device computes from its decomposition; a linear layer's weight gradient, which
    autograd computes transposed or not by the operands' strides): each of its outputs is paired
    with a tensor the device made near where its run is (`candidates`, nearest first), of the
    same shape and dtype, that agrees with it, so the ops that use it are paired by data flow
    again. Not compared: agreeing is how it was found."""
    if op.values is None:
        return False

    def agreeing(want: torch.Tensor) -> Any:
        made = ((t, v) for cand in candidates if cand.values is not None for t, v in zip(cand.outputs, cand.values))
        return next((t for t, v in made if id(t) not in used and v.shape == want.shape and v.dtype == want.dtype
                     and _agree(want, v, rtol, atol)), None)

    # An output the device has no counterpart of (a fused kernel's saved statistics, say) stays
    # unpaired, and so do the ops that use it.
    found = [(out, match) for out, want in zip(op.outputs, op.values) if (match := agreeing(want)) is not None]
    for out, match in found:
        pair[id(out)] = match
        used.add(id(match))
    return bool(found)


def _agree(want: torch.Tensor, got: torch.Tensor, rtol: float, atol: float) -> bool:
    """Whether two floating-point tensors hold values within tolerance (never two empty ones)."""
    over, _, detail = _errors([want], [got], rtol, atol)
    return detail is not None and over == 0


def _errors(outputs: List[torch.Tensor], got: List[torch.Tensor], rtol: float, atol: float) -> Any:
    """(outputs beyond tolerance, the largest error, (eager's, the device's, tolerance) of the
    worst output) of one op; None in the last place when no output holds values to compare."""
    over, worst, detail = 0, 0.0, None
    for w, g in zip(outputs, got):
        # Values only: integer outputs are indices and counts, compared through what uses them.
        if not (w.is_floating_point() or w.is_complex()) or w.numel() == 0:
            continue
        if g.dtype != w.dtype or g.shape != w.shape:
            continue
        wide = torch.complex128 if w.is_complex() else torch.float64
        w, g = w.to(wide), g.to(wide)
        err = (w - g).abs().double()
        err = torch.where(torch.isnan(w) & torch.isnan(g), torch.zeros_like(err), err)
        err = torch.where(torch.isnan(err), torch.full_like(err, float("inf")), err)
        limit = atol + rtol * w.abs().double()
        beyond = bool((err > limit).any())
        over += beyond
        e = float(err.max())
        if detail is None or e > worst:
            worst, detail = e, (w, g, float(limit.max()))
    return over, worst, detail


def _range(t: torch.Tensor) -> Tuple[float, float]:
    """The smallest and largest finite values (of the real parts)."""
    t = t.real if t.is_complex() else t
    t = t[torch.isfinite(t)]
    return (float(t.min()), float(t.max())) if t.numel() else (float("nan"), float("nan"))


__all__ = ["compare_with_eager", "Comparison", "Divergence"]
