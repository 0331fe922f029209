"""torch's fused optimizer kernels (``torch._fused_adamw_``, ``_fused_adam_``, ``_fused_sgd_``,
``_fused_adagrad_``) on the device, as the multi-tensor steps torch writes in Python for the same
optimizers; and the two kernels of ``torch.amp.GradScaler``, which mixed-precision training calls
every step.

``AdamW(fused=True)`` and Hugging Face Trainer's default optimizer (``adamw_torch_fused``) call
one fused kernel per step, which torch has for CUDA and the CPU only: without these it ran on
the CPU fallback, every parameter, gradient and moment read to the host and written back each
step (a Trainer run of a tiny GPT-2 spent 58 of its 63 s there). torch's own foreach step is the
same arithmetic in ``torch._foreach_*`` ops, which the bridge lowers, with the step counts kept
on the device (``capturable``): one graph per step, no sync.

A gradient scaler unscales the gradients and notes whether any is not finite
(``_amp_foreach_non_finite_check_and_unscale_``), skips the step if so, and adjusts its scale
(``_amp_update_scale_``); torch has these kernels for CUDA and the CPU only, so each ran on the
CPU fallback, every gradient read to the host. Here they are the CUDA kernels' arithmetic on the
device: the step costs the one value read that ``GradScaler.step`` makes on CUDA too. A fused
step given the scaler's tensors unscales the gradients itself and leaves everything as it was
when one was not finite, as torch's fused kernels do.
"""

from __future__ import annotations

from typing import Any, List, Optional

import torch
from torch.optim.adagrad import _multi_tensor_adagrad
from torch.optim.adam import _multi_tensor_adam

import xlaprof as xp

from .._tensor import assign, value
from .common import aten
from .registry import lower_raw


def _all_finite(x: Any) -> Any:
    """Whether every element of ``x`` is finite, in one reduction: an infinity or a NaN times
    zero is a NaN, which the sum keeps (the sum of ``x`` itself could overflow)."""
    return (x * 0).sum().eq(0)


@lower_raw(aten._amp_foreach_non_finite_check_and_unscale_.default)
def amp_unscale(grads: List[Any], found_inf: Any, inv_scale: Any) -> None:
    """Each gradient times ``inv_scale``; ``found_inf`` set to 1 if any gradient had an element
    that is not finite, else left as it was (CUDA's kernel, which checks before multiplying)."""
    if not grads:
        return
    inv = value(inv_scale)
    finite = None
    for g in grads:
        x = value(g)
        all_finite = _all_finite(x)
        finite = all_finite if finite is None else finite.logical_and(all_finite)
        # In float32 and rounded once, as CUDA's kernel computes a half gradient.
        assign(g, (x.astype("float32") * inv).astype(x.dtype))
    assign(found_inf, xp.where(finite, value(found_inf), 1.0))


@lower_raw(aten._amp_update_scale_.default)
def amp_update_scale(scale: Any, growth_tracker: Any, found_inf: Any, scale_growth_factor: float,
                     scale_backoff_factor: float, growth_interval: int) -> Any:
    """A step with a gradient that was not finite: the scale backs off and the run of good steps
    starts again. Else the run grows, and at ``growth_interval`` good steps in a row the scale
    grows (unless that is not finite) and the run starts again (CUDA's kernel)."""
    s, run, inf = value(scale), value(growth_tracker), value(found_inf) != 0
    good = run + 1
    grown = s * scale_growth_factor
    at_interval = good == growth_interval
    assign(scale, xp.where(inf, s * scale_backoff_factor, xp.where(at_interval & _all_finite(grown), grown, s)))
    assign(growth_tracker, xp.where(inf | at_interval, 0, good))
    return scale


def _scaled_step(grads: List[Any], states: List[Any], grad_scale: Any, found_inf: Any, step: Any) -> None:
    """``step()`` as a fused kernel runs it for a gradient scaler: the gradients divided by
    ``grad_scale`` (written back, as the kernel writes them), and, where ``found_inf`` is set,
    the gradients and every tensor the step writes (``states``) left as they were."""
    before = [value(t) for t in grads + states] if found_inf is not None else []
    if grad_scale is not None:
        scale = value(grad_scale)
        for g in grads:
            x = value(g)
            assign(g, (x.astype("float32") / scale).astype(x.dtype))
    step()
    if found_inf is not None:
        skip = value(found_inf) != 0
        for t, old in zip(grads + states, before):
            assign(t, xp.where(skip, old, value(t)))


