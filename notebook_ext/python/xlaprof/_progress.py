"""Live progress: listeners told after every step and sync made from Python (the notebook magic
updates its display with them, on the thread that runs the cell)."""

from __future__ import annotations

from typing import Callable, List

_listeners: List[Callable[[str], None]] = []


def add(listener: Callable[[str], None]) -> None:
    _listeners.append(listener)


def remove(listener: Callable[[str], None]) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def notify(event: str) -> None:
    for listener in list(_listeners):
        listener(event)
