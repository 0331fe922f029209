"""``torch_xla.debug.metrics`` (``met``): PyTorch/XLA's metrics and counters, from xlaprof's
profile of the process (CompileTime, ExecuteTime, TransferToDeviceTime, ...; CachedCompile,
UncachedCompile, MarkStep, ...; ``aten::op`` for each op run on the CPU), in PyTorch/XLA's text.
A metric keeps its count, sum and percentiles, not its samples: ``metric_data`` gives no samples.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from .. import _alias, _metrics

__getattr__ = _alias.not_provided(__name__)


def metrics_report() -> str:
    return _metrics.report()


def short_metrics_report(counter_names: Optional[List[str]] = None, metric_names: Optional[List[str]] = None) -> str:
    counter_names = counter_names or ["CachedCompile", "MarkStep"]
    metric_names = metric_names or ["CompileTime", "ExecuteTime", "TransferToDeviceTime", "TransferFromDeviceTime"]
    return _metrics.report(counter_names, metric_names)


def counter_names() -> List[str]:
    return [c["name"] for c in _metrics.data()["counters"] if c["value"]]


def counter_value(name: str) -> Optional[int]:
    """The counter's value, or None when it never counted (as in PyTorch/XLA)."""
    found = [c["value"] for c in _metrics.data()["counters"] if c["name"] == name and c["value"]]
    return found[0] if found else None


def metric_names() -> List[str]:
    return [m["name"] for m in _metrics.data()["metrics"] if m["count"]]


def metric_data(name: str) -> Optional[Tuple[int, float, List[Any]]]:
    """``(total samples, accumulator, samples)`` (no samples: see the module's docstring), or
    None when the metric has none."""
    found = [m for m in _metrics.data()["metrics"] if m["name"] == name and m["count"]]
    return (found[0]["count"], found[0]["total"], []) if found else None


def executed_fallback_ops() -> List[str]:
    return _metrics.fallback_ops()


def clear_all() -> None:
    """Metrics and counters start again from now."""
    _metrics.clear()


def clear_counters() -> None:
    clear_all()


def clear_metrics() -> None:
    clear_all()
