"""The IPython extension: ``%xla_profile STATEMENT`` and ``%%xla_profile`` cells.

Options: ``--steps N`` (run the code N times, a training step after each), ``--out FILE`` (save
the profile file), ``--rules R1,R2`` (check rules such as ``no-compiles-after-step=2``),
``--no-widget`` (text only). Returns the profile; it renders under the cell as the widget.
"""

from __future__ import annotations

import linecache
import os
import time
from typing import Any, Optional

from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

from . import _native, _progress
from ._api import step
from ._profile import Profile

#: How often the progress line is redrawn at most (seconds).
PROGRESS_INTERVAL_S = 0.25


def name_cells(ip: Any) -> None:
    """Names cells as IPython does in tracebacks (``In[5]``) in every location."""
    compiler = getattr(ip, "compile", None)

    def namer(path: str) -> str:
        # A cell is in no file: its text, from IPython's line cache, lets the profiler name a
        # graph input by the variable its line assigns.
        if not os.path.exists(path):
            lines = linecache.getlines(path)
            if lines:
                _native.remember_source(path, "".join(lines))
        formatted = None
        fmt = getattr(compiler, "format_code_name", None)
        if fmt is not None:
            try:
                formatted = fmt(path)
            except Exception:  # a compiler that does not know the name
                formatted = None
        if formatted:
            return str(formatted[1])
        return os.path.basename(path)

    _native.set_file_namer(namer)


class _LiveProgress:
    """A display that follows the cell while it runs: the interactive view of the profile so far
    (steps, compiles and findings appear as they happen), or, without anywidget, a line of
    steps, syncs and compiles."""

    def __init__(self, profile: Profile) -> None:
        self.start = time.perf_counter()
        self.base = _native.counters()
        self.steps = 0
        self.last_draw = 0.0
        self.view: Optional[Any] = None
        try:
            self.view = profile.view()
            self.view.live = True
        except ImportError:
            self.view = None
        self.handle = display(self._bundle(), raw=True, display_id=True)

    def _bundle(self) -> dict:
        c = _native.counters()
        syncs, compiles = c["syncs"] - self.base["syncs"], c["compiles"] - self.base["compiles"]
        elapsed = time.perf_counter() - self.start
        line = f"xlaprof: running... {self.steps} steps, {syncs} syncs, {compiles} compiles, {elapsed:.1f} s"
        if self.view is not None:
            data = self.view._repr_mimebundle_()
            data = dict(data[0] if isinstance(data, tuple) else data)
            data["text/plain"] = line
            return data
        return {"text/html": _native.progress_html(self.steps, syncs, compiles, elapsed), "text/plain": line}

    def __call__(self, event: str) -> None:
        if event == "step":
            self.steps += 1
        if self.view is not None:  # the view updates itself; its display stays
            self.view.refresh_live()
            return
        now = time.perf_counter()
        if now - self.last_draw >= PROGRESS_INTERVAL_S:
            self.last_draw = now
            if self.handle is not None:
                self.handle.update(self._bundle(), raw=True)

    def finish(self, profile: Profile) -> None:
        if self.handle is None:
            return
        done = (
            f"xlaprof: done in {time.perf_counter() - self.start:.2f} s: {profile.steps} steps, "
            f"{profile.syncs} syncs, {profile.compiles} compiles"
        )
        html = f'<div style="font-family:monospace">{done}</div>'
        # The finished profile is the cell's result, shown below: the live view gives way to
        # the counts.
        self.handle.update({"text/html": html, "text/plain": done}, raw=True)
        if self.view is not None:
            self.view.close()


@magics_class
class XlaProfileMagics(Magics):
    @line_cell_magic
    def xla_profile(self, line: str, cell: Optional[str] = None) -> Profile:
        """Profile a statement or a cell with xlaprof.

        %xla_profile [--steps N] [--out FILE] [--rules R1,R2] [--no-widget] STATEMENT
        %%xla_profile [--steps N] [--out FILE] [--rules R1,R2] [--no-widget]
        """
        opts, statement = self.parse_options(
            line, "", "steps=", "out=", "rules=", "no-widget", posix=False, strict=False,
            preserve_non_opts=True,
        )
        source = cell if cell is not None else statement
        if not source.strip():
            raise ValueError("%xla_profile needs a statement (or use %%xla_profile on a cell)")
        steps = _steps(opts.get("steps", 0))
        rules = [r.strip() for r in str(opts.get("rules", "")).split(",") if r.strip()]
        widget = "no-widget" not in opts
        ip = self.shell
        # IPython counts the running cell before it runs: this cell is the previous number.
        number = max(ip.execution_count - 1, 0)
        title = f"{'%%' if cell is not None else '%'}xla_profile: In[{number}]"
        profile = Profile(title=title, rules=rules)
        profile.widget = widget
        _native.validate_rules(rules)  # a malformed rule fails before anything runs
        # A cell's body starts on the cell's second line (the first is the magic): a blank first
        # line keeps the line numbers in diagnostics equal to the cell's.
        code = _compile(ip, source, number, first_line=2 if cell is not None else 1)
        progress: Optional[_LiveProgress] = None
        failure: Optional[BaseException] = None
        try:
            with profile:
                if widget:
                    progress = _LiveProgress(profile)
                    _progress.add(progress)
                for _ in range(max(steps, 1)):
                    exec(code, ip.user_ns)
                    if steps:
                        step()
        except BaseException as e:  # shown with the profile of what ran, then raised
            failure = e
        finally:
            if progress is not None:
                _progress.remove(progress)
                progress.finish(profile)
        if "out" in opts:
            profile.save(str(opts["out"]))
        profile.show_static_twin()
        if failure is not None:
            display(profile)
            raise failure
        return profile


def _steps(value: Any) -> int:
    """``--steps N``: how many times to run the code (0: once, with no step marked)."""
    try:
        steps = int(value or 0)
    except ValueError:
        raise ValueError(f"--steps needs a whole number, not {value!r}") from None
    if steps < 0:
        raise ValueError(f"--steps needs 0 or more, not {steps}")
    return steps


def _compile(ip: Any, source: str, number: int, first_line: int) -> Any:
    """Compiles the code under IPython's name for this cell, so its lines can be shown, with
    its first line numbered `first_line`."""
    transformed = "\n" * (first_line - 1) + ip.transform_cell(source)
    try:
        filename = ip.compile.cache(transformed, number, raw_code=source)
    except Exception:  # an IPython without the cache: the code still runs
        filename = "<xla_profile>"
    return compile(transformed, filename, "exec")


def load(ip: Any) -> None:
    ip.register_magics(XlaProfileMagics)
    name_cells(ip)
