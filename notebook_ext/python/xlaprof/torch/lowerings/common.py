"""What the lowerings of every family share: the exception by which a lowering declines a call,
dtype and dimension helpers, and the index arithmetic several families address tensors by.
"""

from __future__ import annotations

import time
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch

import xlaprof as xp
from xlaprof import _native

from .._device import engine_dtype

aten = torch.ops.aten


def dt(dtype: Optional[torch.dtype]) -> Optional[str]:
    return None if dtype is None else engine_dtype(dtype)


def reduction_dims(dim: Any, ndim: int) -> List[int]:
    if dim is None:
        return list(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    if len(dim) == 0:
        return list(range(ndim))
    return [d % ndim if ndim else 0 for d in dim]


def is_float(x: Any) -> bool:
    return x.dtype in ("float32", "float64", "float16", "bfloat16")


def is_complex(x: Any) -> bool:
    return x.dtype in ("complex64", "complex128")


def to_float(x: Any) -> Any:
    return x if is_float(x) else x.astype(engine_dtype(torch.get_default_dtype()))


_HALF = ("bfloat16", "float16")


def half_in_float(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` computed in float32 for half-precision (bfloat16, float16) arguments, its float32
    results rounded back once to the dtype of its first half-precision tensor: as torch's CPU and
    CUDA kernels compute normalizations, softmax, variances and scans of half-precision tensors
    (in their accumulate type), whose result is their input's dtype whatever their weights'.
    Computed in bfloat16 instead, a layer norm over 512 values was off by 9e-3 of its size, where
    torch's is off by 3e-3. An op given its result's dtype (``dtype=``, keyword-only in aten's
    schemas) computes in that one."""
    return _computed_in_float(fn, _first_half)


def elementwise_in_float(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, an elementwise op whose result takes its arguments' promoted dtype, computed in
    float32 where that dtype is half precision and rounded back once, as torch's kernels compute
    in their ``opmath`` type: ``exp2`` as ``exp(x ln 2)`` in bfloat16 was off by 3e-2 of its size,
    where torch is off by 7e-4, and ``log2``, ``hypot``, ``sinc``, ``addcmul`` by 2x torch's.
    Where the promoted dtype is wider (a float32 tensor takes part), the half-precision arguments
    are promoted first, so that no step of ``fn`` rounds to half precision."""
    return _computed_in_float(fn, _promoted)


# A plan: the dtype half-precision arguments compute in, and the one float32 results are rounded
# back to (None: none are).
_Plan = Optional[Tuple[str, Optional[str]]]


def _first_half(tensors: Sequence[Any]) -> _Plan:
    half = next((a.dtype for a in tensors if a.dtype in _HALF), None)
    return None if half is None else ("float32", half)


def _promoted(tensors: Sequence[Any]) -> _Plan:
    # torch's promotion: a dimensioned tensor's dtype outranks a 0-dim one's of the same kind.
    floats = [a for a in tensors if is_float(a)]
    dtypes = {a.dtype for a in ([a for a in floats if a.ndim > 0] or floats)}
    if not dtypes & set(_HALF):
        return None
    if len(dtypes) == 1:
        return "float32", dtypes.pop()
    return ("float64" if "float64" in dtypes else "float32"), None


def _computed_in_float(fn: Callable[..., Any], plan_of: Callable[[Sequence[Any]], _Plan]
                       ) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        plan = plan_of([a for a in (*args, *kwargs.values()) if isinstance(a, xp.Tensor)])
        if plan is None or kwargs.get("dtype") is not None:
            return fn(*args, **kwargs)
        compute, result = plan

        def up(a: Any) -> Any:
            return a.astype(compute) if isinstance(a, xp.Tensor) and a.dtype in _HALF else a

        def down(r: Any) -> Any:
            if isinstance(r, (tuple, list)):
                return type(r)(down(x) for x in r)
            return r.astype(result) if isinstance(r, xp.Tensor) and r.dtype == "float32" else r

        out = fn(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items()})
        return out if result is None else down(out)

    return run


def vjp(fn: Callable[..., Any], inputs: Sequence[Any], grad: Any) -> List[Any]:
    """Gradients of ``fn`` at ``inputs`` for output gradient ``grad``, by the engine's own
    autograd (recorded lazily like any op): the backward of ops whose forward the engine has."""
    leaves = [x.detach().requires_grad_(True) if x is not None and is_float(x) else x for x in inputs]
    out = fn(*leaves)
    out.backward(grad)
    grads = []
    for leaf in leaves:
        g = getattr(leaf, "grad", None) if leaf is not None else None
        grads.append(g.detach() if g is not None else (xp.zeros_like(leaf) if leaf is not None else None))
    return grads


def read_size(count: Any, op: str, what: str) -> int:
    """``count`` (a 0-d engine value) read to the host, as the size of ``op``'s result: the data
    decides it, so the read is a sync, as on CUDA. The profiler hears of it as a size read
    (``what``: whose count it is), at the user's line."""
    start = time.perf_counter()
    size = int(count.item())
    _native.size_read(op, what, size, time.perf_counter() - start)
    return size


def factory_dtype(dtype: Any, fill: Any = 0.0) -> str:
    if dtype is not None:
        return engine_dtype(dtype)
    if isinstance(fill, bool):
        return "bool"
    if isinstance(fill, int):
        return "int64"
    return engine_dtype(torch.get_default_dtype())


def like_factory(make: Callable[..., Any]) -> Callable[..., Any]:
    """``zeros_like`` and its kin: ``make`` at ``x``'s shape, in ``x``'s dtype unless given (the
    layout, device and memory format arguments name nothing else on this device), split as ``x``
    is split over a mesh (an optimizer's state follows its parameter)."""

    def like(x: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None,
             memory_format: Any = None) -> Any:
        made = make(*x.shape, dtype=dt(dtype) or x.dtype)
        _native.shard_like(made, x)
        return made

    return like


def triangle(x: Any, diagonal: int, lower_part: bool) -> Any:
    rows, cols = x.shape[-2], x.shape[-1]
    r = xp.arange(0, rows, 1, dtype="int64").unsqueeze(1)
    c = xp.arange(0, cols, 1, dtype="int64").unsqueeze(0)
    keep = (c - r) <= diagonal if lower_part else (c - r) >= diagonal
    return xp.where(keep, x, xp.zeros_like(x))


class Unsupported(NotImplementedError):
    """A lowered op called with arguments the engine cannot take: the dispatcher falls back."""


def contiguous_strides(shape: Sequence[int]) -> List[int]:
    """torch's strides of a contiguous tensor of ``shape`` (a dim of size 0 counts as 1)."""
    out, acc = [], 1
    for s in reversed(list(shape)):
        out.append(acc)
        acc *= max(int(s), 1)
    return list(reversed(out))


def broadcast_shape(shapes: Sequence[Sequence[int]]) -> List[int]:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s):
            j = ndim - len(s) + i
            if n != 1:
                out[j] = n
    return out


def expand_to(v: Any, shape: Sequence[int]) -> Any:
    shape = list(shape)
    if list(v.shape) == shape:
        return v
    while v.ndim < len(shape):
        v = v.unsqueeze(0)
    return v.expand(*shape)


def flat_positions(x: Any, dim: int, index: Any) -> Any:
    """Each element of ``index`` as a flat position in ``x``: its own coordinates, with the
    coordinate along ``dim`` replaced by its value (gather's and scatter's addressing)."""
    strides = contiguous_strides(x.shape)
    idx = index.astype("int64")
    idx = xp.where(idx < 0, idx + x.shape[dim], idx)
    flat = idx * strides[dim]
    for d in range(index.ndim):
        if d == dim:
            continue
        shape = [1] * index.ndim
        shape[d] = index.shape[d]
        coord = xp.arange(0, index.shape[d], 1, dtype="int64").reshape(*shape)
        flat = flat + coord * strides[d]
    return flat


def write_rows(base: Any, index: Any, rows: Any) -> Any:
    """``base`` with its rows (dim 0) at ``index`` replaced by ``rows``; a row written more than
    once takes the mean of its writes (torch leaves which one wins undefined)."""
    n = base.shape[0]
    hits = xp.zeros(n, dtype="int32").index_add(0, index, xp.ones(index.shape[0], dtype="int32"))
    summed = xp.zeros_like(base).index_add(0, index, rows)
    per_row = [n] + [1] * (base.ndim - 1)
    count = hits.maximum(1).astype(base.dtype).reshape(*per_row)
    written = summed / count if is_float(base) else summed.div(count, rounding_mode="trunc")
    return xp.where((hits > 0).reshape(*per_row), written.astype(base.dtype), base)


def diag_len(rows: int, cols: int, offset: int) -> int:
    return max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))


def diagonal_of(v: Any, offset: int, d1: int, d2: int) -> Any:
    rest = [i for i in range(v.ndim) if i not in (d1, d2)]
    moved = v.permute(*rest, d1, d2)
    rows, cols = v.shape[d1], v.shape[d2]
    n = diag_len(rows, cols, offset)
    lead = [v.shape[i] for i in rest]
    if n == 0:
        return xp.zeros(*lead, 0, dtype=v.dtype)
    start = (0, offset) if offset >= 0 else (-offset, 0)
    flat = moved.reshape(*lead, rows * cols)
    positions = xp.arange(0, n, 1, dtype="int64") * (cols + 1) + (start[0] * cols + start[1])
    return flat.index_select(len(lead), positions)


def reduce_product(x: Any, axes: List[int], keepdim: bool) -> Any:
    # The engine reduces by sum, max and min: a product is exp(sum(log|x|)) with its sign and
    # its zeros counted separately.
    zero = x.eq(0)
    mag = xp.where(zero, xp.ones_like(x), x.abs()).log().sum(axes, keepdim=keepdim).exp()
    negatives = (x < 0).astype("int64").sum(axes, keepdim=keepdim)
    sign = 1.0 - negatives.remainder(2).astype(x.dtype) * 2.0
    any_zero = zero.astype("int64").sum(axes, keepdim=keepdim) > 0
    return xp.where(any_zero, xp.zeros_like(mag), mag * sign)
