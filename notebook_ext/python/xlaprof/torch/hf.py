"""Hugging Face ``Trainer`` on the xlaprof device.

    import os
    os.environ["ACCELERATE_TORCH_DEVICE"] = "xlaprof:0"   # accelerate's own switch: the device
    import xlaprof.torch                                  # registers it, before the Trainer starts
    from xlaprof.torch.hf import StepCallback

    args = TrainingArguments(..., logging_nan_inf_filter=False)
    Trainer(model, args, train_dataset=ds, callbacks=[StepCallback()]).train()

The Trainer moves the model and each batch to accelerate's device, which ``ACCELERATE_TORCH_DEVICE``
names. ``StepCallback`` ends each step's graph (``xt.step()``), as the Trainer does itself on
PyTorch/XLA with ``xm.mark_step()``. ``logging_nan_inf_filter=False`` keeps the Trainer from
reading every step's loss to check it for NaN (a sync in the middle of each step; the profiler
reports it as a hidden sync at the Trainer's line otherwise).
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from .. import _native


class StepCallback(TrainerCallback):  # type: ignore[misc]
    """Ends the graph after each micro-batch and each optimizer step, and after each evaluation
    batch: one graph per step, compiled once."""

    def on_substep_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        _native.step()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        _native.step()

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        _native.step()
