"""``torch.nn.functional`` on the engine's ops: the same names, signatures and defaults, for the
ops the engine has. Losses take PyTorch's ``reduction`` ('mean', 'sum', 'none'), class
``weight``, ``ignore_index`` and ``label_smoothing``; the legacy ``size_average`` and ``reduce``
are read as PyTorch reads them."""

from __future__ import annotations

import warnings
from typing import Any, Optional, Sequence, Union

from .. import _native
from .._functions import erf
from .._native import Tensor, avg_pool2d, conv2d, dropout, linear, max_pool2d  # noqa: F401

_Shape = Union[int, Sequence[int]]


# ---- activations --------------------------------------------------------------------------


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``inplace=True`` is accepted; the result is a new tensor either way."""
    return input.relu()


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    return _native.where(input > 0, input, input * negative_slope)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU: ``x * Phi(x)`` with the exact normal CDF (``approximate='none'``, through
    ``xlaprof.erf``), or the tanh approximation (``approximate='tanh'``, the engine's op)."""
    if approximate == "tanh":
        return input.gelu()
    if approximate != "none":
        raise ValueError(f"approximate must be 'none' or 'tanh', not {approximate!r}")
    return input * 0.5 * (1.0 + erf(input * 0.7071067811865476))


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    return input.silu()


def sigmoid(input: Tensor) -> Tensor:
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    return input.tanh()


def _softmax_dim(name: str, ndim: int, stacklevel: int) -> int:
    # PyTorch's deprecated implicit dim, with its warning.
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
        "dim=X as an argument.",
        stacklevel=stacklevel,
    )
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3,
            dtype: Optional[Any] = None) -> Tensor:
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim, _stacklevel)
    return input.softmax(dim, dtype)


def log_softmax(input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3,
                dtype: Optional[Any] = None) -> Tensor:
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim, _stacklevel)
    return input.log_softmax(dim, dtype)


# ---- layers -------------------------------------------------------------------------------


def layer_norm(input: Tensor, normalized_shape: _Shape, weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-05) -> Tensor:
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    return _native.layer_norm(input, shape, weight, bias, eps)


def embedding(input: Tensor, weight: Tensor, padding_idx: Optional[int] = None) -> Tensor:
    """The rows of ``weight`` at ``input``; with ``padding_idx``, that row contributes nothing
    and gets no gradient."""
    out = _native.embedding(input, weight)
    if padding_idx is None:
        return out
    if padding_idx < 0:
        padding_idx += weight.shape[0]
    return out * (input != padding_idx).unsqueeze(-1).to(out.dtype)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot rows; ``num_classes=-1`` reads the largest label (a sync)."""
    if num_classes == -1:
        num_classes = int(tensor.max().item()) + 1
    return tensor.one_hot(num_classes).long()


# ---- losses -------------------------------------------------------------------------------


def _reduction(size_average: Optional[bool], reduce: Optional[bool], reduction: str) -> str:
    if size_average is not None or reduce is not None:
        warnings.warn("size_average and reduce args will be deprecated, please use "
                      "reduction='mean', 'sum' or 'none' instead.", stacklevel=3)
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        return "none" if not reduce else ("mean" if size_average else "sum")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _class_losses(logp: Tensor, target: Tensor, weight: Optional[Tensor], ignore_index: int,
                  label_smoothing: float, reduction: str) -> Tensor:
    """Cross entropy from log-probabilities ``[N, C]`` and class indices ``[N]``."""
    if logp.ndim != 2 or target.ndim != 1:
        raise _native.ShapeError(
            f"cross_entropy and nll_loss take [N, C] inputs and [N] class indices here, not "
            f"{list(logp.shape)} and {list(target.shape)}")
    classes = logp.shape[1]
    hot = target.one_hot(classes).to(logp.dtype)  # an ignored (out of range) index: a zero row
    if ignore_index >= 0 and ignore_index < classes:
        hot = hot * (target != ignore_index).unsqueeze(1).to(logp.dtype)
    w = hot if weight is None else hot * weight
    loss = -(w * logp).sum(1)
    counted = w.sum(1)  # each sample's weight (0 when ignored)
    if label_smoothing > 0.0:
        valid = hot.sum(1)
        spread = -(logp if weight is None else logp * weight).sum(1) * valid / classes
        loss = loss * (1.0 - label_smoothing) + spread * label_smoothing
    if reduction == "mean":
        return loss.sum() / counted.sum()
    return _reduce(loss, reduction)


def cross_entropy(input: Tensor, target: Tensor, weight: Optional[Tensor] = None,
                  size_average: Optional[bool] = None, ignore_index: int = -100,
                  reduce: Optional[bool] = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy of logits ``[N, C]`` against class indices ``[N]`` or class
    probabilities ``[N, C]``."""
    reduction = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0, not {label_smoothing}")
    if target.is_floating_point():
        if target.shape != input.shape:
            raise _native.ShapeError(
                f"cross_entropy: probabilities {list(target.shape)} must have the shape of the "
                f"input {list(input.shape)}")
        logp = input.log_softmax(1)
        classes = input.shape[1]
        if label_smoothing > 0.0:
            target = target * (1.0 - label_smoothing) + label_smoothing / classes
        loss = -((logp * target) if weight is None else (logp * target * weight)).sum(1)
        return _reduce(loss, reduction)
    return _class_losses(input.log_softmax(1), target, weight, ignore_index, label_smoothing,
                         reduction)


