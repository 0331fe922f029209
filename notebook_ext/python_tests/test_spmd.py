"""Many devices from Python: meshes, sharding annotations, data-parallel training (xlaprof's own
API and torch's) against the one-device run, and the profile of it. Each program runs in a fresh
process: the engine's device count is fixed when it starts (by the first mesh)."""

import json
import pathlib
import subprocess
import sys
import textwrap


def run(code: str) -> dict:
    """Runs `code` in a new Python; its last line of output is JSON."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_sharded_values_equal_numpy_and_shards_land_on_the_mesh():
    out = run(
        """
        import json, numpy as np, xlaprof as xp
        mesh = xp.Mesh([0, 1, 2, 3], (2, 2), ("data", "model"))
        rng = np.random.default_rng(0)
        xv = rng.standard_normal((8, 6)).astype(np.float32)
        wv = rng.standard_normal((6, 4)).astype(np.float32)
        x, w = xp.tensor(xv), xp.tensor(wv)
        xp.mark_sharding(x, mesh, ("data", None))
        xp.mark_sharding(w, mesh, (None, "model"))
        y = (x @ w).tanh() + 1
        xp.sync()
        both = xp.tensor(xv)
        xp.mark_sharding(both, mesh, (("data", "model"), None))
        print(json.dumps({
            "devices": len(xp.devices()),
            "mesh": repr(mesh),
            "x": x.sharding,
            "y": y.sharding,
            "both": both.sharding,
            "error": float(np.abs(y.numpy() - (np.tanh(xv @ wv) + 1)).max()),
            "gathered": bool((x.numpy() == xv).all() and (both.numpy() == xv).all()),
        }))
        """
    )
    assert out["devices"] == 4
    assert out["mesh"] == "Mesh(device_ids=[0, 1, 2, 3], mesh_shape=(2, 2), axis_names=('data', 'model'))"
    assert out["x"].startswith("('data', None) over Mesh(data=2, model=2")
    assert out["y"].startswith("('data', 'model') over"), out["y"]
    assert out["both"].startswith("(('data', 'model'), None) over"), out["both"]
    assert out["error"] < 1e-5
    assert out["gathered"]


def test_bad_annotations_are_sharding_errors_at_the_users_line():
    out = run(
        """
        import json, xlaprof as xp
        mesh = xp.get_1d_mesh("data")
        x = xp.zeros(6, 4)
        errors = {}
        for name, f in [
            ("axis", lambda: xp.mark_sharding(x, mesh, ("model", None))),
            ("divisible", lambda: xp.mark_sharding(x, mesh, ("data", None))),
            ("rank", lambda: xp.mark_sharding(x, mesh, ("data",))),
            ("device", lambda: xp.Mesh([0, 1, 2, 9], (4,), ("data",))),
            ("more", lambda: xp.Mesh(list(range(8)), (8,), ("data",))),
            ("global", lambda: xp.mark_sharding(x, None, (None, None))),
        ]:
            try:
                f()
            except xp.ShardingError as e:
                errors[name] = str(e)
        errors["isvalueerror"] = issubclass(xp.ShardingError, ValueError)
        errors["still_whole"] = x.sharding is None
        print(json.dumps(errors))
        """
    )
    assert 'no axis "model"' in out["axis"] and "(at <string>:" in out["axis"], out["axis"]
    assert "dimension 0 of size 6 cannot be split 4 ways" in out["divisible"]
    assert "1 entries but the tensor has 2 dimensions" in out["rank"]
    assert "a mesh of 10 devices, but the engine started with 4" in out["device"]
    assert "XLAPROF_CPU_DEVICES=8" in out["more"]
    assert "no global mesh" in out["global"]
    assert out["isvalueerror"] and out["still_whole"]


TRAIN = """
import json, numpy as np, xlaprof as xp
devices = {devices}
mesh = xp.get_1d_mesh("data", devices) if devices > 1 else None
rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(16, 32), xp.nn.ReLU(), xp.nn.Linear(32, 4))
if {fsdp}:
    for p in model.parameters():
        if p.shape[0] % devices == 0:
            xp.mark_sharding(p, mesh, ("data",) + (None,) * (p.ndim - 1))
opt = xp.optim.Adam(model.parameters(), lr=1e-2)
losses = []
with xp.profile() as prof:
    for step in range(4):
        x = xp.tensor(rng.standard_normal((8, 16)).astype(np.float32))
        y = xp.tensor(rng.integers(0, 4, 8))
        if mesh is not None:
            xp.mark_sharding(x, mesh, ("data", None))
            xp.mark_sharding(y, mesh, ("data",))
        loss = xp.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        xp.step()
        losses.append(loss.item())
