"""``torch_xla.experimental``: eager mode, and FSDPv2 in ``spmd_fully_sharded_data_parallel``."""

from __future__ import annotations

import contextlib
from typing import Iterator

from .. import _alias, _eager

__getattr__ = _alias.not_provided(__name__, ("spmd_fully_sharded_data_parallel",))


def eager_mode(enable: bool) -> None:
    """Each op runs at once (compiled once per op and shape), outside ``torch_xla.compile``."""
    _eager.set_on(bool(enable))


def is_eager_mode() -> bool:
    return _eager.is_on()


@contextlib.contextmanager
def eager_mode_context(enable: bool) -> Iterator[None]:
    saved = _eager.is_on()
    _eager.set_on(bool(enable))
    try:
        yield
    finally:
        _eager.set_on(saved)