def nll_loss(input: Tensor, target: Tensor, weight: Optional[Tensor] = None,
             size_average: Optional[bool] = None, ignore_index: int = -100,
             reduce: Optional[bool] = None, reduction: str = "mean") -> Tensor:
    """The negative log-likelihood of log-probabilities ``[N, C]`` at class indices ``[N]``."""
    reduction = _reduction(size_average, reduce, reduction)
    return _class_losses(input, target, weight, ignore_index, 0.0, reduction)


def mse_loss(input: Tensor, target: Tensor, size_average: Optional[bool] = None,
             reduce: Optional[bool] = None, reduction: str = "mean") -> Tensor:
    d = input - target
    return _reduce(d * d, _reduction(size_average, reduce, reduction))


def l1_loss(input: Tensor, target: Tensor, size_average: Optional[bool] = None,
            reduce: Optional[bool] = None, reduction: str = "mean") -> Tensor:
    return _reduce((input - target).abs(), _reduction(size_average, reduce, reduction))


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Optional[Tensor] = None,
                         size_average: Optional[bool] = None, reduce: Optional[bool] = None,
                         reduction: str = "mean") -> Tensor:
    """From probabilities; each log is clamped at -100, as PyTorch clamps it."""
    reduction = _reduction(size_average, reduce, reduction)
    loss = -(target * input.log().clamp(-100.0) + (1.0 - target) * (1.0 - input).log().clamp(-100.0))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Optional[Tensor] = None,
                                     size_average: Optional[bool] = None,
                                     reduce: Optional[bool] = None, reduction: str = "mean",
                                     pos_weight: Optional[Tensor] = None) -> Tensor:
    """From logits, in the stable form ``max(x, 0) - x*y + log(1 + exp(-|x|))``."""
    reduction = _reduction(size_average, reduce, reduction)
    softplus_neg = (1.0 + (-input.abs()).exp()).log() + (-input).relu()  # log(1 + exp(-x))
    if pos_weight is None:
        loss = (1.0 - target) * input + softplus_neg
    else:
        scale = (pos_weight - 1.0) * target + 1.0
        loss = (1.0 - target) * input + scale * softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


__all__ = [
    "avg_pool2d", "binary_cross_entropy", "binary_cross_entropy_with_logits", "conv2d",
    "cross_entropy", "dropout", "embedding", "gelu", "layer_norm", "leaky_relu", "linear",
    "l1_loss", "log_softmax", "max_pool2d", "mse_loss", "nll_loss", "one_hot", "relu", "sigmoid",
    "silu", "softmax", "tanh",
]