print(json.dumps({{"losses": losses, "report": prof.report()}}))
"""


def test_data_parallel_and_fsdp_training_match_one_device_and_the_profile_shows_the_devices():
    one = run(TRAIN.format(devices=1, fsdp=False))
    assert "Devices:" not in one["report"]
    for fsdp in (False, True):
        many = run(TRAIN.format(devices=4, fsdp=fsdp))
        for a, b in zip(many["losses"], one["losses"]):
            assert abs(a - b) <= 1e-5 * (1 + abs(b)), (fsdp, many["losses"], one["losses"])
        report = many["report"]
        assert "partitioned executions on 4 devices" in report, report
        assert "all-reduce" in report, report


def test_torch_data_parallel_and_fsdp_match_one_device():
    code = """
    import json, torch, xlaprof as xp, xlaprof.torch as xt
    devices = {devices}
    mesh = xp.get_1d_mesh("data", devices) if devices > 1 else None
    dev = xt.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(dev)
    if {fsdp}:
        for p in model.parameters():
            xt.mark_sharding(p, mesh, ("data",) + (None,) * (p.dim() - 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    losses = []
    for s in range(4):
        x = torch.randn(16, 32, generator=g).to(dev)
        y = torch.randint(0, 8, (16,), generator=g).to(dev)
        if mesh is not None:
            xt.mark_sharding(x, mesh, ("data", None))
            xt.mark_sharding(y, mesh, ("data",))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        xt.step()
        losses.append(loss.item())
    state = opt.state[model[0].weight]["exp_avg"]
    print(json.dumps({{"losses": losses, "compiles": xp.counters()["compiles"],
                       "state": state._xp.sharding}}))
    """
    one = run(code.format(devices=1, fsdp=False))
    for fsdp in (False, True):
        many = run(code.format(devices=4, fsdp=fsdp))
        for a, b in zip(many["losses"], one["losses"]):
            assert abs(a - b) <= 1e-5 * (1 + abs(b)), (fsdp, many, one)
        # The first step, then the step with AdamW's state: as on one device.
        assert many["compiles"] == one["compiles"] == 2, (fsdp, many, one)
        # AdamW's moments are made split like their parameter.
        assert (many["state"] or "").startswith("('data', None)") == fsdp, many["state"]


COMPILED_GPT2 = """
import json, sys, torch
sys.path.insert(0, {samples!r})
import models, xlaprof as xp, xlaprof.torch as xt
from xlaprof.torch import _compile
mesh = xp.get_1d_mesh("data", 4)
dev = xt.device()
torch.manual_seed(0)
eager, ours = models.gpt2(), models.gpt2()
ours.load_state_dict(eager.state_dict())
ours.to(dev)
if {fsdp}:
    for p in ours.parameters():
        if p.shape[0] % 4 == 0:
            xt.mark_sharding(p, mesh, ("data",) + (None,) * (p.dim() - 1))
opt_e = torch.optim.AdamW(eager.parameters(), lr=1e-3)
opt = torch.optim.AdamW(ours.parameters(), lr=1e-3)
model, step = torch.compile(ours, backend="xlaprof"), torch.compile(opt.step, backend="xlaprof")
g = torch.Generator().manual_seed(1)
losses, compiles = [], []
with xp.profile() as prof:
    for i in range(20):
        b = models.gpt2_batch(g)
        loss_e = models.hf_loss(eager, b)
        loss_e.backward()
        opt_e.step()
        opt_e.zero_grad()
        b = {{k: v.to(dev) for k, v in b.items()}}
        for v in b.values():
            xt.mark_sharding(v, mesh, ("data", None))
        loss = models.hf_loss(model, b)
        loss.backward()
        step()
        opt.zero_grad()
        losses.append((loss.item(), loss_e.item()))
        compiles.append(xp.counters()["compiles"])
params = max((q.cpu() - p.detach()).abs().max().item() for p, q in zip(eager.parameters(), ours.parameters()))
w = ours.transformer.h[0].mlp.c_fc.weight
print(json.dumps({{"losses": losses, "params": params, "compiles": compiles, "stats": _compile.stats(),
                   "fallbacks": xt.fallbacks(), "report": prof.report(),
                   "state": opt.state[w]["exp_avg"]._xp.sharding}}))
"""


def test_torch_compile_over_a_mesh_trains_gpt2_like_cpu_eager_data_parallel_and_fsdp():
    # Dynamo's graphs over split arguments: each captured once as a partitioned program and
    # replayed on the 4 devices; the step's losses and parameters those of torch's CPU eager.
    samples = str(pathlib.Path(__file__).parents[2] / "samples" / "torch")
    for fsdp in (False, True):
        out = run(COMPILED_GPT2.format(samples=samples, fsdp=fsdp))
        for i, (ours, eager) in enumerate(out["losses"]):
            assert abs(ours - eager) <= 1e-5 * abs(eager), (fsdp, i, out["losses"])
        assert out["params"] < 1e-4, (fsdp, out["params"])
        assert out["compiles"][-1] == out["compiles"][2], (fsdp, "compiled again after warm-up", out["compiles"])
        stats = out["stats"]
        assert stats["uncaptured"] == 0 and stats["recorded_runs"] == 0 and out["fallbacks"] == {}, out
        assert stats["replays"] >= 4 * 17, stats
        assert "partitioned executions on 4 devices" in out["report"], out["report"]
        assert "all-reduce" in out["report"], out["report"]
        assert (out["state"] or "").startswith("('data', None)") == fsdp, out["state"]


def test_a_compiled_graph_is_captured_again_for_arguments_split_another_way():
    # How an argument is split is part of the program, and Dynamo's guards do not see it: a call
    # with the split changed runs a capture of its own (kept beside the first), with the right
    # values.
    out = run(
        """
        import json, torch, xlaprof as xp, xlaprof.torch as xt
        from xlaprof.torch import _compile
        mesh = xp.get_1d_mesh("data", 4)
        dev = xt.device()
        f = torch.compile(lambda x, w: torch.relu(x @ w).sum(0), backend="xlaprof")
        g = torch.Generator().manual_seed(0)
        x, w = torch.randn(8, 12, generator=g), torch.randn(12, 4, generator=g)
        errors, captured = [], []
        for spec in [("data", None), ("data", None), None, (None, "data"), ("data", None)]:
            xd = x.to(dev)
            if spec is not None:
                xt.mark_sharding(xd, mesh, spec)
            got = f(xd, w.to(dev))
            errors.append((got.cpu() - torch.relu(x @ w).sum(0)).abs().max().item())
            captured.append(_compile.stats()["captured"])
        print(json.dumps({"errors": errors, "captured": captured, "stats": _compile.stats()}))
        """
    )
    assert max(out["errors"]) < 1e-5, out
    # Captured for the first split, replayed for the same, captured again for each other one,
    # and the first split's capture replayed again after them.
    assert out["captured"] == [1, 1, 2, 3, 3], out
    assert out["stats"]["replays"] == 2, out


def test_mark_sharding_inside_a_compiled_function_is_an_op_of_its_graph():
    # Inside a compiled forward, `mark_sharding` of its input and of an activation neither
    # breaks the graph nor is cut on the host once: the forward is one graph, captured once as a
    # partitioned program (the input split inside it at every run and handed back split, as the
    # eager call leaves it), and training matches CPU eager.
    out = run(
        """
        import json, torch, xlaprof as xp, xlaprof.torch as xt
        from xlaprof.torch import _compile
        mesh = xp.get_1d_mesh("data", 4)
        dev = xt.device()

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = torch.nn.Linear(12, 16), torch.nn.Linear(16, 3)

            def forward(self, x):
                if x.device.type == "xlaprof":
                    xt.mark_sharding(x, mesh, ("data", None))
                h = torch.relu(self.a(x))
                if h.device.type == "xlaprof":
                    xt.mark_sharding(h, mesh, ("data", None))
                return self.b(h)

        torch.manual_seed(0)
        eager, ours = Model(), Model()
        ours.load_state_dict(eager.state_dict())
        ours.to(dev)
        model = torch.compile(ours, backend="xlaprof")
        opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
        opt = torch.optim.SGD(ours.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(1)
        losses, splits = [], []
        with xp.profile() as prof:
            for i in range(10):
                x, y = torch.randn(8, 12, generator=g), torch.randint(0, 3, (8,), generator=g)
                loss_e = torch.nn.functional.cross_entropy(eager(x), y)
                loss_e.backward()
                opt_e.step()
                opt_e.zero_grad()
                xd = x.to(dev)
                loss = torch.nn.functional.cross_entropy(model(xd), y.to(dev))
                loss.backward()
                opt.step()
                opt.zero_grad()
                xt.step()
                losses.append((loss.item(), loss_e.item()))
                splits.append(xt.value(xd).sharding)
        params = max((q.cpu() - p.detach()).abs().max().item()
                     for p, q in zip(eager.parameters(), ours.parameters()))
        explained = torch._dynamo.explain(ours)(torch.randn(8, 12).to(dev))
        print(json.dumps({"losses": losses, "params": params, "splits": splits, "stats": _compile.stats(),
                          "breaks": explained.graph_break_count, "report": prof.report()}))
        """
    )
    for ours, eager in out["losses"]:
        assert abs(ours - eager) <= 1e-5 * abs(eager), out["losses"]
    assert out["params"] < 1e-5, out["params"]
    assert out["breaks"] == 0, out
    # The forward and the backward, each captured once and replayed at every later step.
    stats = out["stats"]
    assert stats["captured"] == 2 and stats["uncaptured"] == 0 and stats["replays"] == 2 * 9, stats
    assert all(s.startswith("('data', None) over Mesh(data=4") for s in out["splits"]), out["splits"]
    assert "partitioned executions on 4 devices" in out["report"], out["report"]
