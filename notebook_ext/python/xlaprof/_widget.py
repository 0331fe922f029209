"""The interactive profile view for notebooks (anywidget: JupyterLab, Notebook 7, VS Code, Colab),
of one profile or of two side by side.

The view is ``widget/profile.js``; everything it shows comes from the profiler in Rust: a summary,
the findings, and the timeline as bars summarized for the window on screen and its width
(``Profile.timeline``), fetched again as the view zooms or pans, so a profile of a million events
sends a few thousand bars, never its events. A finding opens its two graphs side by side
(``Profile.graph_diff``), fetched when clicked. Nothing of the program's text is markup there.

Where widgets do not run (nbconvert's HTML, GitHub), the same output carries the static page.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any, Dict, List, Optional

import anywidget
import traitlets

#: The width the overview is summarized for, before the view reports its own.
OVERVIEW_COLUMNS = 1200
#: Graph nodes sent per side of a diff: around the first change, the rest counted.
DIFF_NODES = 400
#: How often a live view is refreshed at most (seconds): each refresh analyses the profile so far.
LIVE_INTERVAL_S = 1.0
#: Characters of a graph's StableHLO or optimized HLO sent to the view.
HLO_CHARS = 200_000

_HERE = pathlib.Path(__file__).parent / "widget"


def _fields() -> Dict[str, Any]:
    """The state of one profile's view, as synced traits."""
    return {
        "title": traitlets.Unicode("").tag(sync=True),
        "summary": traitlets.Unicode("").tag(sync=True),
        "live": traitlets.Bool(False).tag(sync=True),
        "findings": traitlets.List([]).tag(sync=True),
        "extent": traitlets.List([0, 1]).tag(sync=True),
        "lanes": traitlets.List([]).tag(sync=True),
        "bars": traitlets.List([]).tag(sync=True),
        # The line profiler: `[file, line, text, ops, inputs, syncs, compiles, compile_ns,
        # reads, bytes, fallbacks]` for every line the engine did something for.
        "lines": traitlets.List([]).tag(sync=True),
    }


def _state(profile: Any, data: Any, live: bool) -> Dict[str, Any]:
    """What the view of ``profile`` (read as ``data``) shows first."""
    first, last = data.timeline(0, 1, 1)["extent"]
    last = max(last, first + 1)
    overview = data.timeline(first, last, OVERVIEW_COLUMNS)
    report = data.report(True).splitlines()
    return {
        "title": profile.title or "xlaprof profile",
        "summary": "\n".join(report[1:6]),
        "live": live,
        "findings": [_finding(d) for d in data.diagnostics()],
        "lanes": overview["lanes"],
        "extent": [first, last],
        "bars": [list(b) for b in overview["bars"]],
        "lines": _lines(data, profile),
    }


def _answer(data: Any, findings: List[Dict[str, Any]], content: Any) -> Optional[Dict[str, Any]]:
    """The reply to a view's request: a window's bars, a finding's two graphs, a graph."""
    if not isinstance(content, dict):
        return None
    if content.get("type") == "window":
        start, end = int(content.get("start", 0)), int(content.get("end", 1))
        columns = max(1, min(int(content.get("columns", OVERVIEW_COLUMNS)), 8192))
        bars = data.timeline(max(start, 0), max(end, start + 1), columns)["bars"]
        return {"type": "window", "seq": content.get("seq"), "start": start, "end": end,
                "bars": [list(b) for b in bars]}
    if content.get("type") == "diff":
        index = int(content.get("index", -1))
        if not 0 <= index < len(findings) or len(findings[index]["graphs"]) < 2:
            return None
        a, b = (int(h, 16) for h in findings[index]["graphs"][:2])
        return {"type": "diff", **_diff(data.graph_diff(a, b))}
    if content.get("type") == "graph":
        try:
            detail = data.graph_detail(int(str(content.get("hash", "")), 16))
        except ValueError:
            return None
        return {"type": "graph", **_detail(detail)}
    return None


