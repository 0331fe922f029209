"""`xp.profile()`: record what the engine does while a block runs, then read the answers."""

from __future__ import annotations

import io
import linecache
import sys
from typing import Any, Dict, List, Optional, Sequence

from . import _native

_active: Optional["Profile"] = None
_last: Optional["Profile"] = None


class Profile:
    """A profile: recording inside ``with xp.profile() as p:``, finished after it.

    Its answers (``report``, ``diagnostics``, ``to_polars``, the notebook widget) are the
    profiler's analysis; while the block runs they describe the profile so far.
    """

    def __init__(self, title: str = "", rules: Sequence[str] = ()) -> None:
        self.title = title
        self.rules = list(rules)
        self.widget = True
        # The static page was shown on its own, beside the interactive view (`show_static_twin`).
        self._twin_shown = False
        self._recording: Optional[Any] = None
        self._native: Optional[Any] = None

    # ---- recording ----
    def __enter__(self) -> "Profile":
        global _active
        if self._native is not None or self._recording is not None:
            raise RuntimeError("a profile records once; make a new one with xp.profile()")
        self._recording = _native._Recording()
        _active = self
        if "torch" in sys.modules:
            from . import _distributed, _torch_compile

            _torch_compile.install()
            _distributed.install()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        global _active, _last
        if self._recording is not None:
            self._native = self._recording.stop()
            self._recording = None
        if _active is self:
            _active = None
        _last = self

    def step(self) -> None:
        """Ends a training step (same as ``xp.step()``)."""
        from . import step

        step()

    @property
    def recording(self) -> bool:
        return self._recording is not None

    def _data(self) -> Any:
        if self._native is not None:
            return self._native
        if self._recording is not None:
            return self._recording.snapshot()
        raise RuntimeError("this profile has not recorded anything yet: use `with xp.profile() as p:`")

    # ---- answers ----
    def report(self, short: bool = False) -> str:
        return self._data().report(short)

    def metrics_report(self) -> str:
        return self._data().metrics_report()

    def summary(self) -> Dict[str, Any]:
        return self._data().summary()

    def diagnostics(self) -> List[Dict[str, Any]]:
        """Findings, most costly first: kind, message, location, cost_ns, count, advice, ..."""
        return self._data().diagnostics()

    def metrics(self) -> Dict[str, Any]:
        return self._data().metrics()

    def lines(self) -> List[Dict[str, Any]]:
        """The line profiler: each source line the engine did something for, by file and line,
        with the ops it recorded (``ops``: graph nodes; ``calls``: calls into the engine, torch
        ops included), the host time recording them took (``trace_ns``), the graph inputs it made,
        the syncs it forced and their compiles, values read, bytes moved and CPU fallbacks."""
        return self._data().lines()

    def check(self, *rules: str) -> List[Dict[str, Any]]:
        """Evaluates rules such as ``"max-compiles=1"`` or ``"no-compiles-after-step=2"``."""
        return self._data().check(list(rules))

    def assert_rules(self, *rules: str) -> None:
        failed = [o["message"] for o in self.check(*rules) if not o["passed"]]
        if failed:
            raise AssertionError("; ".join(failed))

    def assert_max_compiles(self, n: int, after_step: int = 0) -> None:
        """Fails when more than ``n`` compiles happened in the steps after ``after_step``."""
        late = self._data().compiles_after(after_step)
        if len(late) > n:
            where = ", ".join(f"step {s} at {loc} (graph {g})" for s, loc, g in late[:5])
            raise AssertionError(
                f"{len(late)} compiles after step {after_step} (at most {n} allowed): {where}"
            )

    @property
    def steps(self) -> int:
        return self._data().steps

    @property
    def compiles(self) -> int:
        return self._data().compiles

    @property
    def syncs(self) -> int:
        return self._data().syncs

    def to_polars(self, table: Optional[str] = None) -> Any:
        """The profile's tables as polars DataFrames: a dict of all (spans, graphs, compiles,
        executions, diagnostics), or the one named."""
        import polars as pl

        raw = self._data().tables_parquet()
        if table is not None:
            if table not in raw:
                raise KeyError(f"no table {table!r}; the tables are {sorted(raw)}")
            return pl.read_parquet(io.BytesIO(raw[table]))
        return {name: pl.read_parquet(io.BytesIO(data)) for name, data in raw.items()}

    def save(self, path: str) -> None:
        """Writes the profile file (open it with ``xp.load`` or the ``xlaprof`` command line)."""
        self._data().save(str(path))

    def export(self, path: str, format: str = "json") -> None:
        """Exports as text, short, json, csv, parquet, chrome, folded or flamegraph."""
        self._data().export(str(path), format)

    # ---- display ----
    def source_lines(self) -> Dict[int, str]:
        """The text of each located line, by location id (where the source is known here)."""
        files = _native.source_files()
        lines: Dict[int, str] = {}
        for i, (file, line, _function) in enumerate(self._data().locations()):
            path = files.get(file)
            if path is None:
                continue
            text = linecache.getline(path, line)
            if text.strip():
                lines[i] = text.rstrip("\n")
        return lines

    def html(self) -> str:
        return self._data().render_html(self.title, self.source_lines(), self.rules)

    def _repr_html_(self) -> Optional[str]:
        if not self.widget or self._twin_shown:
            return None
        return self.html()

    def show_static_twin(self) -> None:
        """Shows the static page as an output of its own, which the interactive view hides
        where it runs (its stylesheet): a notebook exported with its widget state (nbclient,
        papermill) still has the page, and the view is the one interactive output."""
        if not self.widget or not _in_kernel():
            return
        from IPython.display import display

        display({"text/html": f'<div class="xlaprof-static-twin">{self.html()}</div>'}, raw=True)
        self._twin_shown = True

    def view(self) -> Any:
        """The interactive view (a notebook widget: zoom and pan the timeline, open a finding's
        graphs); needs ``anywidget`` (``pip install xlaprof[notebook]``)."""
        from ._widget import ProfileWidget

        return ProfileWidget(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Optional[Dict[str, Any]]:
        """In a notebook kernel, the interactive view, with the static page beside it for
        wherever widgets do not run (nbconvert's HTML, GitHub); else nothing (the static page and
        the text come from ``_repr_html_`` and ``__repr__``)."""
        if not self.widget or not _in_kernel():
            return None
        try:
            bundle = self.view()._repr_mimebundle_()
        except ImportError:  # no anywidget: the static page alone
            return None
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if not self._twin_shown:
            data["text/html"] = self.html()
        data["text/plain"] = self.report(short=True)
        return data

    def __repr__(self) -> str:
        if self._native is None and self._recording is None:
            return "<xlaprof.Profile (not started)>"
        text = self.report(short=True)
        if self.rules:
            for o in self.check(*self.rules):
                text += f"\nrule {'passed' if o['passed'] else 'FAILED'}: {o['message']}"
        return text


def _in_kernel() -> bool:
    """Whether this runs in a Jupyter kernel (where a widget has a front end to talk to)."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def recording() -> bool:
    """Whether a ``with xp.profile()`` block records now."""
    return _active is not None


def profile(title: str = "", rules: Sequence[str] = ()) -> Profile:
    """Records the engine while a ``with`` block runs: ``with xp.profile() as p: ...``."""
    return Profile(title=title, rules=rules)


def compare(a: Profile, b: Profile) -> Any:
    """Two profiles side by side in a notebook (what ``xlaprof diff A B`` prints, then each
    profile's interactive view); needs ``anywidget``."""
    from ._widget import CompareWidget

    return CompareWidget(a, b)


def load(path: str) -> Profile:
    """Opens a profile file (recorded by Python, ``XLAPROF_PROFILE`` or the command line)."""
    p = Profile(title=str(path))
    p._native = _native.load(str(path))
    return p


class Job:
    """A job of several processes (torchrun's ranks), read from its ranks' profiles as one."""

    def __init__(self, path: str) -> None:
        data = _native.load_job(str(path))
        self.path = str(path)
        self.files: List[str] = [str(f) for f in data["files"]]
        self.findings: List[Dict[str, Any]] = data["findings"]
        self.ranks: List[Dict[str, Any]] = data["ranks"]
        self.collectives_in_common: int = data["matched"]
        self._report: str = data["report"]

    def report(self) -> str:
        """The job's text report: its ranks, what only they side by side show (the straggler,
        a diverging rank, a rank stuck in a collective), then each rank's own report."""
        return self._report

    def profiles(self) -> List[Profile]:
        """Each rank's profile, in rank order."""
        return [load(f) for f in self.files]

    def view(self, rank: int = 0) -> Any:
        """The interactive view of one rank's profile (see ``Profile.view``)."""
        return load(self.files[rank]).view()

    def html(self) -> str:
        """The job as a page: its ranks, what they show side by side, then each rank's page
        (the first open, the others folded)."""
        import html as _html

        def esc(x: Any) -> str:
            return _html.escape(str(x))

        rows = "".join(
            f"<tr><td>rank {esc(r['rank'])}</td><td>{r['collective_share'] * 100:.0f}%</td>"
            f"<td>{esc(r['last_collective'] or '')}</td></tr>"
            for r in self.ranks)
        if self.findings:
            found = "".join(
                f"<li><b>{esc(f['kind'])}</b>: {esc(f['message'])}<br><i>{esc(f['advice'])}</i></li>"
                for f in self.findings)
            found = f"<ul>{found}</ul>"
        else:
            found = "<p>Across ranks: nothing to report (no straggler, no diverging rank, no rank stuck).</p>"
        pages = "".join(
            f"<details{' open' if i == 0 else ''}><summary>rank {esc(r['rank'])}</summary>{p.html()}</details>"
            for i, (r, p) in enumerate(zip(self.ranks, self.profiles())))
        return (f"<div class='xlaprof-job'><h3>Job: {len(self.files)} ranks, {self.collectives_in_common} "
                f"collectives in common</h3>{found}<table><tr><th>rank</th><th>in collectives</th>"
                f"<th>last collective</th></tr>{rows}</table>{pages}</div>")

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        return f"<xlaprof job {self.path}: {len(self.files)} ranks, {len(self.findings)} findings across them>"


def load_job(path: str) -> Job:
    """Opens a job's profiles: ``job.xlaprof`` reads ``job.rank0.xlaprof``, ``job.rank1.xlaprof``,
    ... (what each rank of a torchrun job with ``XLAPROF_PROFILE=job.xlaprof`` writes)."""
    return Job(path)


def metrics_report() -> str:
    """PyTorch/XLA-style metrics: of the profile recording now, else the last one, else the
    engine's counters since the process started."""
    current = _active or _last
    if current is not None:
        return current.metrics_report()
    counters = _native.counters()
    return "".join(f"Counter: {k}\n  Value: {v}\n" for k, v in counters.items())
