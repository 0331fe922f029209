"""`xt.DeviceLoader`: batches moved onto the device ahead of the loop, a step marked at each, and
the waits for a slow pipeline reported at the loop's line."""

import collections
import inspect
import os
import time

import pytest
import torch

import xlaprof as xp
import xlaprof.torch as xt

DEV = xt.device()
HERE = os.path.basename(__file__)


def this_line() -> int:
    return inspect.currentframe().f_back.f_lineno


Pair = collections.namedtuple("Pair", "x y")


def test_batches_arrive_on_the_device_in_order_with_their_structure():
    data = [
        {"ids": torch.arange(4) + i, "meta": "text", "nested": [torch.ones(2) * i, (torch.zeros(1), i)]}
        for i in range(5)
    ] + [Pair(torch.ones(3), torch.tensor([7]))]
    seen = list(xt.DeviceLoader(data, prefetch=1))
    assert len(seen) == 6
    for i, batch in enumerate(seen[:5]):
        assert batch["ids"].device == DEV and batch["ids"].cpu().tolist() == [i, i + 1, i + 2, i + 3]
        assert batch["meta"] == "text" and batch["nested"][1][1] == i
        assert batch["nested"][0].device == DEV and batch["nested"][1][0].device == DEV
    assert isinstance(seen[5], Pair) and seen[5].y.device == DEV
    assert len(xt.DeviceLoader(data)) == 6


def test_the_loader_thread_records_no_op_a_sync_of_the_training_thread_could_take():
    # `t.to(device)` makes an empty device tensor (a pending op) and copies into it: a step's
    # sync on the training thread in between took that tensor into its graph, which then
    # differed from the step before (another compile). The loader uploads straight to data,
    # bfloat16 too (as its bits: it used to cross as float32 and convert on the device).
    half = torch.randn(5, 2).to(torch.bfloat16)
    data = [(torch.randn(4, 3), torch.randint(0, 10, (4,)), torch.ones(2, dtype=torch.bool), half)] * 3
    before = xp.counters()["ops_traced"]
    seen = list(xt.DeviceLoader(data, mark_step=False))
    assert xp.counters()["ops_traced"] == before
    x, y, mask, h = seen[-1]
    assert (x.dtype, y.dtype, mask.dtype, h.dtype) == (torch.float32, torch.int64, torch.bool, torch.bfloat16)
    assert x.device == DEV and torch.equal(y.cpu(), data[0][1]) and mask.cpu().all()
    assert torch.equal(h.cpu(), half)


def test_each_batch_after_the_first_ends_a_step():
    data = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(6)]
    model = torch.nn.Linear(3, 1).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with xp.profile() as p:
        for x, y in xt.DeviceLoader(data):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert p.steps == 6  # the last batch's step ends when the loop asks for one more


def test_a_failing_loader_raises_in_the_loop():
    def batches():
        yield torch.ones(2)
        raise KeyError("sample 17 is missing")

    with pytest.raises(KeyError, match="sample 17"):
        for _ in xt.DeviceLoader(batches()):
            pass
    with pytest.raises(ValueError, match="prefetch"):
        xt.DeviceLoader([], prefetch=0)


def test_a_slow_pipeline_is_reported_at_the_loop_with_its_waits():
    def slow():
        for i in range(6):
            time.sleep(0.1)  # decoding on the host, far slower than the step, even on a loaded machine
            yield torch.full((8, 4), float(i))

    w = torch.ones(4, 1, device=DEV)
    with xp.profile() as p:
        line = this_line() + 1
        for x in xt.DeviceLoader(slow()):
            (x @ w).sum()
    waits = [d for d in p.diagnostics() if d["kind"] == "DataWait"]
    assert len(waits) == 1, p.report()
    d = waits[0]
    assert d["location"].startswith(f"{HERE}:{line}") and d["cost_ns"] > 50e6, d
    assert "num_workers" in d["advice"] and d["count"] >= 3, d
