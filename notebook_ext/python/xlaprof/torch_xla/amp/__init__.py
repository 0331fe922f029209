"""``torch_xla.amp``: mixed precision on the device.

``autocast(device)`` is ``torch.autocast`` on the xlaprof device (bfloat16 unless asked
otherwise, as on TPUs; xlaprof runs it on every plugin, where PyTorch/XLA ignored it off TPUs), or
on the CPU for the reference run, with the device's casting rules. ``GradScaler`` is torch's, on the device; with the optimizers
of ``syncfree`` a step whose gradients overflowed is skipped on the device, with no read of the
overflow flag (torch's scaler reads it with ``.item()``: a sync every step).
"""

from __future__ import annotations

from typing import Any, List, Optional

import torch

from xlaprof.torch import _autocast

from .. import _alias, _target

__getattr__ = _alias.not_provided(__name__, ("syncfree",))


class autocast(torch.amp.autocast_mode.autocast):
    """``torch.autocast`` on the device: ``with autocast(torch_xla.device()):``."""

    def __init__(self, device: Any = None, enabled: bool = True, dtype: Optional[torch.dtype] = None,
                 cache_enabled: bool = True) -> None:
        if _target.current().reference:
            _cast_on_the_cpu_as_on_the_device()
        super().__init__(_target.current().autocast_device_type, enabled=enabled,
                         dtype=dtype if dtype is not None else torch.bfloat16, cache_enabled=cache_enabled)


def take_xla_autocast() -> None:
    """``torch.autocast("xla", ...)``, as PyTorch/XLA's own docs write it, is autocast on the
    device (on the reference run, the CPU), bfloat16 unless asked otherwise: torch knows no
    ``xla`` device here, and its autocast would change nothing, silently. Installed with the
    layer, in its process only."""
    cls = torch.amp.autocast_mode.autocast
    if getattr(cls.__init__, "_xlaprof", False):
        return
    original = cls.__init__

    def __init__(self: Any, device_type: str, dtype: Optional[torch.dtype] = None, *args: Any, **kwargs: Any) -> None:
        if device_type == "xla":
            if _target.current().reference:
                _cast_on_the_cpu_as_on_the_device()
            device_type = _target.current().autocast_device_type
            dtype = dtype if dtype is not None else torch.bfloat16
        original(self, device_type, dtype, *args, **kwargs)

    __init__._xlaprof = True  # type: ignore[attr-defined]
    cls.__init__ = __init__


_cpu_rules: List[Any] = []


def _cast_on_the_cpu_as_on_the_device() -> None:
    """The reference run's autocast casts as the device's does: torch's lists for CUDA, which
    the device follows, in place of the CPU's own (which keep softmax, for one, in bfloat16).
    Registered once, in the reference run's process only."""
    if not _cpu_rules:
        lib = torch.library.Library("aten", "IMPL")
        _cpu_rules.append((lib, _autocast.register(lib, key="AutocastCPU", device_type="cpu")))


class GradScaler(torch.amp.GradScaler):
    """torch's gradient scaler on the device."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True,
                 **kwargs: Any) -> None:
        unknown = set(kwargs) - {"use_zero_grad"}
        if unknown:
            raise TypeError(f"GradScaler got unexpected arguments {sorted(unknown)}")
        super().__init__(_target.current().autocast_device_type, init_scale=init_scale,
                         growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)
