"""Devices, named as PyTorch names them.

xlaprof runs every tensor on one device: the one its PJRT plugin drives (``XLAPROF_DEVICE``:
``cpu``, the default, or ``cuda``). ``device=`` arguments and ``.to(device)`` accept that
device's name, ``"xla"`` (PyTorch/XLA's name for it) and ``"cpu"``, with an optional index
(``"cuda:0"``); each names that one device, except that ``.to("cpu")`` and ``.cpu()`` also
compute the tensor, so that the host can read it without running anything more.
"""

from __future__ import annotations

import os
from typing import Any, Optional, Union

_TYPES = ("cpu", "cuda", "xla")


def _engine_type() -> str:
    value = os.environ.get("XLAPROF_DEVICE", "").strip().lower()
    return value or "cpu"


class device:
    """A device, as ``torch.device``: ``xp.device("cpu")``, ``xp.device("cuda", 0)``,
    ``xp.device("xla:0")``. Equal to its name: ``t.device == "cpu"``."""

    __slots__ = ("type", "index")

    def __init__(self, type: Union[str, "device"], index: Optional[int] = None) -> None:
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        if not isinstance(type, str):
            raise TypeError(f"a device is named by a string, not {builtin_type(type).__name__}")
        name = type.strip().lower()
        if ":" in name:
            if index is not None:
                raise ValueError(f"device {type!r} has an index already")
            name, _, number = name.partition(":")
            if not number.isdigit():
                raise ValueError(f"invalid device {type!r}: the index must be a number")
            index = int(number)
        if name not in _TYPES:
            raise ValueError(
                f"unknown device {type!r}; xlaprof's devices are 'cpu', 'cuda' and 'xla' "
                f"(this process runs on {_engine_type()!r})"
            )
        if index is not None and (not isinstance(index, int) or index < 0):
            raise ValueError(f"a device index is an int >= 0, not {index!r}")
        if name == "cuda" and _engine_type() != "cuda":
            raise ValueError(
                f"device {type!r} is not available: this process runs on "
                f"{_engine_type()!r} (XLAPROF_DEVICE=cuda runs on a CUDA plugin)"
            )
        object.__setattr__(self, "type", name)
        object.__setattr__(self, "index", index)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("devices are immutable")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except (ValueError, TypeError):
                return False
        if not isinstance(other, device):
            return NotImplemented
        return (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type={self.type!r})"
        return f"device(type={self.type!r}, index={self.index})"

    def __reduce__(self) -> Any:
        return (device, (self.type, self.index))


builtin_type = type


def engine_device() -> device:
    """The device every tensor is on (``Tensor.device``)."""
    return device(_engine_type())


def engine_device_at(index: int) -> device:
    """The engine's device number ``index`` (``xp.devices()``)."""
    return device(_engine_type(), index)


def resolve(value: Any, strict: bool = True) -> Optional[str]:
    """The type of the device ``value`` names (``"cpu"``, ``"cuda"``, ``"xla"``), or None when
    ``value`` is not a device; a device name this process has no device for raises ValueError.
    Unless ``strict``, a string that does not start with a device's name is not a device (it
    may be a dtype: ``t.to("float64")``)."""
    if isinstance(value, device):
        return value.type
    if isinstance(value, str) and (strict or value.strip().lower().partition(":")[0] in _TYPES):
        return device(value).type
    if isinstance(value, int) and not isinstance(value, bool):
        # torch reads a bare int as a CUDA ordinal.
        return device("cuda", value).type
    return None
