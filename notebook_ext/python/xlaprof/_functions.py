"""PyTorch's module-level functions (``torch.softmax(x, 1)``, ``torch.argmax(x)``, ...): each is
the Tensor method of the same name, with the signature ``torch`` gives it; and the ``*_like``
factories and ``randint``. Frames of this package are skipped when ops are located, so each op
still carries the caller's line."""

from __future__ import annotations

import builtins
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import _native
from ._native import Tensor

Dim = Union[None, int, Sequence[int]]


def _tensor(what: str, value: Any) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"{what}() expects a Tensor as input, not {type(value).__name__}")
    return value


# ---- factories ----------------------------------------------------------------------------


def zeros_like(input: Tensor, *, dtype: Optional[Any] = None, device: Optional[Any] = None,
               requires_grad: bool = False) -> Tensor:
    t = _tensor("zeros_like", input)
    return _native.zeros(*t.shape, dtype=dtype or t.dtype, device=device,
                         requires_grad=requires_grad)


def ones_like(input: Tensor, *, dtype: Optional[Any] = None, device: Optional[Any] = None,
              requires_grad: bool = False) -> Tensor:
    t = _tensor("ones_like", input)
    return _native.ones(*t.shape, dtype=dtype or t.dtype, device=device,
                        requires_grad=requires_grad)


def full_like(input: Tensor, fill_value: Any, *, dtype: Optional[Any] = None,
              device: Optional[Any] = None, requires_grad: bool = False) -> Tensor:
    t = _tensor("full_like", input)
    return _native.full(t.shape, fill_value, dtype=dtype or t.dtype, device=device,
                        requires_grad=requires_grad)


def rand_like(input: Tensor, *, dtype: Optional[Any] = None, device: Optional[Any] = None,
              requires_grad: bool = False, seed: Optional[int] = None) -> Tensor:
    t = _tensor("rand_like", input)
    return _native.rand(*t.shape, seed=seed, dtype=dtype or t.dtype, device=device,
                        requires_grad=requires_grad)


def randn_like(input: Tensor, *, dtype: Optional[Any] = None, device: Optional[Any] = None,
               requires_grad: bool = False, seed: Optional[int] = None) -> Tensor:
    t = _tensor("randn_like", input)
    return _native.randn(*t.shape, seed=seed, dtype=dtype or t.dtype, device=device,
                         requires_grad=requires_grad)


def randint(low: int, high: Optional[int] = None, size: Optional[Sequence[int]] = None, *,
            seed: Optional[int] = None, dtype: Optional[Any] = None,
            device: Optional[Any] = None, requires_grad: bool = False) -> Tensor:
    """Integers uniform in ``[low, high)``: ``randint(high, size)`` or ``randint(low, high,
    size)``, as PyTorch's two forms; int64 unless ``dtype``."""
    if size is None:
        if high is None:
            raise TypeError("randint() needs a size: randint(high, size) or randint(low, high, size)")
        low, high, size = 0, low, high
    if high is None:
        raise TypeError("randint() needs high: randint(high, size) or randint(low, high, size)")
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    if requires_grad:
        raise _native.AutogradError("randint: only tensors of a float dtype can require gradients")
    u = _native.rand(*(size if not isinstance(size, int) else (size,)), seed=seed,
                     dtype="float64", device=device)
    out = (u * (high - low)).floor().clamp(0, high - low - 1) + low
    return out.to(dtype or "int64")


# ---- reductions ---------------------------------------------------------------------------


def sum(input: Tensor, dim: Dim = None, keepdim: bool = False, *,
        dtype: Optional[Any] = None) -> Tensor:
    return _tensor("sum", input).sum(dim, keepdim, dtype=dtype)


def mean(input: Tensor, dim: Dim = None, keepdim: bool = False, *,
         dtype: Optional[Any] = None) -> Tensor:
    return _tensor("mean", input).mean(dim, keepdim, dtype=dtype)


