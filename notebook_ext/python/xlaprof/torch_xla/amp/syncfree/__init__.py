"""``torch_xla.amp.syncfree``: SGD, Adam and AdamW whose step a scaler can skip on the device.

Each takes ``found_inf`` (torch_xla's argument) or the ``found_inf`` and ``grad_scale`` that
``GradScaler.step`` sets on an optimizer marked ``_step_supports_amp_scaling``: the gradients are
unscaled, torch's own step runs, and where ``found_inf`` is set every parameter and state tensor
keeps its value from before (a select in the step's program, not a branch on the host). Adam's
and AdamW's step counts live on the device (``capturable``), so that they are kept too (on
the reference run's CPU, where torch has no such step, they are counted on the host).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

import torch

from ... import _alias, _target

__getattr__ = _alias.not_provided(__name__)


class _SyncFree:
    _step_supports_amp_scaling = True

    def step(self, closure: Optional[Callable[[], Any]] = None, found_inf: Optional[torch.Tensor] = None) -> Any:
        found_inf = found_inf if found_inf is not None else getattr(self, "found_inf", None)
        grad_scale = getattr(self, "grad_scale", None)
        if hasattr(self, "grad_scale"):
            # Taken here: torch's own step (below) refuses them unless it is fused.
            self.grad_scale = self.found_inf = None
        params = [p for g in self.param_groups for p in g["params"] if p.grad is not None]  # type: ignore[attr-defined]
        if grad_scale is not None:
            with torch.no_grad():
                for p in params:
                    p.grad.div_(grad_scale.to(p.grad.dtype))
        if found_inf is None:
            return super().step(closure)  # type: ignore[misc]
        if found_inf.dim() != 0:
            raise ValueError(f"found_inf must be a scalar tensor, not one of shape {tuple(found_inf.shape)}")
        before = {p: (p.detach().clone(), self._state_of(p)) for p in params}
        result = super().step(closure)  # type: ignore[misc]
        with torch.no_grad():
            skip = found_inf.to(torch.bool)
            for p, (old, old_state) in before.items():
                p.copy_(torch.where(skip, old, p))
                for name, value in self.state[p].items():  # type: ignore[attr-defined]
                    if isinstance(value, torch.Tensor):
                        kept = old_state.get(name, torch.zeros_like(value))
                        value.copy_(torch.where(skip, kept, value))
        return result

    def _state_of(self, p: torch.Tensor) -> Dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.state[p].items()  # type: ignore[attr-defined]
                if isinstance(v, torch.Tensor)}


class SGD(_SyncFree, torch.optim.SGD):
    pass


class Adam(_SyncFree, torch.optim.Adam):
    def __init__(self, params: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("capturable", not _target.current().reference)
        super().__init__(params, *args, **kwargs)


class AdamW(_SyncFree, torch.optim.AdamW):
    def __init__(self, params: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("capturable", not _target.current().reference)
        super().__init__(params, *args, **kwargs)


__all__: List[str] = ["SGD", "Adam", "AdamW"]
