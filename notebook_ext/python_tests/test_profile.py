"""Profiling from Python: diagnostics point at Python lines; saving, loading, exports, tables,
rules."""

import inspect
import json

import numpy as np
import polars as pl
import pytest

import xlaprof as xp


def this_line() -> int:
    return inspect.currentframe().f_back.f_lineno


def shapes_change(width):
    """Three steps, the input shape changing at one line: a recompile each step. Each test
    passes its own width: the compile cache is shared by the whole process."""
    lines = {}
    for n in (3, 4, 5):
        lines["create"] = this_line(); x = xp.tensor(np.ones((n, width)))  # noqa: E702
        lines["compute"] = this_line(); y = (x * 2.0).sum()  # noqa: E702
        lines["step"] = this_line(); xp.step()  # noqa: E702
    return y, lines


def test_diagnostics_name_the_python_line():
    with xp.profile() as p:
        y, lines = shapes_change(7)
    recompiles = [d for d in p.diagnostics() if d["kind"] == "Recompile"]
    assert recompiles, p.report()
    d = recompiles[0]
    assert d["location"] == f"test_profile.py:{lines['step']} in shapes_change"
    text = " ".join(d["change_sentences"])
    assert f"test_profile.py:{lines['create']} in shapes_change" in text
    assert p.steps == 3 and p.compiles >= 3


def test_hidden_sync_is_located_at_the_read():
    with xp.profile() as p:
        for i in range(3):
            x = xp.ones(4) * float(i)
            line = this_line(); x.sum().item()  # noqa: E702
            xp.step()
    hidden = [d for d in p.diagnostics() if d["kind"] in ("HiddenSync", "HostRead")]
    assert any(d["location"].startswith(f"test_profile.py:{line} ") for d in hidden), hidden


def test_save_load_export_and_tables(tmp_path):
    with xp.profile() as p:
        with xp.profile_scope("forward"):
            shapes_change(8)
    path = tmp_path / "run.xlaprof"
    p.save(path)
    q = xp.load(str(path))
    assert q.summary() == p.summary()
    assert q.report() == p.report()
    p.export(tmp_path / "run.json", format="json")
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["format"] == "xlaprof-json"
    p.export(tmp_path / "flame.svg", format="flamegraph")
    assert (tmp_path / "flame.svg").read_text().lstrip().startswith("<?xml")
    p.export(tmp_path / "tables", format="csv")
    assert (tmp_path / "tables" / "compiles.csv").exists()
    tables = p.to_polars()
    assert set(tables) == {"spans", "graphs", "compiles", "executions", "diagnostics", "devices",
                           "collectives"}
    assert isinstance(tables["compiles"], pl.DataFrame)
    assert tables["compiles"].height == p.compiles
    spans = p.to_polars("spans")
    assert "forward" in spans.filter(pl.col("kind") == "scope")["name"].to_list()


def test_rules_as_assertions():
    with xp.profile() as p:
        shapes_change(9)
    with pytest.raises(AssertionError, match=r"compiles after step 1 \(at most 0 allowed\)"):
        p.assert_max_compiles(0, after_step=1)
    p.assert_max_compiles(3)
    outcomes = p.check("max-compiles=1", "max-hidden-syncs=5")
    assert [o["passed"] for o in outcomes] == [False, True]
    with pytest.raises(AssertionError):
        p.assert_rules("no-compiles-after-step=1")
    with pytest.raises(ValueError, match="unknown rule"):
        p.check("fastest-possible=1")


def test_steady_training_compiles_once():
    w = xp.tensor([[0.5, -0.5]], requires_grad=True)
    opt = xp.optim.SGD([w], lr=0.1)
    with xp.profile() as p:
        for i in range(5):
            loss = ((w * (i + 0.5)).sum() - 1.0) ** 2
            opt.zero_grad()
            loss.backward()
            opt.step()
            p.step()
    p.assert_max_compiles(0, after_step=1)
    assert p.steps == 5


def test_live_snapshot_and_metrics_report():
    with xp.profile() as p:
        xp.ones(3).sum().item()
        assert p.recording
        assert p.report().startswith("xlaprof report")
        assert "TransferFromDeviceTime" in xp.metrics_report()
    assert not p.recording
    assert "Metric: ExecuteTime" in xp.metrics_report()


def test_only_one_recording_at_a_time():
    with xp.profile():
        with pytest.raises(xp.ProfileError):
            with xp.profile():
                pass


def test_the_line_profiler_times_the_recording_of_each_line():
    a = xp.from_numpy(np.ones((8, 8), np.float32))
    with xp.profile() as p:
        for _ in range(5):
            x = a
            # Enough recording that a pause of the machine in the light line cannot outweigh it.
            for _ in range(200):
                x = x * 1.0001 + 0.5  # HEAVY: 400 ops per step
            y = a.sum()  # LIGHT: one op per step
            xp.step()
    lines = {r["line"]: r for r in p.lines() if r["file"] == "test_profile.py"}
    source = open(__file__).read().splitlines()
    heavy = next(i + 1 for i, l in enumerate(source) if "# HEAVY" in l and "x = x" in l)
    light = next(i + 1 for i, l in enumerate(source) if "# LIGHT" in l and "y = a.sum()" in l)
    assert lines[heavy]["calls"] == 5 * 400, lines[heavy]
    assert lines[light]["calls"] == 5, lines[light]
    assert lines[heavy]["trace_ns"] > 3 * lines[light]["trace_ns"] > 0, (lines[heavy], lines[light])
    # Recording time, not the syncs': the step's line records nothing.
    step_line = next(r for r in lines.values() if r["syncs"] == 5)
    assert step_line["calls"] == 0 and step_line["trace_ns"] == 0, step_line
    del x, y


def test_the_line_profiler_times_torch_ops_and_the_backward_at_its_line():
    torch = pytest.importorskip("torch")
    import xlaprof.torch as xt

    dev = xt.device()
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
    x = torch.randn(8, 16).to(dev)
    with xp.profile() as p:
        for _ in range(3):
            loss = model(x).square().mean()  # FORWARD
            loss.backward()  # BACKWARD: autograd records it on a thread of its own
            xt.step()
    source = open(__file__).read().splitlines()
    at = {marker: next(i + 1 for i, l in enumerate(source) if f"# {marker}" in l and "loss" in l)
          for marker in ("FORWARD", "BACKWARD")}
    lines = {r["line"]: r for r in p.lines() if r["file"] == "test_profile.py"}
    forward, backward = lines[at["FORWARD"]], lines[at["BACKWARD"]]
    assert forward["calls"] >= 3 * 5 and forward["trace_ns"] > 0, forward  # linear, relu, ... per step
    assert backward["calls"] >= 3 * 5 and backward["trace_ns"] > 0, backward

