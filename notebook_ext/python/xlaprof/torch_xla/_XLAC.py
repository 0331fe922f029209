"""``torch_xla._XLAC``: the private names PyTorch/XLA's own examples call."""

from __future__ import annotations

from typing import List

from . import _alias, _metrics

__getattr__ = _alias.not_provided(__name__)


def _xla_metrics_report() -> str:
    return _metrics.report()


def _short_xla_metrics_report(counter_names: List[str], metric_names: List[str]) -> str:
    return _metrics.report(counter_names, metric_names)


def _get_executed_fallback_ops() -> List[str]:
    return _metrics.fallback_ops()
