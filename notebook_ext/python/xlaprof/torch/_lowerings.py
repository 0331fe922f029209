"""aten ops lowered onto the engine's ops, one small function each.

Two kinds of entries:
- ``@lower(...)`` functional ops: their tensor arguments arrive as engine values (a CPU 0-dim
  tensor, which torch lets mix with device tensors, as a Python number), their engine results are
  wrapped back into lazy tensors;
- ``@lower_raw(...)`` ops that need the lazy tensors themselves: views (which alias their base)
  and ops that write into an argument.
In-place (``add_``) and ``out=`` forms of a lowered functional op need no entry: the dispatcher
runs the functional op and writes the result back (``_dispatch``). What is not here goes through
torch's decompositions into ops that are, and only then to the CPU fallback.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

import xlaprof as xp
from xlaprof import _native

from ._device import TO_TORCH, engine_dtype
from ._tensor import LazyTensor, assign, make_view, value

aten = torch.ops.aten

FUNCTIONAL: Dict[Any, Callable[..., Any]] = {}
RAW: Dict[Any, Callable[..., Any]] = {}
NAMED: Dict[str, Callable[..., Any]] = {}


def lower(*ops: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            FUNCTIONAL[op] = fn
        return fn

    return register


def lower_named(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A functional lowering of ops by name (``namespace::op``): ops that other libraries
    define (``transformers::grouped_mm_fallback``), which exist only once those are imported."""
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for name in names:
            NAMED[name] = fn
        return fn

    return register


def lower_raw(*ops: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            RAW[op] = fn
        return fn

    return register


def _dt(dtype: Optional[torch.dtype]) -> Optional[str]:
    return None if dtype is None else engine_dtype(dtype)


def _dims(dim: Any, ndim: int) -> List[int]:
    if dim is None:
        return list(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    if len(dim) == 0:
        return list(range(ndim))
    return [d % ndim if ndim else 0 for d in dim]


def _is_float(x: Any) -> bool:
    return x.dtype in ("float32", "float64", "float16", "bfloat16")


def _is_complex(x: Any) -> bool:
    return x.dtype in ("complex64", "complex128")


# ---- elementwise -------------------------------------------------------------------------------

for _name in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "sign",
              "floor", "relu", "silu", "logical_not"):
    lower(getattr(aten, _name).default)(
        (lambda n: lambda x: getattr(x, n)())(_name)
    )


def _to_float(x: Any) -> Any:
    return x if _is_float(x) else x.astype(engine_dtype(torch.get_default_dtype()))


# Special functions of the engine's own (XLA's): integers compute in the default float dtype.
for _name in ("lgamma", "digamma", "erfinv", "erf", "erfc", "log1p", "expm1"):
    lower(getattr(aten, _name).default)(
        (lambda n: lambda x: getattr(_to_float(x), n)())(_name)
    )


@lower(aten.polygamma.default)
def polygamma(n: int, x: Any) -> Any:
    return _to_float(x).polygamma(n)


@lower(aten.mvlgamma.default)
def mvlgamma(x: Any, p: int) -> Any:
    # log of the multivariate gamma function: p(p-1)/4 log(pi) + sum_i lgamma(x - i/2).
    x = _to_float(x)
    total = x.lgamma()
    for i in range(1, p):
        total = total + (x - i / 2).lgamma()
    return total + p * (p - 1) / 4 * math.log(math.pi)


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


@lower(aten.angle.default)
def angle(x: Any) -> Any:
    # Of a real number: pi when negative, else 0; NaN stays NaN.
    x = _to_float(x)
    return xp.where(x < 0, math.pi, 0.0 * x)


@lower(aten.renorm.default)
def renorm(x: Any, p: float, dim: int, maxnorm: float) -> Any:
    # Each slice along `dim` scaled down to a p-norm of at most maxnorm (torch's 1e-7 guard).
    d = dim % x.ndim
    others = [k for k in range(x.ndim) if k != d]
    if p == math.inf:
        norms = x.abs().amax(others, keepdim=True)
    else:
        norms = (x.abs() ** p).sum(others, keepdim=True) ** (1.0 / p)
    return x * xp.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)


@lower(aten.ceil.default)
def ceil(x: Any) -> Any:
    return x if not _is_float(x) else -((-x).floor())


@lower(aten.trunc.default)
def trunc(x: Any) -> Any:
    return x if not _is_float(x) else xp.where(x < 0, -((-x).floor()), x.floor())


@lower(aten.reciprocal.default)
def reciprocal(x: Any) -> Any:
    return 1.0 / _to_float(x)


@lower(aten.square.default)
def square(x: Any) -> Any:
    return x * x


@lower(aten.log2.default)
def log2(x: Any) -> Any:
    return _to_float(x).log() * (1.0 / math.log(2.0))


@lower(aten.log10.default)
def log10(x: Any) -> Any:
    return _to_float(x).log() * (1.0 / math.log(10.0))


@lower(aten.exp2.default)
def exp2(x: Any) -> Any:
    return (_to_float(x) * math.log(2.0)).exp()


@lower(aten.tan.default)
def tan(x: Any) -> Any:
    x = _to_float(x)
    return x.sin() / x.cos()


@lower(aten.gelu.default)
def gelu(x: Any, approximate: str = "none") -> Any:
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
        return x * 0.5 * (inner.tanh() + 1.0)
    # torch's default GELU is exact, through erf (the engine's `gelu` is the tanh form, off by
    # up to 2e-4 from it, which `compare_with_eager` found).
    return x * 0.5 * ((x * math.sqrt(0.5)).erf() + 1.0)


# `add`, `sub`, `mul` and `div` with a tensor first: the native dispatcher calls the engine's
# operator itself (see `_dispatch._ENGINE_OPERATORS`), so a change to one of these four is a
# change there.
@lower(aten.add.Tensor, aten.add.Scalar)
def add(a: Any, b: Any, alpha: Any = 1) -> Any:
    return a.add(b, alpha=alpha) if hasattr(a, "add") else xp.add(_const_like(a, b), b, alpha=alpha)


@lower(aten.sub.Tensor, aten.sub.Scalar)
def sub(a: Any, b: Any, alpha: Any = 1) -> Any:
    return a.sub(b, alpha=alpha) if hasattr(a, "sub") else _const_like(a, b).sub(b, alpha=alpha)


