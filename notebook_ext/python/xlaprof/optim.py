"""``torch.optim``'s SGD, Adam and AdamW on the engine's optimizers. Each update is recorded as
IR and rebinds the parameters in place, so forward, backward and update compile to one graph;
the learning rate is a graph input (changing it never recompiles).

The signatures are PyTorch's. Options the engine does not implement (``dampening``,
``nesterov``, ``amsgrad``, ``maximize``) are accepted at their defaults and refused otherwise;
``params`` is one list of tensors (parameter groups are not supported). ``param_groups[0]``
holds the hyperparameters, and setting its ``"lr"`` changes the learning rate, as in PyTorch.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from . import _native
from ._native import Tensor


def _params(params: Iterable[Any]) -> List[Tensor]:
    params = list(params)
    if not params:
        raise ValueError("optimizer got an empty parameter list")
    if any(isinstance(p, dict) for p in params):
        raise TypeError("parameter groups (dicts) are not supported; pass one list of tensors")
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                            f"{type(p).__name__}")
    return params


def _refuse(name: str, value: Any, default: Any) -> None:
    if value != default:
        raise ValueError(f"{name}={value!r} is not supported by xlaprof's optimizers "
                         f"(only {name}={default!r})")


class Optimizer:
    """What the optimizers share: ``step``, ``zero_grad`` and ``param_groups``."""

    def __init__(self, native: Any, params: List[Tensor], defaults: Dict[str, Any]) -> None:
        self._native = native
        self.defaults = dict(defaults)
        self.param_groups: List[Dict[str, Any]] = [dict(defaults, params=params)]

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """Records the update of every parameter that has a gradient (it runs at the next
        sync). A ``closure`` is called first and its loss returned, as in PyTorch."""
        loss = closure() if closure is not None else None
        self._native.lr = float(self.param_groups[0]["lr"])
        self._native.step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drops the gradients (the next ``backward`` starts from zero either way)."""
        self._native.zero_grad()

    @property
    def lr(self) -> float:
        return float(self.param_groups[0]["lr"])

    @lr.setter
    def lr(self, value: float) -> None:
        self.param_groups[0]["lr"] = value

    def __repr__(self) -> str:
        options = ", ".join(f"{k}={v!r}" for k, v in self.param_groups[0].items() if k != "params")
        return f"{type(self).__name__}({options})"


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum and weight decay (PyTorch's
    semantics)."""

    def __init__(self, params: Iterable[Tensor], lr: float = 0.001, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False) -> None:
        _refuse("dampening", dampening, 0)
        _refuse("nesterov", nesterov, False)
        _refuse("maximize", maximize, False)
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"invalid SGD hyperparameters: lr={lr}, momentum={momentum}, "
                             f"weight_decay={weight_decay}")
        ps = _params(params)
        native = _native.SGD(ps, float(lr), float(momentum), float(weight_decay))
        super().__init__(native, ps, dict(lr=lr, momentum=momentum, dampening=dampening,
                                          weight_decay=weight_decay, nesterov=nesterov,
                                          maximize=maximize))


def _adam(cls_name: str, params: Iterable[Tensor], lr: float, betas: Tuple[float, float],
          eps: float, weight_decay: float, amsgrad: bool, maximize: bool,
          decoupled: bool) -> Tuple[Any, List[Tensor], Dict[str, Any]]:
    _refuse("amsgrad", amsgrad, False)
    _refuse("maximize", maximize, False)
    if lr < 0 or eps < 0 or weight_decay < 0 or not all(0.0 <= b < 1.0 for b in betas):
        raise ValueError(f"invalid {cls_name} hyperparameters: lr={lr}, betas={betas}, eps={eps}, "
                         f"weight_decay={weight_decay}")
    ps = _params(params)
    b1, b2 = betas
    native = _native.Adam(ps, float(lr), (float(b1), float(b2)), float(eps), float(weight_decay),
                          decoupled)
    return native, ps, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                            amsgrad=amsgrad, maximize=maximize)


class Adam(Optimizer):
    """Adam; ``weight_decay`` adds to the gradient (L2), as PyTorch's Adam."""

    def __init__(self, params: Iterable[Tensor], lr: float = 0.001,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 weight_decay: float = 0, amsgrad: bool = False, *,
                 maximize: bool = False) -> None:
        super().__init__(*_adam("Adam", params, lr, betas, eps, weight_decay, amsgrad, maximize,
                                False))


class AdamW(Optimizer):
    """Adam with decoupled weight decay."""

    def __init__(self, params: Iterable[Tensor], lr: float = 0.001,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 weight_decay: float = 0.01, amsgrad: bool = False, *,
                 maximize: bool = False) -> None:
        super().__init__(*_adam("AdamW", params, lr, betas, eps, weight_decay, amsgrad, maximize,
                                True))


__all__ = ["Adam", "AdamW", "Optimizer", "SGD"]