def max(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """``max(x)``, ``max(x, dim)`` (``(values, indices)``) or ``max(x, other)`` (elementwise)."""
    return _tensor("max", input).max(dim, keepdim)


def min(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    return _tensor("min", input).min(dim, keepdim)


def amax(input: Tensor, dim: Dim = (), keepdim: bool = False) -> Tensor:
    return _tensor("amax", input).amax(dim, keepdim)


def amin(input: Tensor, dim: Dim = (), keepdim: bool = False) -> Tensor:
    return _tensor("amin", input).amin(dim, keepdim)


def argmax(input: Tensor, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
    return _tensor("argmax", input).argmax(dim, keepdim)


def argmin(input: Tensor, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
    return _tensor("argmin", input).argmin(dim, keepdim)


def logsumexp(input: Tensor, dim: Dim, keepdim: bool = False) -> Tensor:
    return _tensor("logsumexp", input).logsumexp(dim, keepdim)


def var(input: Tensor, dim: Dim = None, *, correction: int = 1, keepdim: bool = False,
        unbiased: Optional[bool] = None) -> Tensor:
    return _tensor("var", input).var(dim, correction=correction, keepdim=keepdim,
                                     unbiased=unbiased)


def std(input: Tensor, dim: Dim = None, *, correction: int = 1, keepdim: bool = False,
        unbiased: Optional[bool] = None) -> Tensor:
    return _tensor("std", input).std(dim, correction=correction, keepdim=keepdim,
                                     unbiased=unbiased)


# ---- elementwise --------------------------------------------------------------------------


def _unary(name: str):  # type: ignore[no-untyped-def]
    def op(input: Tensor) -> Tensor:
        return getattr(_tensor(name, input), name)()

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``input.{name}()``."
    return op


abs = _unary("abs")
neg = _unary("neg")
exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
sin = _unary("sin")
cos = _unary("cos")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
sign = _unary("sign")
floor = _unary("floor")
relu = _unary("relu")
logical_not = _unary("logical_not")


def erf(input: Tensor) -> Tensor:
    """The error function."""
    return _tensor("erf", input).erf()


def add(input: Tensor, other: Any, *, alpha: float = 1) -> Tensor:
    return _tensor("add", input).add(other, alpha=alpha)


def sub(input: Tensor, other: Any, *, alpha: float = 1) -> Tensor:
    return _tensor("sub", input).sub(other, alpha=alpha)


def mul(input: Tensor, other: Any) -> Tensor:
    return _tensor("mul", input).mul(other)


def div(input: Tensor, other: Any, *, rounding_mode: Optional[str] = None) -> Tensor:
    return _tensor("div", input).div(other, rounding_mode=rounding_mode)


def pow(input: Tensor, exponent: Any) -> Tensor:
    return _tensor("pow", input).pow(exponent)


def maximum(input: Tensor, other: Tensor) -> Tensor:
    return _tensor("maximum", input).maximum(other)


def minimum(input: Tensor, other: Tensor) -> Tensor:
    return _tensor("minimum", input).minimum(other)


def clamp(input: Tensor, min: Optional[float] = None, max: Optional[float] = None) -> Tensor:
    return _tensor("clamp", input).clamp(min, max)


clip = clamp


def eq(input: Tensor, other: Any) -> Tensor:
    return _tensor("eq", input).eq(other)


def ne(input: Tensor, other: Any) -> Tensor:
    return _tensor("ne", input).ne(other)


def lt(input: Tensor, other: Any) -> Tensor:
    return _tensor("lt", input).lt(other)


def le(input: Tensor, other: Any) -> Tensor:
    return _tensor("le", input).le(other)


def gt(input: Tensor, other: Any) -> Tensor:
    return _tensor("gt", input).gt(other)


def ge(input: Tensor, other: Any) -> Tensor:
    return _tensor("ge", input).ge(other)


def masked_fill(input: Tensor, mask: Tensor, value: Any) -> Tensor:
    return _tensor("masked_fill", input).masked_fill(mask, value)


def softmax(input: Tensor, dim: int, dtype: Optional[Any] = None) -> Tensor:
    return _tensor("softmax", input).softmax(dim, dtype)


def log_softmax(input: Tensor, dim: int, dtype: Optional[Any] = None) -> Tensor:
    return _tensor("log_softmax", input).log_softmax(dim, dtype)


# ---- linear algebra and movement ----------------------------------------------------------


def matmul(input: Tensor, other: Tensor) -> Tensor:
    return _tensor("matmul", input).matmul(other)


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    if input.ndim != 2 or mat2.ndim != 2:
        raise ValueError(f"mm needs two matrices, not {input.ndim}-d and {mat2.ndim}-d tensors")
    return input.matmul(mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    if input.ndim != 3 or mat2.ndim != 3:
        raise ValueError(f"bmm needs two 3-d tensors, not {input.ndim}-d and {mat2.ndim}-d")
    return input.matmul(mat2)


def reshape(input: Tensor, shape: Sequence[int]) -> Tensor:
    return _tensor("reshape", input).reshape(shape)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    return _tensor("flatten", input).flatten(start_dim, end_dim)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    return _tensor("transpose", input).transpose(dim0, dim1)


def permute(input: Tensor, dims: Sequence[int]) -> Tensor:
    return _tensor("permute", input).permute(dims)


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    return _tensor("unsqueeze", input).unsqueeze(dim)


def squeeze(input: Tensor, dim: Dim = None) -> Tensor:
    return _tensor("squeeze", input).squeeze(dim)


def t(input: Tensor) -> Tensor:
    return _tensor("t", input).t()


def flip(input: Tensor, dims: Sequence[int]) -> Tensor:
    return _tensor("flip", input).flip(dims)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    return _tensor("index_select", input).index_select(dim, index)


def concat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    return _native.cat(tensors, dim)


# ---- values and predicates ----------------------------------------------------------------


def numel(input: Tensor) -> int:
    return _tensor("numel", input).numel()


def is_tensor(obj: Any) -> bool:
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> bool:
    return _tensor("is_floating_point", input).is_floating_point()


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """Reads both (a sync when pending) and compares them as ``numpy.allclose`` does."""
    return builtins.bool(np.allclose(np.asarray(input), np.asarray(other), rtol=rtol, atol=atol,
                                     equal_nan=equal_nan))


def equal(input: Tensor, other: Tensor) -> bool:
    """True when both have the same shape and values (reads them)."""
    a, b = np.asarray(input), np.asarray(other)
    return a.shape == b.shape and builtins.bool(np.array_equal(a, b))


__all__ = [
    "abs", "add", "allclose", "amax", "amin", "argmax", "argmin", "bmm", "clamp", "clip",
    "concat", "cos", "div", "eq", "equal", "erf", "exp", "flatten", "flip", "floor", "full_like",
    "ge", "gt", "index_select", "is_floating_point", "is_tensor", "le", "log", "log_softmax",
    "logical_not", "logsumexp", "lt", "masked_fill", "matmul", "max", "maximum", "mean", "min",
    "minimum", "mm", "mul", "ne", "neg", "numel", "ones_like", "permute", "pow", "rand_like",
    "randint", "randn_like", "relu", "reshape", "rsqrt", "sigmoid", "sign", "sin", "softmax",
    "sqrt", "squeeze", "std", "sub", "sum", "t", "tanh", "transpose", "unsqueeze", "var",
    "zeros_like",
]
