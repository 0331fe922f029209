"""Modules: the engine's ``Linear``, ``Conv2d``, ``LayerNorm`` and ``Embedding``, and a
``Module`` base class (with ``Sequential`` and activations) to compose them like PyTorch."""

from __future__ import annotations

from typing import Any, Iterator, List

from .. import _native
from .._native import Conv2d, Embedding, LayerNorm, Linear, Tensor
from . import functional


class Module:
    """Base class: ``parameters()`` finds every tensor that requires grad in the attributes
    (modules, tensors, lists and dicts of them); calling the module calls ``forward``."""

    training: bool = True

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def parameters(self) -> List[Tensor]:
        seen: set = set()
        out: List[Tensor] = []
        for p in _walk(vars(self)):
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
        return out

    def train(self, mode: bool = True) -> "Module":
        self.training = mode
        return self

    def eval(self) -> "Module":
        return self.train(False)


def _walk(value: Any) -> Iterator[Tensor]:
    if isinstance(value, Tensor):
        if value.requires_grad:
            yield value
    elif isinstance(value, Module):
        yield from _walk(vars(value))
    elif isinstance(value, (Linear, Conv2d, LayerNorm, Embedding)):
        yield from value.parameters()
    elif isinstance(value, dict):
        yield from _walk(list(value.values()))
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _walk(v)


class Sequential(Module):
    def __init__(self, *layers: Any) -> None:
        self.layers = list(layers)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class ReLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class GELU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.gelu()


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()


class Flatten(Module):
    """Flattens every dim after the first (the batch)."""

    def forward(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], -1)


class CrossEntropyLoss(Module):
    def forward(self, logits: Tensor, labels: Tensor) -> Tensor:
        return _native.cross_entropy(logits, labels)


__all__ = [
    "Conv2d", "CrossEntropyLoss", "Embedding", "Flatten", "GELU", "LayerNorm", "Linear",
    "Module", "ReLU", "Sequential", "Sigmoid", "Tanh", "functional",
]
