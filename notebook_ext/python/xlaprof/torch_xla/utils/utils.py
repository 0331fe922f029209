"""``torch_xla.utils.utils`` (``xu``): the fake-data loader of PyTorch/XLA's examples and the
environment helpers its scripts call."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator

from .. import _alias

__getattr__ = _alias.not_provided(__name__)


class SampleGenerator:
    """Yields ``data`` ``sample_count`` times: a loader of fake batches."""

    def __init__(self, data: Any, sample_count: int) -> None:
        self._data = data
        self._count = sample_count

    def __iter__(self) -> Iterator[Any]:
        for _ in range(self._count):
            yield self._data

    def __len__(self) -> int:
        return self._count


def getenv_as(name: str, to_type: Callable[[str], Any], defval: Any = None) -> Any:
    value = os.environ.get(name)
    if value is None:
        return defval
    if to_type is bool:
        return value.lower() not in ("", "0", "false", "no")
    return to_type(value)


def check_env_flag(name: str, default: str = "") -> bool:
    return os.environ.get(name, default).upper() in ("ON", "1", "YES", "TRUE", "Y")
