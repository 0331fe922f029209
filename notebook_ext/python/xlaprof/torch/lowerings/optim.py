"""torch's fused optimizer kernels (``torch._fused_adamw_``, ``_fused_adam_``, ``_fused_sgd_``,
``_fused_adagrad_``) on the device, as the multi-tensor steps torch writes in Python for the same optimizers.

``AdamW(fused=True)`` and Hugging Face Trainer's default optimizer (``adamw_torch_fused``) call
one fused kernel per step, which torch has for CUDA and the CPU only: without these it ran on
the CPU fallback, every parameter, gradient and moment read to the host and written back each
step (a Trainer run of a tiny GPT-2 spent 58 of its 63 s there). torch's own foreach step is the
same arithmetic in ``torch._foreach_*`` ops, which the bridge lowers, with the step counts kept
on the device (``capturable``): one graph per step, no sync.
"""

from __future__ import annotations

from typing import Any, List, Optional

import torch
from torch.optim.adagrad import _multi_tensor_adagrad
from torch.optim.adam import _multi_tensor_adam

from .common import Unsupported, aten
from .registry import lower_raw


def _refuse_scaler(optimizer: str, grad_scale: Any, found_inf: Any) -> None:
    """A step unscaled by the fused kernel itself (a `GradScaler`'s) is not written here: the
    op then takes the way of an op with no lowering."""
    if grad_scale is not None or found_inf is not None:
        raise Unsupported(f"a fused {optimizer} step with a gradient scaler")


def _adam(decoupled: bool) -> Any:
    def step(params: List[Any], grads: List[Any], exp_avgs: List[Any], exp_avg_sqs: List[Any],
             max_exp_avg_sqs: List[Any], state_steps: List[Any], *, lr: Any, beta1: float, beta2: float,
             weight_decay: float, eps: float, amsgrad: bool, maximize: bool, grad_scale: Optional[Any] = None,
             found_inf: Optional[Any] = None) -> None:
        _refuse_scaler("Adam", grad_scale, found_inf)
        with torch.no_grad():
            # The fused kernel takes the counts already advanced; the foreach step advances them.
            torch._foreach_sub_(state_steps, 1)
            _multi_tensor_adam(
                params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, None, None,
                amsgrad=amsgrad, has_complex=False, beta1=beta1, beta2=beta2, lr=lr,
                weight_decay=weight_decay, eps=eps, maximize=maximize, capturable=True,
                differentiable=False, decoupled_weight_decay=decoupled,
            )

    return step


lower_raw(aten._fused_adamw_.default, aten._fused_adamw_.tensor_lr)(_adam(decoupled=True))
lower_raw(aten._fused_adam_.default, aten._fused_adam_.tensor_lr)(_adam(decoupled=False))


@lower_raw(aten._fused_sgd_.default, aten._fused_sgd_.tensor_lr)
def fused_sgd(params: List[Any], grads: List[Any], momentum_buffers: List[Any], *, weight_decay: float,
              momentum: float, lr: Any, dampening: float, nesterov: bool, maximize: bool, is_first_step: bool,
              grad_scale: Optional[Any] = None, found_inf: Optional[Any] = None) -> None:
    _refuse_scaler("SGD", grad_scale, found_inf)
    with torch.no_grad():
        # torch's SGD step (`_multi_tensor_sgd`), with the momentum buffers the fused kernel is
        # given already made (`is_first_step`: they take the first gradient).
        if maximize:
            grads = torch._foreach_neg(grads)
        if weight_decay != 0:
            grads = torch._foreach_add(grads, params, alpha=weight_decay)
        if momentum != 0:
            if is_first_step:
                torch._foreach_copy_(momentum_buffers, grads)
            else:
                torch._foreach_mul_(momentum_buffers, momentum)
                torch._foreach_add_(momentum_buffers, grads, alpha=1 - dampening)
            if nesterov:
                grads = torch._foreach_add(grads, momentum_buffers, alpha=momentum)
            else:
                grads = momentum_buffers
        if isinstance(lr, torch.Tensor):
            torch._foreach_add_(params, torch._foreach_mul(grads, -lr))
        else:
            torch._foreach_add_(params, grads, alpha=-lr)


@lower_raw(aten._fused_adagrad_.default, aten._fused_adagrad_.tensor_lr)
def fused_adagrad(params: List[Any], grads: List[Any], state_sums: List[Any], state_steps: List[Any], *, lr: Any,
                  lr_decay: float, weight_decay: float, eps: float, maximize: bool, grad_scale: Optional[Any] = None,
                  found_inf: Optional[Any] = None) -> None:
    _refuse_scaler("Adagrad", grad_scale, found_inf)
    with torch.no_grad():
        # The fused kernel takes the counts already advanced; the foreach step advances them.
        torch._foreach_sub_(state_steps, 1)
        _multi_tensor_adagrad(
            params, grads, state_sums, state_steps, None, None, lr=lr, weight_decay=weight_decay,
            lr_decay=lr_decay, eps=eps, has_sparse_grad=False, maximize=maximize, differentiable=False,
            has_complex=False,
        )
