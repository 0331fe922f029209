"""Functional forms of the engine's neural-network ops (``torch.nn.functional`` style)."""

from __future__ import annotations

from .._native import (  # noqa: F401
    avg_pool2d,
    conv2d,
    cross_entropy,
    dropout,
    embedding,
    layer_norm,
    max_pool2d,
)
from .._native import Tensor


def relu(x: Tensor) -> Tensor:
    return x.relu()


def gelu(x: Tensor) -> Tensor:
    return x.gelu()


def silu(x: Tensor) -> Tensor:
    return x.silu()


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    return x.softmax(dim)


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    return x.log_softmax(dim)


def one_hot(x: Tensor, num_classes: int) -> Tensor:
    return x.one_hot(num_classes)


__all__ = [
    "avg_pool2d", "conv2d", "cross_entropy", "dropout", "embedding", "gelu", "layer_norm",
    "log_softmax", "max_pool2d", "one_hot", "relu", "silu", "softmax",
]
