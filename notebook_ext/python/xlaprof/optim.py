"""Optimizers from the engine. Each update is recorded as IR and rebinds the parameters in
place, so forward, backward and update compile to one graph; the learning rate is a graph
input (changing it never recompiles)."""

from __future__ import annotations

from typing import Iterable, Tuple

from . import _native
from ._native import Tensor

Optimizer = (_native.SGD, _native.Adam)


def SGD(params: Iterable[Tensor], lr: float, momentum: float = 0.0, weight_decay: float = 0.0) -> _native.SGD:
    return _native.SGD(list(params), lr, momentum, weight_decay)


def Adam(
    params: Iterable[Tensor],
    lr: float = 1e-3,
    betas: Tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
) -> _native.Adam:
    return _native.Adam(list(params), lr, betas, eps, weight_decay, False)


def AdamW(
    params: Iterable[Tensor],
    lr: float = 1e-3,
    betas: Tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.01,
) -> _native.Adam:
    return _native.Adam(list(params), lr, betas, eps, weight_decay, True)


__all__ = ["Adam", "AdamW", "SGD"]
