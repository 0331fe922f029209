"""``torch_xla.debug.profiler``: PyTorch/XLA's profiling calls, writing xlaprof profiles.

No server is needed: ``start_server`` says where the profiles go. ``trace`` and
``trace_detached`` record the engine for ``duration_ms`` into a profile file in ``logdir``
(``xlaprof view FILE``, ``xlaprof gui FILE``, ``xp.load(FILE)`` in a notebook); ``Trace`` and
``StepTrace`` are the profile's named regions and steps, ``trace_me`` a function's.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import threading
import time
from typing import Any, Callable, Optional

from xlaprof import _native

from .. import _alias, _metrics, _target

__getattr__ = _alias.not_provided(__name__)


class ProfilerServer:
    def __init__(self, port: int) -> None:
        self.port = port


def start_server(port: int, only_on_master: bool = True) -> ProfilerServer:
    """Nothing to serve: profiles are files. Says so, and returns a handle."""
    print(f"xlaprof: no profiler server is needed (port {port} is not opened): torch_xla.debug."
          "profiler.trace writes an xlaprof profile into its logdir, and XLAPROF_PROFILE=FILE "
          "records the whole program (xlaprof run --torch-xla -- python ... follows it live)",
          file=sys.stderr)
    return ProfilerServer(port)


def _profile_path(logdir: str) -> str:
    os.makedirs(logdir, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join(logdir, f"xlaprof-{stamp}-{os.getpid()}.xlaprof")


def trace(service_addr: str, logdir: str, duration_ms: int = 1000, num_tracing_attempts: int = 3,
          host_tracer_level: int = 2, device_tracer_level: int = 1, delay_ms: int = 0, **kwargs: Any) -> str:
    """Records the engine for ``duration_ms`` (after ``delay_ms``) into a profile in ``logdir``;
    returns its path. Blocks for that long: call it from a thread, or use ``trace_detached``."""
    if delay_ms:
        time.sleep(delay_ms / 1e3)
    path = _profile_path(logdir)
    whole = _metrics.path()
    if whole is not None:
        # The program is recorded whole already (one recording per process): the trace is
        # that profile as it stands at the window's end.
        time.sleep(duration_ms / 1e3)
        shutil.copyfile(whole, path)
        print(f"xlaprof: the profile of the program up to now (a trace of {duration_ms} ms was asked "
              f"for) is {path} (xlaprof view {path})", file=sys.stderr)
        return path
    recording = _native._Recording()
    time.sleep(duration_ms / 1e3)
    recording.stop().save(path)
    print(f"xlaprof: the profile of {duration_ms} ms is {path} (xlaprof view {path})", file=sys.stderr)
    return path


def trace_detached(service_addr: str, logdir: str, duration_ms: int = 1000, num_tracing_attempts: int = 3,
                   host_tracer_level: int = 2, device_tracer_level: int = 1, delay_ms: int = 0,
                   **kwargs: Any) -> threading.Thread:
    """``trace`` on a thread of its own: the program goes on while it records."""
    thread = threading.Thread(target=trace, args=(service_addr, logdir),
                              kwargs=dict(duration_ms=duration_ms, delay_ms=delay_ms),
                              name="xlaprof-trace", daemon=True)
    thread.start()
    return thread


_started: Optional[Any] = None
_started_dir = ""


def start_trace(log_dir: str) -> None:
    """Records the engine until ``stop_trace()`` (under the runner, which records the whole
    program, the trace is that profile as it stands then)."""
    global _started, _started_dir
    if _started is not None:
        raise RuntimeError("start_trace: a trace is recording already (stop_trace ends it)")
    _started, _started_dir = _metrics.path() or _native._Recording(), log_dir


def stop_trace() -> str:
    """Ends ``start_trace``'s recording; returns the profile's path."""
    global _started
    if _started is None:
        raise RuntimeError("stop_trace: no trace was started (start_trace)")
    recording, _started = _started, None
    path = _profile_path(_started_dir)
    if isinstance(recording, str):
        shutil.copyfile(recording, path)
    else:
        recording.stop().save(path)
    return path


class Trace:
    """A named region of the profile: ``with xp.Trace("forward"):``."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        self.name = name
        self._scope: Any = None

    def __enter__(self) -> "Trace":
        self._scope = _target.current().scope(self.name)
        self._scope.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._scope.__exit__(*exc)


class StepTrace(Trace):
    """A training step: a named region that ends the step (a sync, then the step closures)."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        if exc[0] is None:
            _target.step()


def trace_me(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A function's every call as a named region."""
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def traced(*args: Any, **kwargs: Any) -> Any:
            with Trace(name):
                return fn(*args, **kwargs)

        return traced

    return decorate
