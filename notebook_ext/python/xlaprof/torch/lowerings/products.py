"""Matrix and vector products: ``mm``, ``bmm``, ``addmm``, ``baddbmm``, ``addbmm``, ``dot``, ``mv``,
``vdot``, ``addr``, ``trace``, ``linalg_cross``, and grouped matrix products.
"""

from __future__ import annotations

from typing import Any

import torch

import xlaprof as xp

from .common import Unsupported, aten, dt, is_float
from .registry import declare, lower, lower_named


@lower(aten.linalg_cross.default)
def linalg_cross(a: Any, b: Any, dim: int = -1) -> Any:
    shape = tuple(torch.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
    a, b = a.expand(*shape), b.expand(*shape)
    d = dim % len(shape)

    def at(x: Any, i: int) -> Any:
        return x[tuple(i if k == d else slice(None) for k in range(len(shape)))]

    parts = [at(a, 1) * at(b, 2) - at(a, 2) * at(b, 1),
             at(a, 2) * at(b, 0) - at(a, 0) * at(b, 2),
             at(a, 0) * at(b, 1) - at(a, 1) * at(b, 0)]
    return xp.stack(parts, d)


@lower(aten.mm.default, aten.bmm.default, complex_safe=True, autocast="lower_precision")
def mm(a: Any, b: Any) -> Any:
    return a.matmul(b)


@lower(aten.addmm.default, autocast="lower_precision")
def addmm(bias: Any, a: Any, b: Any, beta: Any = 1, alpha: Any = 1) -> Any:
    if not is_float(a):
        # alpha and beta take the tensors' dtype, as in torch: integers stay integers.
        alpha, beta = int(alpha), int(beta)
    if a.dtype in ("bfloat16", "float16"):
        # Computed in float32 and rounded once, as torch's CPU kernel does.
        f32 = [t.astype("float32") if hasattr(t, "astype") else t for t in (bias, a, b)]
        return addmm(f32[0], f32[1], f32[2], beta, alpha).astype(a.dtype)
    prod = a.matmul(b)
    if alpha != 1:
        prod = prod * alpha
    return prod + (bias if beta == 1 else bias * beta) if beta != 0 else prod


@lower(aten.baddbmm.default, autocast="lower_precision")
def baddbmm(bias: Any, a: Any, b: Any, beta: Any = 1, alpha: Any = 1) -> Any:
    return addmm(bias, a, b, beta, alpha)


@lower(aten.dot.default, autocast="widest")
@lower(aten.mv.default, autocast="lower_precision")
def dot(a: Any, b: Any) -> Any:
    return a.matmul(b)


def _in_group(offs: Any, n: int) -> Any:
    """(groups, n) bools: whether each of ``n`` positions lies in each group of ``_grouped_mm``,
    the consecutive ranges ending at the cumulative ``offs`` (an empty group repeats an end).
    Made by comparisons, never by reading ``offs``: its values are the router's token counts,
    data of the step, and reading them would sync and make the graph's shapes follow them."""
    pos = xp.arange(0, n, 1, dtype=offs.dtype)
    # A position's group is the number of ends at or before it; past the last end it is in none.
    gid = (offs.reshape(-1, 1) <= pos.reshape(1, n)).astype("int32").sum([0])
    groups = xp.arange(0, offs.shape[0], 1, dtype=gid.dtype)
    return gid.reshape(1, n) == groups.reshape(-1, 1)


@lower(aten._grouped_mm.default)
def grouped_mm(a: Any, b: Any, offs: Any = None, bias: Any = None, out_dtype: Any = None) -> Any:
    """Mixture-of-experts layers (transformers 5's Mixtral, Qwen2-MoE) and its own backward, which
    calls it again in the other forms. Each form is computed densely: every group's product at
    the full, static shape, the rows (or columns, or terms) of other groups masked out. That is
    the group count times a plain matmul's work, but one fixed graph whatever the routing."""
    if bias is not None:
        raise Unsupported("_grouped_mm with a bias (torch's own kernels take none yet)")
    dtype = dt(out_dtype) or a.dtype
    if a.dtype in ("bfloat16", "float16"):
        # Computed in float32 and rounded once, as torch's CPU kernel (a mm per group) does.
        a, b = a.astype("float32"), b.astype("float32")
    if a.ndim == 3 and b.ndim == 3:
        # Batched: one matrix per group, no offsets.
        out = a.matmul(b)
    elif a.ndim == 2 and b.ndim == 3:
        # (m, k) rows split by offs, each group's rows times its (k, n): the forward.
        inside = _in_group(offs, a.shape[0])
        # Selected with `where` rather than multiplied by the mask, so that an inf in one group's
        # product does not make NaNs (inf * 0) in another's rows, as it does not on the CPU.
        out = xp.where(inside.reshape(b.shape[0], -1, 1), a.matmul(b), 0.0).sum([0])
    elif a.ndim == 3 and b.ndim == 2:
        # (g, m, k) times (k, n) whose columns are split by offs (the forward's input gradient
        # when the weights were passed transposed).
        inside = _in_group(offs, b.shape[1])
        out = xp.where(inside.reshape(a.shape[0], 1, -1), a.matmul(b), 0.0).sum([0])
    else:
        # (m, k) times (k, n), the contraction split by offs, one (m, n) per group: the weights'
        # gradient. Both sides are masked, so that a term outside a group is 0 * 0 whatever its
        # values (an inf in one group's tokens stays out of the others' gradients).
        inside = _in_group(offs, a.shape[1])
        groups = offs.shape[0]
        out = xp.where(inside.reshape(groups, 1, -1), a, 0.0).matmul(
            xp.where(inside.reshape(groups, -1, 1), b, 0.0))
    return out.astype(dtype)


@lower_named("transformers::grouped_mm_fallback")
def grouped_mm_fallback(x: Any, w: Any, offs: Any) -> Any:
    """The op transformers' MoE layers call under torch.compile, whose own kernel reads the
    offsets on the host and loops over the groups: the forward form above, (groups, k, n)."""
    return grouped_mm(x, w, offs)


@lower_named("transformers::grouped_mm_fallback_backward")
def grouped_mm_fallback_backward(x: Any, w: Any, offs: Any, grad: Any) -> Any:
    return grouped_mm(grad, w.transpose(1, 2), offs), grouped_mm(x.transpose(0, 1), grad, offs)


@lower(aten.vdot.default)
def vdot(a: Any, b: Any) -> Any:
    return (a * b).sum()


@lower(aten.addr.default, autocast="lower_precision")
def addr(x: Any, v1: Any, v2: Any, beta: Any = 1, alpha: Any = 1) -> Any:
    outer = v1.unsqueeze(1) * v2.unsqueeze(0)
    return (x * beta if beta != 1 else x) + (outer * alpha if alpha != 1 else outer) if beta != 0 else outer * alpha


@lower(aten.addbmm.default, autocast="lower_precision")
def addbmm(x: Any, b1: Any, b2: Any, beta: Any = 1, alpha: Any = 1) -> Any:
    if not is_float(b1):
        alpha, beta = int(alpha), int(beta)  # the tensors' dtype, as in torch
    low = b1.dtype in ("bfloat16", "float16")
    # Low-precision products summed over the batch in float32, as torch's CPU kernel does.
    total = (b1.astype("float32").matmul(b2.astype("float32")) if low else b1.matmul(b2)).sum([0])
    out = (x * beta if beta != 1 else x) + total * alpha if beta != 0 else total * alpha
    return out.astype(b1.dtype) if low else out


@lower(aten.trace.default)
def trace_(x: Any) -> Any:
    n, m = x.shape
    eye = xp.eye(n, m, dtype=x.dtype)
    return (x * eye).sum(dtype="int64" if not is_float(x) else None)


# torch's autocast lists for CUDA (aten/src/ATen/autocast_mode.cpp) name these ops, which torch
# decomposes into the ones lowered here.
declare("addmv", "matmul", "einsum", "linalg_vecdot", "chain_matmul", "linalg_multi_dot",
        autocast="lower_precision")
declare("cross", "tensordot", autocast="widest")
