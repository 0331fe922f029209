"""Ops are recorded, not run: repr never executes, reading a value does."""

import xlaprof as xp


def test_repr_of_a_pending_tensor_runs_nothing():
    a = xp.ones(8, 8)
    b = (a @ a).relu() + 1.0
    before = xp.counters()
    text = repr(b)
    after = xp.counters()
    assert text.startswith("Tensor(f32[8,8], pending add, graph of ")
    assert b.is_pending and b.graph_size > 4
    for counter in ("syncs", "compiles", "executions", "value_reads"):
        assert after[counter] == before[counter], counter
    # Reading the value runs it, once.
    assert str(b).startswith("tensor([[9. 9.")
    read = xp.counters()
    assert read["executions"] == after["executions"] + 1
    assert not b.is_pending and repr(b) == "Tensor(f32[8,8], device data)"


def test_same_graph_twice_compiles_once():
    def run(v):
        x = xp.full([16], v)
        y = (x * x).sum()
        xp.sync()
        return y

    run(1.0)
    before = xp.counters()
    assert run(2.0).item() == 64.0
    after = xp.counters()
    assert after["compiles"] == before["compiles"]
    assert after["cache_hits"] >= before["cache_hits"] + 1