@lower(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(a: Any, b: Any, alpha: Any = 1) -> Any:
    return (a * alpha).__rsub__(b) if alpha != 1 else a.__rsub__(b)


def _const_like(scalar: Any, like: Any) -> Any:
    return xp.full((), scalar, dtype=like.dtype)


@lower(aten.mul.Tensor, aten.mul.Scalar)
def mul(a: Any, b: Any) -> Any:
    return a * b if hasattr(a, "mul") else b * a


@lower(aten.div.Tensor, aten.div.Scalar)
def div(a: Any, b: Any) -> Any:
    return a / b if hasattr(a, "div") else b.__rtruediv__(a)


@lower(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(a: Any, b: Any, rounding_mode: Optional[str] = None) -> Any:
    return a.div(b, rounding_mode=rounding_mode)


@lower(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor)
def pow_(a: Any, b: Any) -> Any:
    return a.pow(b)


@lower(aten.pow.Scalar)
def pow_scalar(a: Any, b: Any) -> Any:
    return b.__rpow__(a)


@lower(aten.maximum.default)
def maximum(a: Any, b: Any) -> Any:
    return a.maximum(b)


@lower(aten.minimum.default)
def minimum(a: Any, b: Any) -> Any:
    return a.minimum(b)


@lower(aten.fmod.Tensor, aten.fmod.Scalar)
def fmod(a: Any, b: Any) -> Any:
    return a.fmod(b)


@lower(aten.remainder.Tensor, aten.remainder.Scalar)
def remainder(a: Any, b: Any) -> Any:
    return a.remainder(b)


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    lower(getattr(aten, _name).Tensor, getattr(aten, _name).Scalar)(
        (lambda n: lambda a, b: getattr(a, n)(b))(_name)
    )


@lower(aten.logical_and.default)
def logical_and(a: Any, b: Any) -> Any:
    return a.astype("bool").logical_and(b.astype("bool"))


@lower(aten.logical_or.default)
def logical_or(a: Any, b: Any) -> Any:
    return a.astype("bool").logical_or(b.astype("bool"))


@lower(aten.where.self)
def where(cond: Any, a: Any, b: Any) -> Any:
    return xp.where(cond, a, b)


@lower(aten.clamp.default)
def clamp(x: Any, min: Any = None, max: Any = None) -> Any:
    return x.clamp(min, max)


@lower(aten.clamp.Tensor)
def clamp_tensor(x: Any, min: Any = None, max: Any = None) -> Any:
    if min is not None:
        x = x.maximum(min)
    if max is not None:
        x = x.minimum(max)
    return x


@lower(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(x: Any, mask: Any, v: Any) -> Any:
    # The out-of-place form broadcasts the tensor too.
    x = _expand_to(x, _broadcast_shape([x.shape, mask.shape]))
    return x.masked_fill(mask, v)


@lower(aten.lerp.Scalar, aten.lerp.Tensor)
def lerp(a: Any, b: Any, w: Any) -> Any:
    return a + (b - a) * w


@lower(aten.addcmul.default)
def addcmul(x: Any, t1: Any, t2: Any, value: Any = 1) -> Any:
    return x + t1 * t2 * value


@lower(aten.addcdiv.default)
def addcdiv(x: Any, t1: Any, t2: Any, value: Any = 1) -> Any:
    return x + t1 / t2 * value


@lower(aten._to_copy.default)
def to_copy(x: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None,
            non_blocking: bool = False, memory_format: Any = None) -> Any:
    # Only reached for a copy that stays on the device (`_dispatch` handles `.cpu()`).
    return x.astype(engine_dtype(dtype)) if dtype is not None else x.clone()


@lower(aten.clone.default)
def clone(x: Any, memory_format: Any = None) -> Any:
    return x.clone()


@lower(aten.copy.default)
def copy(dst: Any, src: Any, non_blocking: bool = False) -> Any:
    # `copy_` made functional (torch.compile's graphs): `src` in `dst`'s dtype and shape.
    if src.dtype != dst.dtype:
        src = src.astype(dst.dtype)
    return _expand_to(src, dst.shape) if list(src.shape) != list(dst.shape) else src.clone()


# ---- backward of elementwise ops ---------------------------------------------------------------


@lower(aten.threshold_backward.default)
def threshold_backward(grad: Any, x: Any, threshold: Any) -> Any:
    return xp.where(x <= threshold, xp.zeros_like(grad), grad)


@lower(aten.tanh_backward.default)
def tanh_backward(grad: Any, out: Any) -> Any:
    return grad * (1.0 - out * out)


@lower(aten.sigmoid_backward.default)
def sigmoid_backward(grad: Any, out: Any) -> Any:
    return grad * out * (1.0 - out)


@lower(aten.gelu_backward.default)
def gelu_backward(grad: Any, x: Any, approximate: str = "none") -> Any:
    return _vjp(lambda v: gelu(v, approximate), [x], grad)[0]


@lower(aten.silu_backward.default)
def silu_backward(grad: Any, x: Any) -> Any:
    s = x.sigmoid()
    return grad * s * (1.0 + x * (1.0 - s))


def _vjp(fn: Callable[..., Any], inputs: Sequence[Any], grad: Any) -> List[Any]:
    """Gradients of ``fn`` at ``inputs`` for output gradient ``grad``, by the engine's own
    autograd (recorded lazily like any op): the backward of ops whose forward the engine has."""
    leaves = [x.detach().requires_grad_(True) if x is not None and _is_float(x) else x for x in inputs]
    out = fn(*leaves)
    out.backward(grad)
    grads = []
    for leaf in leaves:
        g = getattr(leaf, "grad", None) if leaf is not None else None
        grads.append(g.detach() if g is not None else (xp.zeros_like(leaf) if leaf is not None else None))
    return grads


# ---- reductions --------------------------------------------------------------------------------


@lower(aten.sum.dim_IntList)
def sum_dim(x: Any, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Any:
    return x.sum(_dims(dim, x.ndim), keepdim=keepdim, dtype=_sum_dtype(x, dtype))


@lower(aten.sum.default)
def sum_all(x: Any, dtype: Any = None) -> Any:
    return x.sum(dtype=_sum_dtype(x, dtype))


def _sum_dtype(x: Any, dtype: Any) -> Optional[str]:
    if dtype is not None:
        return engine_dtype(dtype)
    # torch sums integers and bools as int64.
    return "int64" if not _is_float(x) and not _is_complex(x) else None


@lower(aten.mean.dim)
def mean_dim(x: Any, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Any:
    return x.mean(_dims(dim, x.ndim), keepdim=keepdim, dtype=_dt(dtype))


@lower(aten.mean.default)
def mean_all(x: Any, dtype: Any = None) -> Any:
    return x.mean(dtype=_dt(dtype))


@lower(aten.amax.default)
def amax(x: Any, dim: Any = (), keepdim: bool = False) -> Any:
    return x.amax(_dims(dim, x.ndim), keepdim=keepdim)


@lower(aten.amin.default)
def amin(x: Any, dim: Any = (), keepdim: bool = False) -> Any:
    return x.amin(_dims(dim, x.ndim), keepdim=keepdim)


@lower(aten.max.default)
def max_all(x: Any) -> Any:
    return x.max()


@lower(aten.min.default)
def min_all(x: Any) -> Any:
    return x.min()


@lower(aten.max.dim)
def max_dim(x: Any, dim: int, keepdim: bool = False) -> Any:
    values, indices = x.max(dim, keepdim)
    return values, indices


@lower(aten.min.dim)
def min_dim(x: Any, dim: int, keepdim: bool = False) -> Any:
    values, indices = x.min(dim, keepdim)
    return values, indices


@lower(aten.argmax.default)
def argmax(x: Any, dim: Optional[int] = None, keepdim: bool = False) -> Any:
    return x.argmax(dim, keepdim)


@lower(aten.argmin.default)
def argmin(x: Any, dim: Optional[int] = None, keepdim: bool = False) -> Any:
    return x.argmin(dim, keepdim)


@lower(aten.var.correction)
def var(x: Any, dim: Any = None, correction: Any = None, keepdim: bool = False) -> Any:
    correction = 1 if correction is None else correction
    axes = _dims(dim, x.ndim)
    if float(correction).is_integer():
        return x.var(axes, correction=int(correction), keepdim=keepdim)
    # A fractional correction (torch allows any): the squared deviations over n - correction.
    n = 1
    for a in axes:
        n *= x.shape[a]
    centered = x - x.mean(axes, keepdim=True)
    return (centered * centered).sum(axes, keepdim=keepdim) / max(n - correction, 0.0)


@lower(aten.std.correction)
def std(x: Any, dim: Any = None, correction: Any = None, keepdim: bool = False) -> Any:
    return var(x, dim, correction, keepdim).sqrt()


@lower(aten.logsumexp.default)
def logsumexp(x: Any, dim: Any, keepdim: bool = False) -> Any:
    return _to_float(x).logsumexp(_dims(dim, x.ndim), keepdim)


@lower(aten.any.default, aten._is_any_true.default)
def any_all(x: Any) -> Any:
    return x.ne(0).astype("int32").sum() > 0


@lower(aten.any.dim, aten.any.dims)
def any_dim(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return x.ne(0).astype("int32").sum(_dims(dim, x.ndim), keepdim=keepdim) > 0


@lower(aten.all.default, aten._is_all_true.default)
def all_all(x: Any) -> Any:
    return x.eq(0).astype("int32").sum() == 0


@lower(aten.all.dim, aten.all.dims)
def all_dim(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return x.eq(0).astype("int32").sum(_dims(dim, x.ndim), keepdim=keepdim) == 0


@lower(aten._softmax.default)
def softmax(x: Any, dim: int, half_to_float: bool = False) -> Any:
    return x.softmax(dim)


@lower(aten._log_softmax.default)
def log_softmax(x: Any, dim: int, half_to_float: bool = False) -> Any:
    return x.log_softmax(dim)


@lower(aten._softmax_backward_data.default)
def softmax_backward(grad: Any, out: Any, dim: int, input_dtype: Any) -> Any:
    return out * (grad - (grad * out).sum([dim % out.ndim], keepdim=True))


@lower(aten._log_softmax_backward_data.default)
def log_softmax_backward(grad: Any, out: Any, dim: int, input_dtype: Any) -> Any:
    return grad - out.exp() * grad.sum([dim % out.ndim], keepdim=True)


# ---- linear algebra ----------------------------------------------------------------------------


@lower(aten.mm.default, aten.bmm.default)
def mm(a: Any, b: Any) -> Any:
    return a.matmul(b)


@lower(aten.addmm.default)
def addmm(bias: Any, a: Any, b: Any, beta: Any = 1, alpha: Any = 1) -> Any:
    if not _is_float(a):
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


@lower(aten.baddbmm.default)
def baddbmm(bias: Any, a: Any, b: Any, beta: Any = 1, alpha: Any = 1) -> Any:
    return addmm(bias, a, b, beta, alpha)


@lower(aten.dot.default, aten.mv.default)
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
        raise _Unsupported("_grouped_mm with a bias (torch's own kernels take none yet)")
    dtype = _dt(out_dtype) or a.dtype
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


# ---- creation ----------------------------------------------------------------------------------


def _factory_dtype(dtype: Any, fill: Any = 0.0) -> str:
    if dtype is not None:
        return engine_dtype(dtype)
    if isinstance(fill, bool):
        return "bool"
    if isinstance(fill, int):
        return "int64"
    return engine_dtype(torch.get_default_dtype())


@lower(aten.full.default)
def full(size: Any, fill_value: Any, dtype: Any = None, layout: Any = None, device: Any = None,
         pin_memory: Any = None) -> Any:
    return xp.full(tuple(size), fill_value, dtype=_factory_dtype(dtype, fill_value))


@lower(aten.scalar_tensor.default)
def scalar_tensor(s: Any, dtype: Any = None, layout: Any = None, device: Any = None,
                  pin_memory: Any = None) -> Any:
    return xp.full((), s, dtype=_factory_dtype(dtype))


@lower(aten.zeros.default)
def zeros(size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    return xp.zeros(*size, dtype=_factory_dtype(dtype))


@lower(aten.ones.default)
def ones(size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    return xp.ones(*size, dtype=_factory_dtype(dtype))


@lower(aten.full_like.default)
def full_like(x: Any, fill_value: Any, dtype: Any = None, layout: Any = None, device: Any = None,
              pin_memory: Any = None, memory_format: Any = None) -> Any:
    return xp.full(tuple(x.shape), fill_value, dtype=_dt(dtype) or x.dtype)


def _like(make: Callable[..., Any]) -> Callable[..., Any]:
    """``zeros_like`` and its kin: ``make`` at ``x``'s shape, in ``x``'s dtype unless given (the
    layout, device and memory format arguments name nothing else on this device), split as ``x``
    is split over a mesh (an optimizer's state follows its parameter)."""

    def like(x: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None,
             memory_format: Any = None) -> Any:
        made = make(*x.shape, dtype=_dt(dtype) or x.dtype)
        _native.shard_like(made, x)
        return made

    return like


zeros_like = lower(aten.zeros_like.default, aten.empty_like.default)(_like(xp.zeros))
ones_like = lower(aten.ones_like.default)(_like(xp.ones))
lower(aten.rand_like.default)(_like(xp.rand))
lower(aten.randn_like.default)(_like(xp.randn))


@lower(aten.arange.start_step)
def arange(start: Any, end: Any, step: Any = 1, dtype: Any = None, layout: Any = None, device: Any = None,
           pin_memory: Any = None) -> Any:
    if dtype is None:
        ints = all(isinstance(v, int) for v in (start, end, step))
        dtype = torch.int64 if ints else torch.get_default_dtype()
    return xp.arange(start, end, step, dtype=engine_dtype(dtype))


@lower(aten.arange.default)
def arange_end(end: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    return arange(0, end, 1, dtype)


@lower(aten.arange.start)
def arange_start(start: Any, end: Any, dtype: Any = None, layout: Any = None, device: Any = None,
                 pin_memory: Any = None) -> Any:
    return arange(start, end, 1, dtype)


@lower(aten.fill.Scalar, aten.fill.Tensor)
def fill(x: Any, v: Any) -> Any:
    return xp.full(tuple(x.shape), v, dtype=x.dtype) if not hasattr(v, "shape") else v.astype(x.dtype).expand(*x.shape)


@lower(aten.zero.default)
def zero(x: Any) -> Any:
    return xp.zeros(*x.shape, dtype=x.dtype)


@lower(aten.normal_functional.default)
def normal(x: Any, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Any:
    return _random(xp.randn, x.shape, x.dtype, math.sqrt(0.5)) * std + mean


@lower(aten.uniform.default)
def uniform(x: Any, low: float = 0.0, high: float = 1.0, generator: Any = None) -> Any:
    return xp.rand(*x.shape, dtype=x.dtype) * (high - low) + low


@lower(aten.bernoulli.p)
def bernoulli(x: Any, p: float = 0.5, generator: Any = None) -> Any:
    return (xp.rand(*x.shape) < p).astype(x.dtype)


def _random(draw: Callable[..., Any], size: Any, dtype: str, part_scale: float) -> Any:
    """Random values of ``dtype``; a complex one draws its real and imaginary parts apart, each
    scaled by ``part_scale`` (torch's complex normal has variance 1 in all)."""
    if dtype not in ("complex64", "complex128"):
        return draw(*size, dtype=dtype)
    part = "float64" if dtype == "complex128" else "float32"
    return (draw(*size, dtype=part) * part_scale)._complex(draw(*size, dtype=part) * part_scale)


@lower(aten.rand.default)
def rand(size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    return _random(xp.rand, size, _factory_dtype(dtype), 1.0)


@lower(aten.randn.default)
def randn(size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    return _random(xp.randn, size, _factory_dtype(dtype), math.sqrt(0.5))


# torch's initializers fill tensors in place (`nn.init`, `torch.randn(device=)`).
@lower_raw(aten.normal_.default)
def normal_(t: LazyTensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> LazyTensor:
    return assign(t, normal(value(t), mean, std))


@lower_raw(aten.uniform_.default)
def uniform_(t: LazyTensor, low: float = 0.0, high: float = 1.0, generator: Any = None) -> LazyTensor:
    return assign(t, uniform(value(t), low, high))


@lower_raw(aten.bernoulli_.float)
def bernoulli_(t: LazyTensor, p: float = 0.5, generator: Any = None) -> LazyTensor:
    return assign(t, bernoulli(value(t), p))


@lower(aten.native_dropout.default)
def native_dropout(x: Any, p: float, train: Optional[bool]) -> Any:
    if not train or p == 0:
        return x.clone(), xp.ones(*x.shape, dtype="bool")
    keep = xp.rand(*x.shape) >= p
    return xp.where(keep, x * (1.0 / (1.0 - p)), xp.zeros_like(x)), keep


@lower(aten.native_dropout_backward.default)
def native_dropout_backward(grad: Any, mask: Any, scale: float) -> Any:
    return grad * mask.astype(grad.dtype) * scale


# ---- movement (copies) -------------------------------------------------------------------------


@lower(aten.cat.default)
def cat(tensors: Sequence[Any], dim: int = 0) -> Any:
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or list(tensors[:1])
    return xp.cat(list(tensors), dim)


@lower(aten.stack.default)
def stack(tensors: Sequence[Any], dim: int = 0) -> Any:
    return xp.stack(list(tensors), dim)


@lower(aten.flip.default)
def flip(x: Any, dims: Sequence[int]) -> Any:
    return x.flip(list(dims))


@lower(aten.constant_pad_nd.default)
def constant_pad_nd(x: Any, pad: Sequence[int], value: Any = 0) -> Any:
    pads = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        pads[x.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        index = tuple(slice(max(-lo, 0), x.shape[d] - max(-hi, 0)) for d, (lo, hi) in enumerate(pads))
        x = x[index]
        pads = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    return x.pad(pads, value)


@lower(aten.index_select.default)
def index_select(x: Any, dim: int, index: Any) -> Any:
    if x.ndim == 0:  # torch indexes a 0-d tensor as one element along dim 0
        return x.reshape(1).index_select(0, index.reshape(-1)).reshape(())
    return x.index_select(dim, index)


@lower(aten.index_add.default)
def index_add(x: Any, dim: int, index: Any, source: Any, alpha: Any = 1) -> Any:
    source = source if alpha == 1 else source * alpha
    if x.ndim == 0:
        return x.reshape(1).index_add(0, index.reshape(-1), source.reshape(-1)).reshape(())
    return x.index_add(dim, index, source)


@lower(aten.embedding.default)
def embedding(weight: Any, indices: Any, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Any:
    flat = indices.reshape(-1)
    return weight.index_select(0, flat).reshape(*indices.shape, weight.shape[1])


@lower(aten.embedding_dense_backward.default)
def embedding_dense_backward(grad: Any, indices: Any, num_weights: int, padding_idx: int,
                             scale_grad_by_freq: bool) -> Any:
    flat = indices.reshape(-1)
    rows = grad.reshape(-1, grad.shape[-1])
    if padding_idx >= 0:
        rows = xp.where(flat.ne(padding_idx).unsqueeze(1), rows, xp.zeros_like(rows))
    return xp.zeros(num_weights, grad.shape[-1], dtype=grad.dtype).index_add(0, flat, rows)


@lower(aten.tril.default)
def tril(x: Any, diagonal: int = 0) -> Any:
    return _triangle(x, diagonal, lower_part=True)


@lower(aten.triu.default)
def triu(x: Any, diagonal: int = 0) -> Any:
    return _triangle(x, diagonal, lower_part=False)


def _triangle(x: Any, diagonal: int, lower_part: bool) -> Any:
    rows, cols = x.shape[-2], x.shape[-1]
    r = xp.arange(0, rows, 1, dtype="int64").unsqueeze(1)
    c = xp.arange(0, cols, 1, dtype="int64").unsqueeze(0)
    keep = (c - r) <= diagonal if lower_part else (c - r) >= diagonal
    return xp.where(keep, x, xp.zeros_like(x))


@lower(aten.slice_backward.default)
def slice_backward(grad: Any, input_sizes: Sequence[int], dim: int, start: int, end: int, step: int) -> Any:
    base = xp.zeros(*input_sizes, dtype=grad.dtype)
    return _slice_scatter(base, grad, dim % len(input_sizes), start, end, step)


@lower(aten.select_backward.default)
def select_backward(grad: Any, input_sizes: Sequence[int], dim: int, index: int) -> Any:
    dim = dim % len(input_sizes)
    index = index % input_sizes[dim]
    base = xp.zeros(*input_sizes, dtype=grad.dtype)
    return _slice_scatter(base, grad.unsqueeze(dim), dim, index, index + 1, 1)


@lower(aten.slice_scatter.default)
def slice_scatter(x: Any, src: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> Any:
    return _slice_scatter(x, src, dim % x.ndim, start, end, step)


@lower(aten.select_scatter.default)
def select_scatter(x: Any, src: Any, dim: int, index: int) -> Any:
    dim = dim % x.ndim
    index = index % x.shape[dim]
    return _slice_scatter(x, src.unsqueeze(dim), dim, index, index + 1, 1)


def _bounds(n: int, start: Any, end: Any, step: int) -> range:
    return range(n)[slice(start, end, step)]


def _slice_scatter(base: Any, src: Any, dim: int, start: Any, end: Any, step: int) -> Any:
    """``base`` with ``base[..., start:end:step, ...] = src`` along ``dim``: the engine's values
    are immutable, so the slice is padded into place and chosen by a mask."""
    n = base.shape[dim]
    r = _bounds(n, start, end, step)
    if len(r) == 0:
        return base
    src = src.astype(base.dtype)
    if step == 1:
        pads = [(0, 0)] * base.ndim
        pads[dim] = (r.start, n - r.stop)
        placed = src.pad(pads, 0)
        mask = xp.ones(*src.shape, dtype="bool").pad(pads, False)
        return xp.where(mask, placed, base)
    # A strided slice: gather each kept position's source row by an index map.
    positions = xp.arange(0, n, 1, dtype="int64")
    inside = (positions >= r.start) & (positions <= r[-1]) & ((positions - r.start).remainder(step) == 0)
    source_row = ((positions - r.start).div(step, rounding_mode="floor")).clamp(0, len(r) - 1)
    gathered = src.index_select(dim, source_row)
    shape = [1] * base.ndim
    shape[dim] = n
    return xp.where(inside.reshape(*shape), gathered, base)


# ---- views (alias their base) -------------------------------------------------------------------


def _view_shape(x: Any, size: Sequence[int]) -> List[int]:
    size = [int(s) for s in size]
    if -1 in size:
        known = 1
        for s in size:
            if s != -1:
                known *= s
        total = 1
        for s in x.shape:
            total *= s
        size[size.index(-1)] = total // known if known else 0
    return size


@lower_raw(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def view(t: LazyTensor, size: Sequence[int]) -> LazyTensor:
    base_shape = tuple(t.shape)
    shape = _view_shape(value(t), size)
    return make_view(t, lambda r: r.reshape(*shape), lambda r, nv: nv.reshape(*base_shape),
                     bwd_reads_base=False)


@lower_raw(aten.alias.default, aten.detach.default, aten.lift_fresh.default)
def alias(t: LazyTensor) -> LazyTensor:
    return make_view(t, lambda r: r, lambda r, nv: nv, bwd_reads_base=False)


@lower_raw(aten.permute.default)
def permute(t: LazyTensor, dims: Sequence[int]) -> LazyTensor:
    n = t.dim()
    dims = [d % n for d in dims]
    inverse = [dims.index(i) for i in range(n)]
    return make_view(t, lambda r: r.permute(*dims), lambda r, nv: nv.permute(*inverse),
                     bwd_reads_base=False)


@lower_raw(aten.transpose.int)
def transpose(t: LazyTensor, d0: int, d1: int) -> LazyTensor:
    if t.dim() == 0:
        return alias(t)
    return make_view(t, lambda r: r.transpose(d0, d1), lambda r, nv: nv.transpose(d0, d1),
                     bwd_reads_base=False)


@lower_raw(aten.t.default)
def t_(t: LazyTensor) -> LazyTensor:
    return transpose(t, 0, 1) if t.dim() == 2 else alias(t)


@lower_raw(aten.unsqueeze.default)
def unsqueeze(t: LazyTensor, dim: int) -> LazyTensor:
    dim = dim % (t.dim() + 1)
    return make_view(t, lambda r: r.unsqueeze(dim), lambda r, nv: nv.squeeze(dim),
                     bwd_reads_base=False)


@lower_raw(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)
def squeeze(t: LazyTensor, dim: Any = None) -> LazyTensor:
    shape = list(t.shape)
    if dim is None:
        dims = list(range(len(shape)))
    elif isinstance(dim, int):
        dims = [dim % max(len(shape), 1)]
    else:  # squeeze.dims: exactly those (none for an empty list)
        dims = [d % max(len(shape), 1) for d in dim]
    new = [s for i, s in enumerate(shape) if not (i in dims and s == 1)]
    return make_view(t, lambda r: r.reshape(*new), lambda r, nv: nv.reshape(*shape),
                     bwd_reads_base=False)


@lower_raw(aten.expand.default)
def expand(t: LazyTensor, size: Sequence[int], implicit: bool = False) -> LazyTensor:
    # Not a view: torch forbids writes through an expanded tensor (its elements share memory).
    x = value(t)
    lead = len(size) - x.ndim
    full = [int(x.shape[i - lead]) if s == -1 else int(s) for i, s in enumerate(size)]
    return LazyTensor(x.expand(*full))


@lower_raw(aten.slice.Tensor)
def slice_(t: LazyTensor, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> LazyTensor:
    n = t.dim()
    dim = dim % n
    length = t.shape[dim]
    r = _bounds(length, start, end, step)
    index = tuple(slice(None) if d != dim else slice(r.start, r.stop, r.step) for d in range(n))
    if len(r) == 0:
        shape = list(t.shape)
        shape[dim] = 0
        return LazyTensor(xp.zeros(*shape, dtype=value(t).dtype))
    return make_view(
        t,
        lambda v: v[index],
        lambda v, nv: _slice_scatter(v, nv, dim, r.start, r.stop, r.step),
    )


@lower_raw(aten.select.int)
def select(t: LazyTensor, dim: int, index: int) -> LazyTensor:
    dim = dim % t.dim()
    index = index % t.shape[dim]
    key = tuple(slice(None) if d != dim else index for d in range(t.dim()))
    return make_view(
        t,
        lambda v: v[key],
        lambda v, nv: _slice_scatter(v, nv.unsqueeze(dim), dim, index, index + 1, 1),
    )


@lower_raw(aten.split.Tensor)
def split(t: LazyTensor, split_size: int, dim: int = 0) -> List[LazyTensor]:
    length = t.shape[dim % t.dim()]
    sizes = [min(split_size, length - i) for i in range(0, length, split_size)] or [0]
    return split_with_sizes(t, sizes, dim)


@lower_raw(aten.split_with_sizes.default)
def split_with_sizes(t: LazyTensor, sizes: Sequence[int], dim: int = 0) -> List[LazyTensor]:
    out, start = [], 0
    for s in sizes:
        out.append(slice_(t, dim, start, start + s, 1))
        start += s
    return out


@lower_raw(aten.unbind.int)
def unbind(t: LazyTensor, dim: int = 0) -> List[LazyTensor]:
    return [select(t, dim, i) for i in range(t.shape[dim % t.dim()])]


# ---- neural-network ops ------------------------------------------------------------------------


def _conv_transposed(x: Any, w: Any, bias: Any, stride: Sequence[int], padding: Sequence[int],
                     dilation: Sequence[int], output_padding: Sequence[int], groups: int) -> Any:
    """A transposed convolution as the plain one it is: the input spread by the stride (zeros
    between its elements), padded by dilation * (k - 1) - padding (cropped where negative, plus
    output_padding after), convolved at stride 1 with the kernel flipped and its in and out
    channels swapped within each group. ``w`` is [in, out / groups, *k]."""
    nd = x.ndim - 2
    k = list(w.shape[2:])
    low = [dilation[d] * (k[d] - 1) - padding[d] for d in range(nd)]
    high = [low[d] + output_padding[d] for d in range(nd)]
    pads = [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in zip(low, high)]
    x = x.pad(pads, 0.0, interior=[0, 0] + [s - 1 for s in stride])
    if any(lo < 0 or hi < 0 for lo, hi in zip(low, high)):
        x = x[(slice(None), slice(None)) + tuple(
            slice(max(-lo, 0), x.shape[2 + d] - max(-hi, 0)) for d, (lo, hi) in enumerate(zip(low, high)))]
    cin, cout_g = w.shape[0], w.shape[1]
    kernel = (w.reshape(groups, cin // groups, cout_g, *k).transpose(1, 2)
              .reshape(groups * cout_g, cin // groups, *k).flip(list(range(2, 2 + nd))))
    ones = [1] * nd
    return convolution(x, kernel, bias, ones, [0] * nd, dilation, False, [0] * nd, groups)


@lower(aten.convolution.default)
def convolution(x: Any, w: Any, bias: Any, stride: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], transposed: bool, output_padding: Sequence[int], groups: int) -> Any:
    if w.ndim not in (3, 4, 5) or x.ndim != w.ndim:
        raise _Unsupported("convolution: only 1-d, 2-d and 3-d convolutions are lowered")
    # torch lets one value stand for every spatial dim.
    nd = w.ndim - 2
    stride, padding, dilation = ([v[0]] * nd if len(v) == 1 else list(v) for v in (stride, padding, dilation))
    output_padding = [output_padding[0]] * nd if len(output_padding) == 1 else list(output_padding)
    if transposed:
        return _conv_transposed(x, w, bias, stride, padding, dilation, output_padding, groups)
    if w.ndim == 5:
        from ._pooling import _conv3d

        return _conv3d(x, w, bias, stride, padding, dilation, groups)
    if x.ndim == 3:  # 1-d: a 2-d convolution over a height of one
        out = xp.conv2d(x.unsqueeze(2), w.unsqueeze(2), bias, (1, stride[0]), (0, padding[0]),
                        (1, dilation[0]), groups)
        return out.squeeze(2)
    return xp.conv2d(x, w, bias, tuple(stride), tuple(padding), tuple(dilation), groups)


@lower(aten.convolution_backward.default)
def convolution_backward(grad: Any, x: Any, w: Any, bias_sizes: Any, stride: Sequence[int],
                         padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                         output_padding: Sequence[int], groups: int, output_mask: Sequence[bool]) -> Any:
    if w.ndim not in (3, 4, 5):
        raise _Unsupported("convolution_backward: only 1-d, 2-d and 3-d convolutions are lowered")
    gx, gw = _vjp(
        lambda a, b: convolution(a, b, None, stride, padding, dilation, transposed, output_padding, groups),
        [x, w],
        grad,
    )
    gb = grad.sum([0] + list(range(2, grad.ndim))) if output_mask[2] else None
    return (gx if output_mask[0] else None, gw if output_mask[1] else None, gb)


@lower(aten.native_layer_norm.default)
def native_layer_norm(x: Any, normalized_shape: Sequence[int], weight: Any, bias: Any, eps: float) -> Any:
    axes = list(range(x.ndim - len(normalized_shape), x.ndim))
    mean = x.mean(axes, keepdim=True)
    centered = x - mean
    rstd = ((centered * centered).mean(axes, keepdim=True) + eps).rsqrt()
    out = centered * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


@lower(aten.native_batch_norm.default, aten._native_batch_norm_legit.default)
def native_batch_norm(x: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any, training: bool,
                      momentum: float, eps: float) -> Any:
    """Evaluation (normalized by the running statistics; torch's kernel then saves no statistics,
    so ``save_mean`` and ``save_invstd`` are empty). Training updates the running statistics in
    place: torch's decomposition does that."""
    if training or running_mean is None:
        raise _Unsupported("batch norm in training (its decomposition updates the running statistics)")
    shape = [1, -1] + [1] * (x.ndim - 2)
    out = (x - running_mean.reshape(*shape)) * (running_var.reshape(*shape) + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(*shape)
    if bias is not None:
        out = out + bias.reshape(*shape)
    empty = xp.zeros(0, dtype=x.dtype)
    return out.astype(x.dtype), empty, empty


@lower(aten.native_layer_norm_backward.default)
def native_layer_norm_backward(grad: Any, x: Any, normalized_shape: Sequence[int], mean: Any, rstd: Any,
                               weight: Any, bias: Any, output_mask: Sequence[bool]) -> Any:
    axes = list(range(x.ndim - len(normalized_shape), x.ndim))
    lead = list(range(x.ndim - len(normalized_shape)))
    xhat = (x - mean) * rstd
    g = grad * weight if weight is not None else grad
    n = 1
    for s in normalized_shape:
        n *= s
    gx = (g - g.mean(axes, keepdim=True) - xhat * (g * xhat).mean(axes, keepdim=True)) * rstd
    gw = (grad * xhat).sum(lead) if weight is not None and output_mask[1] else None
    gb = grad.sum(lead) if bias is not None and output_mask[2] else None
    return (gx if output_mask[0] else None, gw, gb)


@lower(aten._weight_norm_interface_backward.default)
def _weight_norm_interface_backward(grad: Any, v: Any, g: Any, norms: Any, dim: int) -> Any:
    # w = v * g / |v| (norm over every dim but `dim`); torch has no decomposition of its backward
    # (weight_norm in wav2vec2's positional convolution reached the CPU fallback every step).
    others = [d for d in range(v.ndim) if d != dim % max(v.ndim, 1)]
    norms = norms.astype(g.dtype)
    grad_g = (grad * v).sum(others, keepdim=True) / norms if others else grad * v / norms
    grad_v = (g / norms) * (grad - v * (grad_g / norms))
    return grad_v.astype(v.dtype), grad_g.reshape(*g.shape).astype(g.dtype)


@lower(aten.nll_loss_forward.default)
def nll_loss_forward(logp: Any, target: Any, weight: Any, reduction: int, ignore_index: int) -> Any:
    picked, valid = _nll_picked(logp, target, weight, ignore_index)
    if reduction == 0:
        return -picked, xp.zeros((), dtype=logp.dtype)
    total = valid.sum()
    if reduction == 1:
        return -picked.sum() / total, total
    return -picked.sum(), total


def _nll_picked(logp: Any, target: Any, weight: Any, ignore_index: int) -> Any:
    classes = logp.shape[-1] if logp.ndim == 1 else logp.shape[1]
    valid_mask = target.ne(ignore_index)
    safe = xp.where(valid_mask, target, xp.zeros_like(target))
    hot = safe.astype("int64").one_hot(classes).astype(logp.dtype)
    if logp.ndim > 2:  # (N, C, d1, ...): classes on axis 1
        hot = hot.permute(0, hot.ndim - 1, *range(1, hot.ndim - 1))
        class_axis = 1
    else:
        class_axis = logp.ndim - 1
    w = valid_mask.astype(logp.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe.reshape(-1)).reshape(*safe.shape)
    picked = (logp * hot).sum([class_axis]) * w
    return picked, w


@lower(aten.nll_loss_backward.default)
def nll_loss_backward(grad: Any, logp: Any, target: Any, weight: Any, reduction: int, ignore_index: int,
                      total_weight: Any) -> Any:
    return _vjp(lambda lp: nll_loss_forward(lp, target, weight, reduction, ignore_index)[0], [logp], grad)[0]


@lower(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_backward(grad: Any, x: Any, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                        dilation: Sequence[int], ceil_mode: bool, indices: Any) -> Any:
    if any(d != 1 for d in dilation) or ceil_mode:
        raise _Unsupported("max_pool2d backward with dilation or ceil_mode")
    return _vjp(lambda v: xp.max_pool2d(v, tuple(kernel), tuple(stride or kernel), tuple(padding)), [x], grad)[0]


def _pair(v: Sequence[int]) -> Any:
    v = list(v)
    return (v[0], v[0]) if len(v) == 1 else tuple(v)


class _Unsupported(NotImplementedError):
    """A lowered op called with arguments the engine cannot take: the dispatcher falls back."""


# ---- more of what OpInfo and real models reach ---------------------------------------------------


@lower(aten.new_zeros.default, aten.new_empty.default)
def new_zeros(x: Any, size: Sequence[int], dtype: Any = None, layout: Any = None, device: Any = None,
              pin_memory: Any = None) -> Any:
    return xp.zeros(*size, dtype=_dt(dtype) or x.dtype)


@lower(aten.new_ones.default)
def new_ones(x: Any, size: Sequence[int], dtype: Any = None, layout: Any = None, device: Any = None,
             pin_memory: Any = None) -> Any:
    return xp.ones(*size, dtype=_dt(dtype) or x.dtype)


@lower(aten.new_full.default)
def new_full(x: Any, size: Sequence[int], fill_value: Any, dtype: Any = None, layout: Any = None,
             device: Any = None, pin_memory: Any = None) -> Any:
    return xp.full(tuple(size), fill_value, dtype=_dt(dtype) or x.dtype)


@lower(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(x: Any, m: Any) -> Any:
    return x.clamp(min=m) if not hasattr(m, "shape") else x.maximum(m)


@lower(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(x: Any, m: Any) -> Any:
    return x.clamp(max=m) if not hasattr(m, "shape") else x.minimum(m)


@lower(aten.isnan.default)
def isnan(x: Any) -> Any:
    return x.ne(x)


@lower(aten.isinf.default)
def isinf(x: Any) -> Any:
    return x.abs().eq(math.inf) if _is_float(x) else xp.zeros(*x.shape, dtype="bool")


@lower(aten.linalg_vector_norm.default)
def vector_norm(x: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Any:
    if dtype is not None:
        x = x.astype(engine_dtype(dtype))
    axes = _dims(dim, x.ndim)
    a = x.abs()
    if ord == 2:
        return (a * a).sum(axes, keepdim=keepdim).sqrt()
    if ord == 1:
        return a.sum(axes, keepdim=keepdim)
    if ord == math.inf:
        return a.amax(axes, keepdim=keepdim)
    if ord == -math.inf:
        return a.amin(axes, keepdim=keepdim)
    if ord == 0:
        return a.ne(0).astype(x.dtype).sum(axes, keepdim=keepdim)
    return a.pow(ord).sum(axes, keepdim=keepdim).pow(1.0 / ord)


@lower(aten.var_mean.correction)
def var_mean(x: Any, dim: Any = None, correction: Any = None, keepdim: bool = False) -> Any:
    return var(x, dim, correction, keepdim), x.mean(_dims(dim, x.ndim), keepdim=keepdim)


@lower(aten.std_mean.correction)
def std_mean(x: Any, dim: Any = None, correction: Any = None, keepdim: bool = False) -> Any:
    return std(x, dim, correction, keepdim), x.mean(_dims(dim, x.ndim), keepdim=keepdim)


@lower(aten.repeat.default)
def repeat(x: Any, repeats: Sequence[int]) -> Any:
    repeats = [int(r) for r in repeats]
    lead = len(repeats) - x.ndim
    x = x.reshape(*([1] * lead + list(x.shape)))
    # Each dim d of size n becomes (r, n) broadcast, then merged: tiles, as torch repeats.
    shape, expanded, final = [], [], []
    for r, n in zip(repeats, x.shape):
        shape += [1, n]
        expanded += [r, n]
        final.append(r * n)
    return x.reshape(*shape).expand(*expanded).reshape(*final)


@lower(aten.roll.default)
def roll(x: Any, shifts: Sequence[int], dims: Sequence[int] = ()) -> Any:
    if not dims:
        return roll(x.reshape(-1), shifts, [0]).reshape(*x.shape)
    for s, d in zip(shifts, dims):
        d = d % x.ndim
        n = x.shape[d]
        if n == 0:
            continue
        s = s % n
        if s:
            head = tuple(slice(None) if i != d else slice(n - s, n) for i in range(x.ndim))
            tail = tuple(slice(None) if i != d else slice(0, n - s) for i in range(x.ndim))
            x = xp.cat([x[head], x[tail]], d)
    return x


@lower(aten.cumsum.default)
def cumsum(x: Any, dim: int, dtype: Any = None) -> Any:
    if dtype is not None:
        x = x.astype(engine_dtype(dtype))
    elif not _is_float(x):
        x = x.astype("int64")
    if x.ndim == 0:
        return x.clone()
    d = dim % x.ndim
    return _prefix_sum_last(x.transpose(d, x.ndim - 1)).transpose(d, x.ndim - 1)


_SCAN_BLOCK = 128


def _prefix_sum_last(x: Any) -> Any:
    """Inclusive prefix sums along the last dim. Up to a block, a product with the
    upper-triangular ones (one dot, fused by XLA); longer, the same within blocks of 128, plus the
    prefix sums of the blocks' totals before each block: O(n) memory and O(128 n) work, where one
    n x n product would need n^2 of both."""
    n = x.shape[-1]
    if n <= _SCAN_BLOCK:
        return x.matmul(_triangle(xp.ones(n, n, dtype=x.dtype), 0, lower_part=False))
    lead = list(x.shape[:-1])
    blocks = -(-n // _SCAN_BLOCK)
    padded = x.pad([(0, 0)] * len(lead) + [(0, blocks * _SCAN_BLOCK - n)])
    within = _prefix_sum_last(padded.reshape(*lead, blocks, _SCAN_BLOCK))   # [..., blocks, b]
    totals = within[..., _SCAN_BLOCK - 1]                                   # [..., blocks]
    before = _prefix_sum_last(totals) - totals
    out = (within + before.unsqueeze(-1)).reshape(*lead, blocks * _SCAN_BLOCK)
    return out[..., :n]


def _cumulative_extreme(x: Any, dim: int, largest: bool) -> Any:
    """cummax (``largest``) or cummin along ``dim`` with the index each value came from (the
    latest, as PyTorch's), as cumsum is made: over an [n, n] view of the prefixes, one reduction
    each. A position outside a prefix takes the prefix's own last value, which is in it, so no
    sentinel is needed for any dtype; NaN propagates, and its index is the NaN's."""
    if x.ndim == 0:
        return x.clone(), xp.zeros((), dtype="int64")
    d = dim % x.ndim
    moved = x.transpose(d, x.ndim - 1)
    n = moved.shape[-1]
    lead = tuple(moved.shape[:-1])
    rows = moved.unsqueeze(-2).expand(*lead, n, n)        # [..., i, j] = x[j]
    own = moved.unsqueeze(-1).expand(*lead, n, n)         # [..., i, j] = x[i]
    j = xp.arange(n).reshape(1, n)
    upto = j <= xp.arange(n).reshape(n, 1)
    prefix = xp.where(upto, rows, own)
    values = prefix.amax(-1) if largest else prefix.amin(-1)
    hit = upto & ((rows == values.unsqueeze(-1)) | isnan(rows))
    indices = xp.where(hit, j.expand(*lead, n, n), -1).amax(-1)
    return values.transpose(d, x.ndim - 1), indices.transpose(d, x.ndim - 1)


@lower(aten.cummax.default)
def cummax(x: Any, dim: int) -> Any:
    return _cumulative_extreme(x, dim, True)


@lower(aten.cummin.default)
def cummin(x: Any, dim: int) -> Any:
    return _cumulative_extreme(x, dim, False)


@lower(aten._scaled_dot_product_flash_attention_for_cpu.default)
def flash_attention_cpu(q: Any, k: Any, v: Any, dropout_p: float = 0.0, is_causal: bool = False,
                        attn_mask: Any = None, scale: Any = None) -> Any:
    """Attention and the log-sum-exp of each query's scores ([..., L]), as torch's CPU kernel
    returns them; dropout is a training-time random op this kernel is not asked for here."""
    if dropout_p:
        raise _Unsupported("flash attention with dropout")
    e = q.shape[-1]
    scale = 1.0 / math.sqrt(e) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        lq, lk = q.shape[-2], k.shape[-2]
        keep = xp.arange(lk).reshape(1, lk) <= xp.arange(lq).reshape(lq, 1)
        scores = xp.where(keep, scores, -math.inf)
    if attn_mask is not None:
        scores = (xp.where(attn_mask, scores, -math.inf) if attn_mask.dtype == "bool"
                  else scores + attn_mask)
    top = scores.amax(-1, keepdim=True)
    lse = ((scores - top).exp().sum(-1, keepdim=True)).log() + top
    out = (scores - lse).exp() @ v
    return out, lse.squeeze(-1)


def _float64_scalar(v: Any) -> Any:
    """A 0-d float64 engine value of a tensor or a Python number."""
    if hasattr(v, "dtype"):
        return v.astype("float64").reshape(())
    return xp.full((), float(v), dtype="float64")


@lower(aten.linspace.Tensor_Tensor, aten.linspace.Tensor_Scalar, aten.linspace.Scalar_Tensor)
def linspace_tensors(start: Any, end: Any, steps: int, dtype: Any = None, layout: Any = None,
                     device: Any = None, pin_memory: Any = None) -> Any:
    # Endpoints given as tensors stay on the device: no read of their values.
    out = engine_dtype(dtype or torch.get_default_dtype())
    a, b = _float64_scalar(start), _float64_scalar(end)
    if steps <= 1:
        return a.reshape(1).astype(out)[0:steps]
    i = xp.arange(steps, dtype="float64")
    return (a + (b - a) * (i / (steps - 1))).astype(out)


@lower(aten.logspace.Tensor_Tensor, aten.logspace.Tensor_Scalar, aten.logspace.Scalar_Tensor)
def logspace_tensors(start: Any, end: Any, steps: int, base: float = 10.0, dtype: Any = None,
                     layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    out = engine_dtype(dtype or torch.get_default_dtype())
    exponents = linspace_tensors(start, end, steps, torch.float64)
    return (base ** exponents).astype(out)


@lower(aten.frexp.Tensor)
def frexp(x: Any) -> Any:
    """x = mantissa * 2**exponent with 0.5 <= |mantissa| < 1 (0, inf and NaN keep exponent 0),
    from log2 with a correction step for its rounding."""
    finite = isfinite(x) & (x != 0)
    safe = xp.where(finite, x.abs(), xp.ones_like(x))
    e = (safe.log() / math.log(2.0)).floor() + 1.0
    m = safe / (2.0 ** e)
    e = xp.where(m >= 1.0, e + 1.0, xp.where(m < 0.5, e - 1.0, e))
    m = x / (2.0 ** e)
    return xp.where(finite, m, x), xp.where(finite, e, xp.zeros_like(e)).astype("int32")


@lower(aten.allclose.default)
def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Any:
    close = ((a - b).abs() <= atol + rtol * b.abs()) | (a == b)
    if equal_nan:
        close = close | ((a != a) & (b != b))
    return close.logical_not().astype("int64").sum().item() == 0


@lower(aten.block_diag.default)
def block_diag(tensors: Sequence[Any]) -> Any:
    dtype = TO_TORCH[tensors[0].dtype]
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, TO_TORCH[t.dtype])
    blocks = [t.reshape(1, -1) if t.ndim < 2 else t for t in tensors]
    cols = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        right = cols - left - b.shape[1]
        rows.append(b.astype(engine_dtype(dtype)).pad([(0, 0), (left, right)], 0.0))
        left += b.shape[1]
    return xp.cat(rows, 0)


@lower(aten.put.default)
def put(x: Any, index: Any, source: Any, accumulate: bool = False) -> Any:
    n = 1
    for s in x.shape:
        n *= s
    flat, idx = x.reshape(-1), index.reshape(-1)
    idx = xp.where(idx < 0, idx + n, idx)
    rows = source.reshape(-1).astype(x.dtype)
    if not accumulate:
        hit = xp.zeros(n, dtype="int64").index_add(0, idx, xp.ones(idx.shape[0], dtype="int64")) > 0
        flat = xp.where(hit, xp.zeros_like(flat), flat)
    return flat.index_add(0, idx, rows).reshape(*x.shape)


@lower(aten.xlogy.Tensor)
def xlogy(x: Any, y: Any) -> Any:
    x, y = _to_float(x), _to_float(y)
    return xp.where(x.eq(0), xp.zeros_like(x * y), x * y.log())


@lower(aten.hardtanh.default)
def hardtanh(x: Any, min_val: Any = -1, max_val: Any = 1) -> Any:
    if not _is_float(x):  # integers keep their dtype: the bounds truncate, as in torch
        return x.clamp(int(min_val), int(max_val))
    return x.clamp(min_val, max_val)


@lower_raw(aten.rrelu_with_noise.default)
def rrelu_with_noise(t: LazyTensor, noise: Any, lower: Any = 0.125, upper: Any = 1 / 3,
                     training: bool = False, generator: Any = None) -> LazyTensor:
    # Outside training a randomized leaky ReLU is a leaky ReLU with the middle slope (torch's
    # rule); in training its slopes are random draws, which the CPU fallback makes.
    if training:
        raise _Unsupported("rrelu in training draws random slopes")
    return LazyTensor(leaky_relu(value(t), (lower + upper) / 2))


@lower(aten.leaky_relu.default)
def leaky_relu(x: Any, negative_slope: Any = 0.01) -> Any:
    return xp.where(x > 0, x, x * negative_slope)


@lower(aten.elu.default)
def elu(x: Any, alpha: Any = 1, scale: Any = 1, input_scale: Any = 1) -> Any:
    return xp.where(x > 0, x * scale, ((x * input_scale).exp() - 1.0) * (alpha * scale))


# ---- integer-array indexing: every form becomes one flat index_select or index_add ------------


def _strides(shape: Sequence[int]) -> List[int]:
    out, acc = [], 1
    for s in reversed(list(shape)):
        out.append(acc)
        acc *= s
    return list(reversed(out))


def _broadcast_shape(shapes: Sequence[Sequence[int]]) -> List[int]:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s):
            j = ndim - len(s) + i
            if n != 1:
                out[j] = n
    return out


def _advanced_index(x: Any, indices: Sequence[Any]) -> Any:
    """``x[indices]`` (torch's ``index.Tensor``) as (x with the indexed dims first and merged,
    the flat position of each picked element, the result's shape)."""
    indices = list(indices) + [None] * (x.ndim - len(indices))
    for i in indices:
        if i is not None and i.dtype == "bool":
            raise _Unsupported("a boolean mask index has a data-dependent shape")
    indexed = [d for d, i in enumerate(indices) if i is not None]
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    rest = [d for d in range(x.ndim) if d not in indexed]
    # The indexed dims go first (torch's rule when they are not adjacent; when they are, the
    # result's dims are moved back below).
    moved = x.permute(*(indexed + rest)) if indexed + rest != list(range(x.ndim)) else x
    idx_shape = [x.shape[d] for d in indexed]
    bshape = _broadcast_shape([indices[d].shape for d in indexed])
    flat = None
    for d, stride in zip(indexed, _strides(idx_shape)):
        i = indices[d].astype("int64")
        i = xp.where(i < 0, i + x.shape[d], i)
        term = i * stride if stride != 1 else i
        flat = term if flat is None else flat + term
    flat = flat.expand(*bshape) if list(flat.shape) != bshape else flat
    rest_shape = [x.shape[d] for d in rest]
    count = 1
    for n in idx_shape:
        count *= n
    merged = moved.reshape(count, *rest_shape)
    return merged, flat, bshape, rest_shape, adjacent, indexed


@lower(aten.index.Tensor)
def index(x: Any, indices: Sequence[Any]) -> Any:
    merged, flat, bshape, rest_shape, adjacent, indexed = _advanced_index(x, indices)
    out = merged.index_select(0, flat.reshape(-1)).reshape(*bshape, *rest_shape)
    first = indexed[0]
    if adjacent and first > 0:
        # x[:, idx]: the broadcast dims take the place of the indexed ones.
        nb = len(bshape)
        order = list(range(nb, nb + first)) + list(range(nb)) + list(range(nb + first, out.ndim))
        out = out.permute(*order)
    return out


@lower(aten.index_put.default)
def index_put(x: Any, indices: Sequence[Any], values: Any, accumulate: bool = False) -> Any:
    merged, flat, bshape, rest_shape, adjacent, indexed = _advanced_index(x, indices)
    first = indexed[0]
    target = list(bshape) + rest_shape
    if adjacent and first > 0:
        # values are laid out as the result of x[:, idx]: move the broadcast dims first.
        nb = len(bshape)
        lead = [x.shape[d] for d in range(first)]
        full = lead + list(bshape) + [x.shape[d] for d in range(indexed[-1] + 1, x.ndim)]
        v = _expand_to(values.astype(x.dtype), full)
        order = list(range(first, first + nb)) + list(range(first)) + list(range(first + nb, len(full)))
        v = v.permute(*order)
    else:
        v = _expand_to(values.astype(x.dtype), target)
    picks = 1
    for n in bshape:
        picks *= n
    rows = v.reshape(picks, *rest_shape)
    pos = flat.reshape(-1)
    added = merged.index_add(0, pos, rows) if accumulate else _write_rows(merged, pos, rows)
    rest = [d for d in range(x.ndim) if d not in indexed]
    moved_shape = [x.shape[d] for d in indexed + rest]
    out = added.reshape(*moved_shape)
    perm = indexed + rest
    if perm != list(range(x.ndim)):
        out = out.permute(*[perm.index(d) for d in range(x.ndim)])
    return out


def _expand_to(v: Any, shape: Sequence[int]) -> Any:
    shape = list(shape)
    if list(v.shape) == shape:
        return v
    while v.ndim < len(shape):
        v = v.unsqueeze(0)
    return v.expand(*shape)


@lower(aten.gather.default)
def gather(x: Any, dim: int, index: Any, sparse_grad: bool = False) -> Any:
    if 0 in index.shape:
        return xp.zeros(*index.shape, dtype=x.dtype)
    if x.ndim == 0:
        return x.clone() if index.ndim == 0 else x.expand(*index.shape).clone()
    flat = _flat_positions(x, dim % x.ndim, index)
    return x.reshape(-1).index_select(0, flat.reshape(-1)).reshape(*index.shape)


def _flat_positions(x: Any, dim: int, index: Any) -> Any:
    """Each element of ``index`` as a flat position in ``x``: its own coordinates, with the
    coordinate along ``dim`` replaced by its value (gather's and scatter's addressing)."""
    strides = _strides(x.shape)
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


@lower(aten.scatter_add.default)
def scatter_add(x: Any, dim: int, index: Any, src: Any) -> Any:
    if x.ndim == 0:
        return x + src.reshape(())
    flat = _flat_positions(x, dim % x.ndim, index).reshape(-1)
    rows = _crop_to(src, index.shape).reshape(-1).astype(x.dtype)
    return x.reshape(-1).index_add(0, flat, rows).reshape(*x.shape)


def _crop_to(src: Any, shape: Sequence[int]) -> Any:
    if list(src.shape) == list(shape):
        return src
    return src[tuple(slice(0, n) for n in shape)]


def _write_rows(base: Any, index: Any, rows: Any) -> Any:
    """``base`` with its rows (dim 0) at ``index`` replaced by ``rows``; a row written more than
    once takes the mean of its writes (torch leaves which one wins undefined)."""
    n = base.shape[0]
    hits = xp.zeros(n, dtype="int32").index_add(0, index, xp.ones(index.shape[0], dtype="int32"))
    summed = xp.zeros_like(base).index_add(0, index, rows)
    per_row = [n] + [1] * (base.ndim - 1)
    count = hits.maximum(1).astype(base.dtype).reshape(*per_row)
    written = summed / count if _is_float(base) else summed.div(count, rounding_mode="trunc")
    return xp.where((hits > 0).reshape(*per_row), written.astype(base.dtype), base)


@lower(aten.scatter.src, aten.scatter.value)
def scatter(x: Any, dim: int, index: Any, src: Any) -> Any:
    if x.ndim == 0:
        return (src.reshape(()) if hasattr(src, "shape") else xp.full((), src, dtype=x.dtype)).astype(x.dtype)
    flat = _flat_positions(x, dim % x.ndim, index).reshape(-1)
    if hasattr(src, "shape"):
        rows = _crop_to(src, index.shape).reshape(-1).astype(x.dtype)
    else:
        rows = xp.full((flat.shape[0],), src, dtype=x.dtype)
    return _write_rows(x.reshape(-1), flat, rows).reshape(*x.shape)


# ---- bitwise ops: on bools they are the logical ones (the engine's ints have no bitwise ops yet) --


def _bools(*xs: Any) -> bool:
    return all(not hasattr(x, "dtype") and isinstance(x, bool) or getattr(x, "dtype", None) == "bool" for x in xs)


@lower(aten.bitwise_and.Tensor, aten.bitwise_and.Scalar)
def bitwise_and(a: Any, b: Any) -> Any:
    if not _bools(a, b):
        raise _Unsupported("bitwise_and on integers")
    return a.logical_and(b if hasattr(b, "dtype") else xp.full((), b, dtype="bool"))


@lower(aten.bitwise_or.Tensor, aten.bitwise_or.Scalar)
def bitwise_or(a: Any, b: Any) -> Any:
    if not _bools(a, b):
        raise _Unsupported("bitwise_or on integers")
    return a.logical_or(b if hasattr(b, "dtype") else xp.full((), b, dtype="bool"))


@lower(aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar)
def bitwise_xor(a: Any, b: Any) -> Any:
    if not _bools(a, b):
        raise _Unsupported("bitwise_xor on integers")
    return a.ne(b if hasattr(b, "dtype") else xp.full((), b, dtype="bool"))


@lower(aten.bitwise_not.default)
def bitwise_not(a: Any) -> Any:
    if not _bools(a):
        raise _Unsupported("bitwise_not on integers")
    return a.logical_not()


# ---- trigonometric and hyperbolic functions, from the engine's atan2, exp, log and sqrt -------


@lower(aten.atan2.default)
def atan2(a: Any, b: Any) -> Any:
    return _to_float(a).atan2(_to_float(b) if hasattr(b, "dtype") else b)


@lower(aten.atan.default)
def atan(x: Any) -> Any:
    x = _to_float(x)
    return x.atan2(xp.ones_like(x))


@lower(aten.asin.default)
def asin(x: Any) -> Any:
    x = _to_float(x)
    return x.atan2((1.0 - x * x).sqrt())


@lower(aten.acos.default)
def acos(x: Any) -> Any:
    x = _to_float(x)
    return (1.0 - x * x).sqrt().atan2(x)


@lower(aten.sinh.default)
def sinh(x: Any) -> Any:
    x = _to_float(x)
    return (x.exp() - (-x).exp()) * 0.5


@lower(aten.cosh.default)
def cosh(x: Any) -> Any:
    x = _to_float(x)
    return (x.exp() + (-x).exp()) * 0.5


@lower(aten.asinh.default)
def asinh(x: Any) -> Any:
    x = _to_float(x)
    a = x.abs()
    return ((a + (a * a + 1.0).sqrt()).log()) * x.sign()


@lower(aten.acosh.default)
def acosh(x: Any) -> Any:
    x = _to_float(x)
    return (x + (x * x - 1.0).sqrt()).log()


@lower(aten.atanh.default)
def atanh(x: Any) -> Any:
    x = _to_float(x)
    return ((1.0 + x) / (1.0 - x)).log() * 0.5


@lower(aten.round.default)
def round_(x: Any) -> Any:
    return x.round()


@lower(aten.round.decimals)
def round_decimals(x: Any, decimals: int = 0) -> Any:
    scale = 10.0 ** decimals
    return (x * scale).round() / scale if decimals else x.round()


@lower(aten.logaddexp.default)
def logaddexp(a: Any, b: Any) -> Any:
    m = a.maximum(b)
    # Both -inf: -inf (not -inf - -inf); both +inf: +inf.
    m_safe = xp.where(m.abs() == math.inf, xp.zeros_like(m), m)
    out = m_safe + ((a - m_safe).exp() + (b - m_safe).exp()).log()
    return xp.where(m.abs() == math.inf, m, out)


@lower(aten.copysign.Tensor, aten.copysign.Scalar)
def copysign(a: Any, b: Any) -> Any:
    a = _to_float(a)
    b = b if hasattr(b, "dtype") else xp.full((), float(b), dtype=a.dtype)
    # The sign bit of b, -0.0 included: atan2(b, -1) is negative exactly when b's sign bit is.
    negative = b.atan2(xp.full((), -1.0, dtype=a.dtype if _is_float(b) else "float32")) < 0
    return xp.where(negative, -a.abs(), a.abs())


@lower(aten.isfinite.default)
def isfinite(x: Any) -> Any:
    return (x - x).eq(0) if _is_float(x) else xp.ones(*x.shape, dtype="bool")


@lower(aten.frac.default)
def frac(x: Any) -> Any:
    return x - trunc(x)


@lower(aten.deg2rad.default)
def deg2rad(x: Any) -> Any:
    return _to_float(x) * (math.pi / 180.0)


@lower(aten.rad2deg.default)
def rad2deg(x: Any) -> Any:
    return _to_float(x) * (180.0 / math.pi)


@lower(aten.hypot.default)
def hypot(a: Any, b: Any) -> Any:
    # max * sqrt(1 + (min / max)^2): no overflow where the squares would.
    big, small = a.abs().maximum(b.abs()), a.abs().minimum(b.abs())
    ratio = small / xp.where(big == 0, xp.ones_like(big), big)
    out = big * (ratio * ratio + 1.0).sqrt()
    # An infinite side makes it infinite, even beside NaN (IEEE's hypot).
    infinite = (a.abs() == math.inf) | (b.abs() == math.inf)
    return xp.where(infinite, math.inf, out).astype(out.dtype)


@lower(aten.sgn.default)
def sgn(x: Any) -> Any:
    return x.sign()


@lower(aten.signbit.default)
def signbit(x: Any) -> Any:
    if not _is_float(x):
        return x < 0
    return x.atan2(xp.full((), -1.0, dtype=x.dtype)) < 0


# ---- a few more that OpInfo and models reach ----------------------------------------------------


@lower_raw(aten.equal.default)
def equal(a: LazyTensor, b: Any) -> bool:
    # torch.equal answers a Python bool: a read of one value, as on any device.
    if tuple(a.shape) != tuple(b.shape):
        return False
    same = all_all(value(a).eq(value(b) if isinstance(b, LazyTensor) else b))
    return bool(LazyTensor(same).item())


@lower(aten.norm.ScalarOpt_dim, aten.norm.Scalar)
def norm(x: Any, p: Any = 2, dim: Any = None, keepdim: bool = False) -> Any:
    return vector_norm(x, 2 if p is None else p, dim, keepdim)


@lower(aten.vdot.default)
def vdot(a: Any, b: Any) -> Any:
    return (a * b).sum()


@lower(aten.addr.default)
def addr(x: Any, v1: Any, v2: Any, beta: Any = 1, alpha: Any = 1) -> Any:
    outer = v1.unsqueeze(1) * v2.unsqueeze(0)
    return (x * beta if beta != 1 else x) + (outer * alpha if alpha != 1 else outer) if beta != 0 else outer * alpha


@lower(aten.addbmm.default)
def addbmm(x: Any, b1: Any, b2: Any, beta: Any = 1, alpha: Any = 1) -> Any:
    if not _is_float(b1):
        alpha, beta = int(alpha), int(beta)  # the tensors' dtype, as in torch
    low = b1.dtype in ("bfloat16", "float16")
    # Low-precision products summed over the batch in float32, as torch's CPU kernel does.
    total = (b1.astype("float32").matmul(b2.astype("float32")) if low else b1.matmul(b2)).sum([0])
    out = (x * beta if beta != 1 else x) + total * alpha if beta != 0 else total * alpha
    return out.astype(b1.dtype) if low else out


@lower(aten.logaddexp2.default)
def logaddexp2(a: Any, b: Any) -> Any:
    ln2 = math.log(2.0)
    return logaddexp(a * ln2, b * ln2) * (1.0 / ln2)


@lower(aten.count_nonzero.dim_IntList, aten.count_nonzero.default)
def count_nonzero(x: Any, dim: Any = None) -> Any:
    return x.ne(0).astype("int64").sum(_dims(dim, x.ndim))


@lower(aten.native_group_norm.default)
def native_group_norm(x: Any, weight: Any, bias: Any, n: int, c: int, hw: int, group: int, eps: float) -> Any:
    g = x.reshape(n, group, -1)
    mean = g.mean([2], keepdim=True)
    centered = g - mean
    rstd = ((centered * centered).mean([2], keepdim=True) + eps).rsqrt()
    out = (centered * rstd).reshape(*x.shape)
    shape = [1, c] + [1] * (x.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(*shape)
    if bias is not None:
        out = out + bias.reshape(*shape)
    return out, mean.reshape(n, group), rstd.reshape(n, group)


# ---- elementwise compositions: activations, special values, losses ------------------------------


@lower(aten.fmax.default)
def fmax(a: Any, b: Any) -> Any:
    return xp.where(isnan(a), b, xp.where(isnan(b), a, a.maximum(b)))


@lower(aten.fmin.default)
def fmin(a: Any, b: Any) -> Any:
    return xp.where(isnan(a), b, xp.where(isnan(b), a, a.minimum(b)))


@lower(aten.heaviside.default)
def heaviside(x: Any, values: Any) -> Any:
    return xp.where(x.eq(0), values.astype(x.dtype), (x > 0).astype(x.dtype))


@lower(aten.isposinf.default)
def isposinf(x: Any) -> Any:
    return x.eq(math.inf) if _is_float(x) else xp.zeros(*x.shape, dtype="bool")


@lower(aten.isneginf.default)
def isneginf(x: Any) -> Any:
    return x.eq(-math.inf) if _is_float(x) else xp.zeros(*x.shape, dtype="bool")


@lower(aten.logical_xor.default)
def logical_xor(a: Any, b: Any) -> Any:
    return a.astype("bool").ne(b.astype("bool"))


@lower(aten.logit.default)
def logit(x: Any, eps: Any = None) -> Any:
    x = _to_float(x)
    if eps is not None:
        # torch's order: below eps is eps, else above 1 - eps is 1 - eps (for eps > 0.5 too).
        x = xp.where(x < eps, eps, xp.where(x > 1.0 - eps, 1.0 - eps, x)).astype(x.dtype)
    return (x / (1.0 - x)).log()


_FINFO = {"float32": (3.4028234663852886e38, 1.1754943508222875e-38), "float64": (1.7976931348623157e308, 0.0),
          "float16": (65504.0, 0.0), "bfloat16": (3.3895313892515355e38, 0.0)}


@lower(aten.nan_to_num.default)
def nan_to_num(x: Any, nan: Any = None, posinf: Any = None, neginf: Any = None) -> Any:
    if not _is_float(x):
        return x.clone()
    big = _FINFO[x.dtype][0]
    x = xp.where(isnan(x), xp.full((), 0.0 if nan is None else nan, dtype=x.dtype), x)
    x = xp.where(x.eq(math.inf), xp.full((), big if posinf is None else posinf, dtype=x.dtype), x)
    return xp.where(x.eq(-math.inf), xp.full((), -big if neginf is None else neginf, dtype=x.dtype), x)


@lower(aten.sinc.default)
def sinc(x: Any) -> Any:
    x = _to_float(x)
    px = x * math.pi
    return xp.where(x.eq(0), xp.ones_like(x), px.sin() / xp.where(x.eq(0), xp.ones_like(x), px))


@lower(aten.softplus.default)
def softplus(x: Any, beta: Any = 1, threshold: Any = 20) -> Any:
    bx = x * beta
    return xp.where(bx > threshold, x, (bx.exp() + 1.0).log() * (1.0 / beta))


@lower(aten.softshrink.default)
def softshrink(x: Any, lambd: Any = 0.5) -> Any:
    return xp.where(x > lambd, x - lambd, xp.where(x < -lambd, x + lambd, xp.zeros_like(x)))


@lower(aten.hardshrink.default)
def hardshrink(x: Any, lambd: Any = 0.5) -> Any:
    return xp.where((x > lambd).logical_or(x < -lambd), x, xp.zeros_like(x))


@lower(aten.threshold.default)
def threshold(x: Any, th: Any, v: Any) -> Any:
    return xp.where(x > th, x, xp.full((), v, dtype=x.dtype).expand(*x.shape))


@lower(aten.celu.default)
def celu(x: Any, alpha: Any = 1.0) -> Any:
    return x.maximum(0.0) + ((x * (1.0 / alpha)).exp() - 1.0).minimum(0.0) * alpha


@lower(aten.mish.default)
def mish(x: Any) -> Any:
    return x * softplus(x).tanh()


@lower(aten.glu.default)
def glu(x: Any, dim: int = -1) -> Any:
    d = dim % x.ndim
    half = x.shape[d] // 2
    a = x[tuple(slice(None) if i != d else slice(0, half) for i in range(x.ndim))]
    b = x[tuple(slice(None) if i != d else slice(half, 2 * half) for i in range(x.ndim))]
    return a * b.sigmoid()


@lower(aten.huber_loss.default)
def huber_loss(x: Any, target: Any, reduction: int = 1, delta: float = 1.0) -> Any:
    d = (x - target).abs()
    loss = xp.where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    return loss.mean() if reduction == 1 else loss.sum() if reduction == 2 else loss


@lower(aten.trace.default)
def trace_(x: Any) -> Any:
    n, m = x.shape
    eye = xp.eye(n, m, dtype=x.dtype)
    return (x * eye).sum(dtype="int64" if not _is_float(x) else None)


@lower(aten.eye.default, aten.eye.m)
def eye(n: int, m: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
        pin_memory: Any = None) -> Any:
    return xp.eye(n, n if m is None else m, dtype=_factory_dtype(dtype))


@lower(aten.rot90.default)
def rot90(x: Any, k: int = 1, dims: Sequence[int] = (0, 1)) -> Any:
    d0, d1 = dims[0] % x.ndim, dims[1] % x.ndim
    k %= 4
    if k == 1:
        return x.flip([d1]).transpose(d0, d1)
    if k == 2:
        return x.flip([d0, d1])
    if k == 3:
        return x.transpose(d0, d1).flip([d1])
    return x.clone()


@lower(aten.pixel_shuffle.default)
def pixel_shuffle(x: Any, r: int) -> Any:
    *lead, c, h, w = x.shape
    y = x.reshape(*lead, c // (r * r), r, r, h, w)
    n = len(lead)
    y = y.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return y.reshape(*lead, c // (r * r), h * r, w * r)


@lower(aten.pixel_unshuffle.default)
def pixel_unshuffle(x: Any, r: int) -> Any:
    *lead, c, h, w = x.shape
    y = x.reshape(*lead, c, h // r, r, w // r, r)
    n = len(lead)
    y = y.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return y.reshape(*lead, c * r * r, h // r, w // r)


@lower(aten.channel_shuffle.default, aten.native_channel_shuffle.default)
def channel_shuffle(x: Any, groups: int) -> Any:
    n, c, *rest = x.shape
    return x.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(*x.shape)


@lower(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)
def index_fill(x: Any, dim: int, index: Any, v: Any) -> Any:
    if x.ndim == 0:
        return xp.full((), v, dtype=x.dtype) if not hasattr(v, "shape") else v.astype(x.dtype).reshape(())
    d = dim % x.ndim
    hit = xp.zeros(x.shape[d], dtype="int32").index_add(0, index.reshape(-1).astype("int64"),
                                                        xp.ones(index.numel(), dtype="int32")) > 0
    shape = [1] * x.ndim
    shape[d] = x.shape[d]
    fill = v.astype(x.dtype) if hasattr(v, "shape") else xp.full((), v, dtype=x.dtype)
    return xp.where(hit.reshape(*shape), fill, x)


# ---- random: transforms of the engine's uniform and normal streams ------------------------------


@lower(aten.normal.Tensor_Tensor)
def normal_tt(mean: Any, std: Any, generator: Any = None) -> Any:
    shape = _broadcast_shape([mean.shape, std.shape])
    return xp.randn(*shape, dtype=mean.dtype) * std + mean


@lower_raw(aten.exponential_.default)
def exponential_(t: LazyTensor, lambd: float = 1.0, generator: Any = None) -> LazyTensor:
    u = xp.rand(*t.shape, dtype=value(t).dtype)
    return assign(t, -((1.0 - u).log()) * (1.0 / lambd))


@lower_raw(aten.cauchy_.default)
def cauchy_(t: LazyTensor, median: float = 0.0, sigma: float = 1.0, generator: Any = None) -> LazyTensor:
    u = xp.rand(*t.shape, dtype=value(t).dtype)
    return assign(t, tan((u - 0.5) * math.pi) * sigma + median)


@lower_raw(aten.log_normal_.default)
def log_normal_(t: LazyTensor, mean: float = 1.0, std: float = 2.0, generator: Any = None) -> LazyTensor:
    return assign(t, (xp.randn(*t.shape, dtype=value(t).dtype) * std + mean).exp())


@lower_raw(aten.geometric_.default)
def geometric_(t: LazyTensor, p: float, generator: Any = None) -> LazyTensor:
    u = xp.rand(*t.shape, dtype="float32")
    return assign(t, ceil((1.0 - u).log() * (1.0 / math.log(1.0 - p))))


# ---- sorting: the engine's stable sort --------------------------------------------------------


@lower(aten.sort.default)
def sort(x: Any, dim: int = -1, descending: bool = False) -> Any:
    values, indices = x.sort(dim, descending)
    return values, indices


@lower(aten.sort.stable)
def sort_stable(x: Any, stable: Any = None, dim: int = -1, descending: bool = False) -> Any:
    return sort(x, dim, descending)


@lower(aten.topk.default)
def topk(x: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
    if x.ndim == 0:
        return x.clone(), xp.zeros((), dtype="int64")
    values, indices = x.sort(dim, largest)
    d = dim % x.ndim
    keep = tuple(slice(None) if i != d else slice(0, k) for i in range(x.ndim))
    return values[keep], indices[keep]


@lower(aten.kthvalue.default)
def kthvalue(x: Any, k: int, dim: int = -1, keepdim: bool = False) -> Any:
    if x.ndim == 0:
        return x.clone(), xp.zeros((), dtype="int64")
    values, indices = x.sort(dim, False)
    d = dim % x.ndim
    pick = tuple(slice(None) if i != d else slice(k - 1, k) for i in range(x.ndim))
    v, i = values[pick], indices[pick]
    return (v, i) if keepdim else (v.squeeze(d), i.squeeze(d))


@lower(aten.median.default)
def median_all(x: Any) -> Any:
    flat = x.reshape(-1)
    n = flat.shape[0]
    values, _ = flat.sort(0, False)
    # torch's median is the lower of the two middle values; NaN (sorted last) wins.
    nan_any = isnan(flat).astype("int32").sum() > 0 if _is_float(x) else None
    mid = values[(n - 1) // 2]
    return xp.where(nan_any, xp.full((), math.nan, dtype=x.dtype), mid) if nan_any is not None else mid


@lower(aten.median.dim)
def median_dim(x: Any, dim: int, keepdim: bool = False) -> Any:
    if x.ndim == 0:
        return x.clone(), xp.zeros((), dtype="int64")
    d = dim % x.ndim
    n = x.shape[d]
    if _is_float(x):
        raise _Unsupported("median along a dim of floats: NaN picks its own index")
    return kthvalue(x, (n - 1) // 2 + 1, d, keepdim)


@lower(aten.argsort.default, aten.argsort.stable)
def argsort(x: Any, *args: Any, **kwargs: Any) -> Any:
    dim = kwargs.get("dim", args[0] if args and not isinstance(args[0], bool) else -1)
    descending = kwargs.get("descending", args[1] if len(args) > 1 else False)
    return x.sort(dim, descending)[1]


@lower(aten.nonzero.default)
def nonzero(x: Any) -> Any:
    """The indices of the nonzero elements, row-major. Their count is the result's length: data
    that the graph's shape needs, read to the host here (a sync, as on CUDA, where the profiler
    reports it as one); the indices themselves come from the device (a stable sort puts the
    nonzero positions first, in order), so only one number crosses, not the tensor."""
    flat = x.reshape(-1)
    total = flat.shape[0]
    mask = flat.ne(0)
    count = int(mask.astype("int64").sum().item())
    if x.ndim == 0 or total == 0 or count == 0:
        return xp.zeros((count, x.ndim), dtype="int64")
    positions = xp.arange(0, total, 1, dtype="int64")
    first, _ = xp.where(mask, positions, positions + total).sort(0, False)
    found = first[0:count]
    coordinates, stride = [], 1
    for size in reversed(x.shape):
        coordinates.insert(0, (found // stride) % size)
        stride *= size
    return xp.stack(coordinates, 1)


# ---- cumulative products and log-sum-exps, from the prefix sum -----------------------------------


@lower(aten.cumprod.default)
def cumprod(x: Any, dim: int, dtype: Any = None) -> Any:
    if dtype is not None:
        x = x.astype(engine_dtype(dtype))
    elif not _is_float(x):
        raise _Unsupported("cumprod of integers (exact products)")
    if x.ndim == 0:
        return x.clone()
    # |prefix product| = exp(prefix sum of log|x|); its sign flips with each negative factor;
    # it is 0 from the first zero on.
    zero = x.eq(0)
    mag = cumsum(xp.where(zero, xp.ones_like(x), x.abs()).log(), dim).exp()
    negatives = cumsum((x < 0).astype(x.dtype), dim)
    sign = 1.0 - (negatives.remainder(2.0)) * 2.0
    seen_zero = cumsum(zero.astype(x.dtype), dim) > 0
    return xp.where(seen_zero, xp.zeros_like(x), mag * sign)


@lower(aten.logcumsumexp.default)
def logcumsumexp(x: Any, dim: int) -> Any:
    if x.ndim == 0:
        return x.clone()
    d = dim % x.ndim
    m = x.amax([d], keepdim=True)
    m = xp.where(m.abs().eq(math.inf), xp.zeros_like(m), m)
    return cumsum((x - m).exp(), d).log() + m


# ---- diagonals: a view (writes reach the base) and its embedding --------------------------------


def _diag_mask(rows: int, cols: int, offset: int) -> Any:
    r = xp.arange(0, rows, 1, dtype="int64").unsqueeze(1)
    c = xp.arange(0, cols, 1, dtype="int64").unsqueeze(0)
    return (c - r).eq(offset)


def _diag_len(rows: int, cols: int, offset: int) -> int:
    return max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))


def _diagonal_of(v: Any, offset: int, d1: int, d2: int) -> Any:
    rest = [i for i in range(v.ndim) if i not in (d1, d2)]
    moved = v.permute(*rest, d1, d2)
    rows, cols = v.shape[d1], v.shape[d2]
    n = _diag_len(rows, cols, offset)
    lead = [v.shape[i] for i in rest]
    if n == 0:
        return xp.zeros(*lead, 0, dtype=v.dtype)
    start = (0, offset) if offset >= 0 else (-offset, 0)
    flat = moved.reshape(*lead, rows * cols)
    positions = xp.arange(0, n, 1, dtype="int64") * (cols + 1) + (start[0] * cols + start[1])
    return flat.index_select(len(lead), positions)


def _diag_embed_into(base: Any, diag: Any, offset: int, d1: int, d2: int) -> Any:
    """``base`` with its (offset) diagonal over dims d1, d2 replaced by ``diag`` (last dim)."""
    rest = [i for i in range(base.ndim) if i not in (d1, d2)]
    rows, cols = base.shape[d1], base.shape[d2]
    n = _diag_len(rows, cols, offset)
    if n == 0:
        return base
    # Row r of the embedded matrix holds diag[r - start_row] at column r + offset.
    start_row = 0 if offset >= 0 else -offset
    r = xp.arange(0, rows, 1, dtype="int64")
    pick = (r - start_row).clamp(0, n - 1)
    per_row = diag.index_select(diag.ndim - 1, pick).unsqueeze(-1)  # [..., rows, 1]
    mask = _diag_mask(rows, cols, offset)
    order = rest + [d1, d2]
    moved = base.permute(*order)
    placed = xp.where(mask, per_row.expand(*moved.shape), moved)
    inverse = [order.index(i) for i in range(base.ndim)]
    return placed.permute(*inverse)


@lower_raw(aten.diagonal.default)
def diagonal(t: LazyTensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> LazyTensor:
    n = t.dim()
    d1, d2 = dim1 % n, dim2 % n
    return make_view(
        t,
        lambda v: _diagonal_of(v, offset, d1, d2),
        lambda v, nv: _diag_embed_into(v, nv.astype(v.dtype), offset, d1, d2),
    )


@lower(aten.diag_embed.default)
def diag_embed(x: Any, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:
    n = x.shape[-1] + abs(offset)
    out_ndim = x.ndim + 1
    d1, d2 = dim1 % out_ndim, dim2 % out_ndim
    lead = list(x.shape[:-1])
    shape = []
    it = iter(lead)
    for i in range(out_ndim):
        shape.append(n if i in (d1, d2) else next(it))
    return _diag_embed_into(xp.zeros(*shape, dtype=x.dtype), x, offset, d1, d2)


@lower(aten.diagonal_scatter.default)
def diagonal_scatter(x: Any, src: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    return _diag_embed_into(x, src.astype(x.dtype), offset, dim1 % x.ndim, dim2 % x.ndim)


@lower_raw(aten.as_strided.default)
def as_strided(t: LazyTensor, size: Sequence[int], stride: Sequence[int], storage_offset: Any = None) -> LazyTensor:
    # Bridge tensors are laid out contiguously from offset 0: the strides address the root's
    # values in order, so the view is a gather of those positions and a write scatters back.
    offset = int(storage_offset or 0)
    size = [int(s) for s in size]
    positions = xp.full((), offset, dtype="int64")
    for i, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[i] = n
        positions = positions + xp.arange(0, n, 1, dtype="int64").reshape(*shape) * int(s)
    flat_positions = positions.expand(*size).reshape(-1) if size else positions.reshape(1)

    def fwd(v: Any) -> Any:
        return v.reshape(-1).index_select(0, flat_positions).reshape(*size)

    def bwd(v: Any, nv: Any) -> Any:
        flat = v.reshape(-1)
        old = flat.index_select(0, flat_positions)
        return flat.index_add(0, flat_positions, nv.reshape(-1).astype(v.dtype) - old).reshape(*v.shape)

    return make_view(t, fwd, bwd)


# ---- in-place ops that change a tensor's shape -------------------------------------------------


def _reshape_in_place(t: LazyTensor, new: Any) -> LazyTensor:
    """``t`` itself takes ``new``'s shape and values: torch's data setter re-describes the
    tensor object that C++ callers hold (`matmul` squeezes its own result in place)."""
    shell = LazyTensor(new)
    torch.Tensor.data.__set__(t, shell)  # type: ignore[attr-defined]
    new._keep_name_of(t._xp)
    t._xp = new
    t._root = t._fwd = t._bwd = None
    t._gen += 1
    return t


@lower_raw(aten.squeeze_.dim, aten.squeeze_.default, aten.squeeze_.dims)
def squeeze_in_place(t: LazyTensor, dim: Any = None) -> LazyTensor:
    return _reshape_in_place(t, value(squeeze(t, dim)))


@lower_raw(aten.unsqueeze_.default)
def unsqueeze_in_place(t: LazyTensor, dim: int) -> LazyTensor:
    return _reshape_in_place(t, value(unsqueeze(t, dim)))


@lower_raw(aten.transpose_.default)
def transpose_in_place(t: LazyTensor, d0: int, d1: int) -> LazyTensor:
    return _reshape_in_place(t, value(transpose(t, d0, d1)))


@lower_raw(aten.t_.default)
def t_in_place(t: LazyTensor) -> LazyTensor:
    return _reshape_in_place(t, value(t_(t)))


@lower_raw(aten.resize_as_.default)
def resize_as_(t: LazyTensor, template: Any, memory_format: Any = None) -> LazyTensor:
    return resize_(t, list(template.shape), memory_format)


@lower_raw(aten.resize_.default)
def resize_(t: LazyTensor, size: Sequence[int], memory_format: Any = None) -> LazyTensor:
    size = [int(s) for s in size]
    if list(t.shape) == size:
        return t
    old = value(t).reshape(-1)
    n = 1
    for s in size:
        n *= s
    have = old.shape[0]
    # torch keeps the first elements and leaves new ones uninitialized: zeros here.
    flat = old[0:n] if n <= have else xp.cat([old, xp.zeros(n - have, dtype=old.dtype)], 0)
    return _reshape_in_place(t, flat.reshape(*size))


def _index_prod(base: Any, dim: int, index: Any, rows: Any, include_self: bool) -> Any:
    """The product of each value (unless left out) and the rows sent to it along ``dim``: the
    engine scatters by sum, max and min, so a product is exp(sum(log|x|)) with its sign and its
    zeros counted apart (as ``_prod``)."""
    if not include_self:
        shape = [1] * base.ndim
        shape[dim] = base.shape[dim]
        hits = xp.zeros(base.shape[dim], dtype="int64").index_add(0, index, xp.ones(index.shape[0], dtype="int64"))
        reached = (hits > 0).reshape(*shape).expand(*base.shape)
        base = xp.where(reached, xp.ones_like(base), base)

    def summed(v: Any, of_rows: Any) -> Any:
        return v.index_add(dim, index, of_rows)

    fb, fr = _to_float(base), _to_float(rows)
    logs = summed(xp.where(fb.eq(0), xp.ones_like(fb), fb.abs()).log(),
                  xp.where(fr.eq(0), xp.ones_like(fr), fr.abs()).log())
    negatives = summed((base < 0).astype("int64"), (rows < 0).astype("int64"))
    zeros = summed(base.eq(0).astype("int64"), rows.eq(0).astype("int64"))
    sign = 1.0 - negatives.remainder(2).astype(fb.dtype) * 2.0
    value = xp.where(zeros > 0, xp.zeros_like(fb), logs.exp() * sign)
    return value if _is_float(base) else value.round().astype(base.dtype)


@lower(aten.index_reduce.default)
def index_reduce(x: Any, dim: int, index: Any, source: Any, reduce: str, include_self: bool = True) -> Any:
    if x.ndim == 0:
        # A 0-d tensor is one value that every index names.
        out = index_reduce(x.reshape(1), 0, index.reshape(-1), source.reshape(-1), reduce, include_self)
        return out.reshape(())
    d = dim % x.ndim
    source = source.astype(x.dtype)
    if reduce == "prod":
        return _index_prod(x, d, index, source, include_self)
    return x.index_reduce(d, index, source, reduce, include_self=include_self)


@lower(aten.scatter_reduce.two)
def scatter_reduce(x: Any, dim: int, index: Any, src: Any, reduce: str, include_self: bool = True) -> Any:
    if x.ndim == 0:
        raise _Unsupported(f"scatter_reduce of a 0-d tensor with reduce={reduce!r}")
    flat = _flat_positions(x, dim % x.ndim, index).reshape(-1)
    rows = _crop_to(src, index.shape).reshape(-1).astype(x.dtype)
    if reduce in ("amax", "amin"):
        out = x.reshape(-1).index_reduce(0, flat, rows, reduce, include_self=include_self)
        return out.reshape(*x.shape)
    if reduce == "prod":
        return _index_prod(x.reshape(-1), 0, flat, rows, include_self).reshape(*x.shape)
    n = 1
    for s in x.shape:
        n *= s
    hits = xp.zeros(n, dtype="int64").index_add(0, flat, xp.ones(flat.shape[0], dtype="int64"))
    base = x.reshape(-1)
    if not include_self:
        base = xp.where(hits > 0, xp.zeros_like(base), base)
    total = base.index_add(0, flat, rows)
    if reduce == "sum":
        return total.reshape(*x.shape)
    count = hits + (1 if include_self else 0)
    count = count.maximum(1).astype(x.dtype)
    mean = total / count if _is_float(x) else total.div(count, rounding_mode="floor")
    return mean.astype(x.dtype).reshape(*x.shape)


# ---- products, searches, and factories torch builds its own way ---------------------------------


def _prod(x: Any, axes: List[int], keepdim: bool) -> Any:
    # The engine reduces by sum, max and min: a product is exp(sum(log|x|)) with its sign and
    # its zeros counted separately.
    zero = x.eq(0)
    mag = xp.where(zero, xp.ones_like(x), x.abs()).log().sum(axes, keepdim=keepdim).exp()
    negatives = (x < 0).astype("int64").sum(axes, keepdim=keepdim)
    sign = 1.0 - negatives.remainder(2).astype(x.dtype) * 2.0
    any_zero = zero.astype("int64").sum(axes, keepdim=keepdim) > 0
    return xp.where(any_zero, xp.zeros_like(mag), mag * sign)


@lower(aten.prod.default)
def prod_all(x: Any, dtype: Any = None) -> Any:
    if dtype is not None:
        x = x.astype(engine_dtype(dtype))
    if not _is_float(x):
        raise _Unsupported("prod of integers (exact products)")
    return _prod(x, list(range(x.ndim)), False)


@lower(aten.prod.dim_int)
def prod_dim(x: Any, dim: int, keepdim: bool = False, dtype: Any = None) -> Any:
    if dtype is not None:
        x = x.astype(engine_dtype(dtype))
    if not _is_float(x):
        raise _Unsupported("prod of integers (exact products)")
    if x.ndim == 0:
        return x.clone()
    return _prod(x, [dim % x.ndim], keepdim)


@lower(aten.bucketize.Tensor)
def bucketize(values: Any, boundaries: Any, out_int32: bool = False, right: bool = False) -> Any:
    from ._statistics import searchsorted

    return searchsorted(boundaries, values, out_int32, right)


@lower(aten.new_empty_strided.default)
def new_empty_strided(x: Any, size: Sequence[int], stride: Sequence[int], dtype: Any = None, layout: Any = None,
                      device: Any = None, pin_memory: Any = None) -> Any:
    return xp.zeros(*size, dtype=_dt(dtype) or x.dtype)


@lower_raw(aten.narrow_copy.default)
def narrow_copy(t: LazyTensor, dim: int, start: int, length: int) -> LazyTensor:
    return LazyTensor(value(slice_(t, dim, start, start + length, 1)).clone())


# The lowerings of whole families, each in its own module.
from . import _complex, _linalg, _optim, _pooling, _scatter, _special, _statistics  # noqa: E402,F401
