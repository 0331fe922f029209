"""The process's metrics, as PyTorch/XLA keeps them from the start: the runner records the whole
program (``XLAPROF_PROFILE``, or a temporary file of its own), and ``torch_xla.debug.metrics``
and ``_XLAC._xla_metrics_report()`` read that recording's metrics; ``clear_all()`` has them
start again from then on. Where no recording holds the whole program (``install()`` in a
notebook), they are those of the ``xp.profile()`` recording now, else the engine's counters by
PyTorch/XLA's names. The reference run records nothing: its device is the CPU.
"""

from __future__ import annotations

import atexit
import os
import tempfile
from typing import Any, Dict, List, Optional

import xlaprof as xp
import xlaprof.torch as xt
from xlaprof import _native, _profile

# The whole program's profile file, and where the metrics start (its clock), with the CPU
# fallbacks counted by then.
_path: Optional[str] = None
_since_ns = 0
_fallbacks_before: Dict[str, Any] = {}
_counters_before: Dict[str, int] = {}

# The engine's counters by PyTorch/XLA's names, where no profile has the metrics.
COUNTER_NAMES = {"cache_hits": "CachedCompile", "compiles": "UncachedCompile", "syncs": "Sync",
                 "executions": "ExecuteGraph", "value_reads": "DeviceToHostRead",
                 "tensors_created": "CreateTensor", "tensors_destroyed": "DestroyTensor",
                 "ops_traced": "OpsTraced"}


def record_whole_program(path: Optional[str]) -> Optional[str]:
    """Records the program into ``path``, or a temporary file removed at exit; returns the file
    kept, if any (in a job of several processes, each rank's is beside ``path``:
    ``run.rank1.xlaprof``). The program's own subprocesses (a data loader's spawned workers)
    are not told of it: they would write over it."""
    global _path
    if not path:
        fd, temporary = tempfile.mkstemp(prefix="xlaprof-", suffix=".xlaprof")
        os.close(fd)
        atexit.register(os.unlink, temporary)
    os.environ["XLAPROF_PROFILE"] = path or temporary
    try:
        xp._record_whole_program()
    finally:
        del os.environ["XLAPROF_PROFILE"]
    _path = _native.whole_program_file()
    return _path if path else None


def path() -> Optional[str]:
    return _path


def clear() -> None:
    """Metrics and counters start again from now."""
    global _since_ns, _fallbacks_before, _counters_before
    m = _native.whole_program_metrics(0)
    _since_ns = m["end_ns"] if m is not None else 0
    _fallbacks_before = xt.fallbacks()
    _counters_before = xp.counters()


def data() -> Dict[str, Any]:
    """``{"metrics": [...], "counters": [...]}``, the profiler's, with a counter per op that ran
    on the CPU for want of a lowering (``aten::name``, as PyTorch/XLA counts them)."""
    out = _native.whole_program_metrics(_since_ns)
    if out is None:  # the layer outside the runner, with no profile of the whole program
        out = _without_the_whole_program()
    for name, (calls, _seconds) in sorted(xt.fallbacks().items()):
        calls -= _fallbacks_before.get(name, (0, 0.0))[0]
        if calls:
            out["counters"].append({"name": fallback_counter(name), "value": calls})
    return out


def _without_the_whole_program() -> Dict[str, Any]:
    recording = _profile._active
    if recording is not None:
        return dict(recording.metrics())
    now = xp.counters()
    return {"metrics": [], "counters": [{"name": theirs, "value": now[ours] - _counters_before.get(ours, 0)}
                                        for ours, theirs in COUNTER_NAMES.items()]}


def fallback_counter(op: str) -> str:
    """``aten.nonzero.default`` as PyTorch/XLA names its counter: ``aten::nonzero``."""
    parts = op.split(".")
    return f"aten::{parts[1] if len(parts) > 1 and parts[0] == 'aten' else op}"


def fallback_ops() -> List[str]:
    return [c["name"] for c in data()["counters"] if c["name"].startswith("aten::")]


# PyTorch/XLA's way of writing a duration: 01m03s028ms571.841us, 001ms228.773us.
def duration(ns: float) -> str:
    ns = int(round(ns))
    minutes, ns = divmod(ns, 60_000_000_000)
    seconds, ns = divmod(ns, 1_000_000_000)
    ms, ns = divmod(ns, 1_000_000)
    text = f"{minutes:02d}m" if minutes else ""
    if minutes or seconds:
        text += f"{seconds:02d}s"
    return text + f"{ms:03d}ms{ns / 1000:07.3f}us"


def size(b: float) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if b >= scale:
            return f"{b / scale:.2f}{unit}"
    return f"{b:.0f}B"


def value(unit: str, v: float) -> str:
    return duration(v) if unit == "Nanoseconds" else size(v) if unit == "Bytes" else f"{v:.0f}"


def report(counter_names: Optional[List[str]] = None, metric_names: Optional[List[str]] = None) -> str:
    """PyTorch/XLA's metrics report text (only the names given, where given)."""
    d = data()
    lines: List[str] = []
    for m in d["metrics"]:
        if not m["count"] or metric_names is not None and m["name"] not in metric_names:
            continue
        unit = m["unit"]
        lines.append(f"Metric: {m['name']}")
        lines.append(f"  TotalSamples: {m['count']}")
        lines.append(f"  Accumulator: {value(unit, m['total'])}")
        if unit != "Count" and m["rate_per_s"]:
            lines.append(f"  ValueRate: {value(unit, m['total'] * m['rate_per_s'] / m['count'])} / second")
        lines.append(f"  Rate: {m['rate_per_s']:.6g} / second")
        percentiles = "; ".join(f"{p}%={value(unit, v)}" for p, v in m["percentiles"])
        lines.append(f"  Percentiles: {percentiles}")
    for c in d["counters"]:
        if counter_names is not None and c["name"] not in counter_names:
            continue
        if c["value"]:
            lines.append(f"Counter: {c['name']}")
            lines.append(f"  Value: {c['value']}")
    return "\n".join(lines) + "\n" if lines else ""