class ProfileWidget(anywidget.AnyWidget):
    """One profile: ``p.view()``, and what ``%%xla_profile`` shows."""

    _esm = _HERE / "profile.js"
    _css = _HERE / "profile.css"
    locals().update(_fields())

    def __init__(self, profile: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._profile = profile
        self._data: Optional[Any] = None
        self._last_refresh = 0.0
        self.on_msg(self._on_message)
        self.refresh()

    def refresh(self, live: bool = False) -> None:
        """Reads the profile (so far, while it records) into the view."""
        self._data = self._profile._data()
        self._last_refresh = time.perf_counter()
        with self.hold_sync():
            for name, value in _state(self._profile, self._data, live).items():
                setattr(self, name, value)

    def refresh_live(self) -> None:
        """Refreshes a recording view, at most every ``LIVE_INTERVAL_S``."""
        if time.perf_counter() - self._last_refresh >= LIVE_INTERVAL_S:
            self.refresh(live=True)

    def _on_message(self, _widget: Any, content: Any, _buffers: List[Any]) -> None:
        if self._data is not None:
            reply = _answer(self._data, self.findings, content)
            if reply is not None:
                self.send(reply)


class CompareWidget(anywidget.AnyWidget):
    """Two profiles side by side (``xp.compare(a, b)``): what ``xlaprof diff`` prints, then each
    profile's view, every request answered by its own profile."""

    _esm = _HERE / "profile.js"
    _css = _HERE / "profile.css"
    kind = traitlets.Unicode("compare").tag(sync=True)
    diff = traitlets.Unicode("").tag(sync=True)
    locals().update({f"a_{k}": v for k, v in _fields().items()})
    locals().update({f"b_{k}": v for k, v in _fields().items()})

    def __init__(self, a: Any, b: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._profiles = {"a": a, "b": b}
        self._data = {side: p._data() for side, p in self._profiles.items()}
        with self.hold_sync():
            # Named by their titles: a notebook's program is its kernel's launcher.
            report = self._data["a"].diff_report(self._data["b"]).splitlines()[2:]
            titles = [f"{side.upper()}: {p.title or 'xlaprof profile'}" for side, p in self._profiles.items()]
            self.diff = "\n".join(titles + report)
            for side, p in self._profiles.items():
                for name, value in _state(p, self._data[side], False).items():
                    setattr(self, f"{side}_{name}", value)
        self.on_msg(self._on_message)

    def _on_message(self, _widget: Any, content: Any, _buffers: List[Any]) -> None:
        side = content.get("side") if isinstance(content, dict) else None
        if side in self._data:
            reply = _answer(self._data[side], getattr(self, f"{side}_findings"), content)
            if reply is not None:
                self.send({**reply, "side": side})


def _finding(d: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "kind": d["kind"],
        "title": d["title"],
        "message": d["message"],
        "advice": d.get("advice") or "",
        "fix": d.get("fix"),  # {"at", "before", "after"}: the advice as a rewrite of the user's line
        "location": d.get("location") or "",
        # As text: JavaScript numbers hold 53 bits, a graph's hash 64.
        "graphs": [f"{h:016x}" for h in d.get("graphs", [])],
    }


def _lines(data: Any, profile: Any) -> List[List[Any]]:
    texts = profile.source_lines()
    out = []
    for r in data.lines():
        text = next((texts[i] for i in r["locations"] if i in texts), "")
        out.append([r["file"], r["line"], text, r["ops"], r["inputs"], r["syncs"], r["compiles"],
                    r["compile_ns"], r["reads"], r["bytes"], r["fallbacks"], r["trace_ns"]])
    return out


def _detail(g: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """A graph as the view opens it: its op counts, its first nodes, its HLO texts (clipped)."""
    if g is None:
        return {"graph": None}

    def clip(text: Optional[str]) -> Optional[str]:
        if text is None or len(text) <= HLO_CHARS:
            return text
        return text[:HLO_CHARS] + "\n… (clipped)"

    return {"graph": {
        **_nodes(g, 0),
        "ops": [list(o) for o in g["ops"]],
        "executions": g["executions"], "compile_ns": g["compile_ns"],
        "stablehlo": clip(g["stablehlo"]), "optimized_hlo": clip(g["optimized_hlo"]),
    }}


def _diff(diff: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The diff as the view takes it: each side's nodes cut to a window around the first change."""
    if diff is None:
        return {"a": None}
    node = next((c["node"] for c in diff["changes"] if "node" in c), 0)
    first = max(0, node - DIFF_NODES // 2)
    out: Dict[str, Any] = {"changes": diff["changes"]}
    for side in ("a", "b"):
        out[side] = _nodes(diff[side], first)
    return out


def _nodes(g: Dict[str, Any], first: int) -> Dict[str, Any]:
    """A graph's nodes from `first`, at most ``DIFF_NODES`` of them, with its inputs."""
    return {
        "hash": g["hash"],
        "total": len(g["nodes"]),
        "first": first,
        "nodes": [list(n) for n in g["nodes"][first:first + DIFF_NODES]],
        "inputs": [list(i) for i in g["inputs"][:DIFF_NODES]],
    }