def _adam(decoupled: bool) -> Any:
    def step(params: List[Any], grads: List[Any], exp_avgs: List[Any], exp_avg_sqs: List[Any],
             max_exp_avg_sqs: List[Any], state_steps: List[Any], *, lr: Any, beta1: float, beta2: float,
             weight_decay: float, eps: float, amsgrad: bool, maximize: bool, grad_scale: Optional[Any] = None,
             found_inf: Optional[Any] = None) -> None:
        def run() -> None:
            # The fused kernel takes the counts already advanced; the foreach step advances them.
            torch._foreach_sub_(state_steps, 1)
            _multi_tensor_adam(
                params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, None, None,
                amsgrad=amsgrad, has_complex=False, beta1=beta1, beta2=beta2, lr=lr,
                weight_decay=weight_decay, eps=eps, maximize=maximize, capturable=True,
                differentiable=False, decoupled_weight_decay=decoupled,
            )

        with torch.no_grad():
            # (The counts are left advanced: torch takes `found_inf` off them after the kernel.)
            _scaled_step(grads, params + exp_avgs + exp_avg_sqs + list(max_exp_avg_sqs), grad_scale,
                         found_inf, run)

    return step


lower_raw(aten._fused_adamw_.default, aten._fused_adamw_.tensor_lr)(_adam(decoupled=True))
lower_raw(aten._fused_adam_.default, aten._fused_adam_.tensor_lr)(_adam(decoupled=False))


@lower_raw(aten._fused_sgd_.default, aten._fused_sgd_.tensor_lr)
def fused_sgd(params: List[Any], grads: List[Any], momentum_buffers: List[Any], *, weight_decay: float,
              momentum: float, lr: Any, dampening: float, nesterov: bool, maximize: bool, is_first_step: bool,
              grad_scale: Optional[Any] = None, found_inf: Optional[Any] = None) -> None:
    def run() -> None:
        # torch's SGD step (`_multi_tensor_sgd`), with the momentum buffers the fused kernel is
        # given already made (`is_first_step`: they take the first gradient).
        step = grads
        if maximize:
            step = torch._foreach_neg(step)
        if weight_decay != 0:
            step = torch._foreach_add(step, params, alpha=weight_decay)
        if momentum != 0:
            if is_first_step:
                torch._foreach_copy_(momentum_buffers, step)
            else:
                torch._foreach_mul_(momentum_buffers, momentum)
                torch._foreach_add_(momentum_buffers, step, alpha=1 - dampening)
            if nesterov:
                step = torch._foreach_add(step, momentum_buffers, alpha=momentum)
            else:
                step = momentum_buffers
        if isinstance(lr, torch.Tensor):
            torch._foreach_add_(params, torch._foreach_mul(step, -lr))
        else:
            torch._foreach_add_(params, step, alpha=-lr)

    with torch.no_grad():
        _scaled_step(grads, params + list(momentum_buffers), grad_scale, found_inf, run)


@lower_raw(aten._fused_adagrad_.default, aten._fused_adagrad_.tensor_lr)
def fused_adagrad(params: List[Any], grads: List[Any], state_sums: List[Any], state_steps: List[Any], *, lr: Any,
                  lr_decay: float, weight_decay: float, eps: float, maximize: bool, grad_scale: Optional[Any] = None,
                  found_inf: Optional[Any] = None) -> None:
    def run() -> None:
        # The fused kernel takes the counts already advanced; the foreach step advances them.
        torch._foreach_sub_(state_steps, 1)
        _multi_tensor_adagrad(
            params, grads, state_sums, state_steps, None, None, lr=lr, weight_decay=weight_decay,
            lr_decay=lr_decay, eps=eps, has_sparse_grad=False, maximize=maximize, differentiable=False,
            has_complex=False,
        )

    with torch.no_grad():
        # (The counts are left advanced: torch takes `found_inf` off them after the kernel.)
        _scaled_step(grads, params + state_sums, grad_scale, found_inf, run)
