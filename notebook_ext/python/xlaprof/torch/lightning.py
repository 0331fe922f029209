"""Lightning on the xlaprof device: an accelerator, and the step each training batch ends.

    import lightning as L
    from xlaprof.torch.lightning import XlaprofStrategy

    trainer = L.Trainer(strategy=XlaprofStrategy(), max_epochs=2)   # its accelerator: XlaprofAccelerator
    trainer.fit(model, train_loader)

The strategy is Lightning's single-device one on ``xt.device()``: the model and each batch go
there, every op is recorded lazily, each optimizer step and each evaluation batch ends a step
(``xt.step()``): one graph per step, compiled once.
Logging a loss with ``self.log(..., prog_bar=True)`` reads it each step (Lightning's progress bar):
a sync the profiler reports at its line; ``enable_progress_bar=False`` reads it only when it logs.
"""

from __future__ import annotations

from typing import Any, Dict, List, Union

import torch
from lightning.pytorch.accelerators import Accelerator
from lightning.pytorch.strategies import SingleDeviceStrategy

from . import step
from ._device import DEVICE_TYPE, device


class XlaprofAccelerator(Accelerator):  # type: ignore[misc]
    """The xlaprof device as Lightning's accelerator (one device: SPMD's several are one)."""

    def setup_device(self, device: torch.device) -> None:
        if device.type != DEVICE_TYPE:
            raise ValueError(f"XlaprofAccelerator: the device must be {DEVICE_TYPE}, not {device}")

    def teardown(self) -> None:
        pass

    def get_device_stats(self, device: Any) -> Dict[str, Any]:
        return {}

    @staticmethod
    def parse_devices(devices: Union[int, str, List[int]]) -> int:
        if devices not in (1, "1", "auto", [0]):
            raise ValueError(f"XlaprofAccelerator: one device per process, not devices={devices!r}")
        return 1

    @staticmethod
    def get_parallel_devices(devices: Any) -> List[torch.device]:
        return [device()]

    @staticmethod
    def auto_device_count() -> int:
        return 1

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def name() -> str:
        return DEVICE_TYPE


class XlaprofStrategy(SingleDeviceStrategy):  # type: ignore[misc]
    """Lightning's single-device strategy on the xlaprof device: each optimizer step and each
    evaluation batch ends a step (as Lightning's XLA strategy ends one with ``xm.mark_step()``)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("accelerator", XlaprofAccelerator())
        super().__init__(device=device(), **kwargs)

    def optimizer_step(self, *args: Any, **kwargs: Any) -> Any:
        result = super().optimizer_step(*args, **kwargs)
        step()
        return result

    def validation_step(self, *args: Any, **kwargs: Any) -> Any:
        return self._then_step(super().validation_step(*args, **kwargs))

    def test_step(self, *args: Any, **kwargs: Any) -> Any:
        return self._then_step(super().test_step(*args, **kwargs))

    def predict_step(self, *args: Any, **kwargs: Any) -> Any:
        return self._then_step(super().predict_step(*args, **kwargs))

    @staticmethod
    def _then_step(output: Any) -> Any:
        step()
        return output
