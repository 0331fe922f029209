"""The torch bridge: unmodified torch code on the xlaprof device, against torch's CPU eager."""

import copy
import functools
import inspect
import json
import os
import pathlib
import random
import subprocess
import sys

import pytest
import torch

import xlaprof as xp
import xlaprof.torch as xt

DEV = xt.device()


def this_line() -> int:
    return inspect.currentframe().f_back.f_lineno


def mlp(seed: int, widths=(20, 32, 32, 5)) -> torch.nn.Module:
    torch.manual_seed(seed)
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def train_both(make_opt, steps: int, widths=(20, 32, 32, 5)):
    """The same model and batches on the CPU and on the device; each step's two losses and the
    compiles the device had done after it."""
    cpu = mlp(1, widths)
    dev = mlp(1, widths)
    dev.load_state_dict(cpu.state_dict())
    dev = dev.to(DEV)
    opt_cpu, opt_dev = make_opt(cpu.parameters()), make_opt(dev.parameters())
    g = torch.Generator().manual_seed(2)
    out = []
    for _ in range(steps):
        x = torch.randn(8, widths[0], generator=g)
        y = torch.randint(0, widths[-1], (8,), generator=g)
        for model, opt, move in ((cpu, opt_cpu, lambda t: t), (dev, opt_dev, lambda t: t.to(DEV))):
            loss = torch.nn.functional.cross_entropy(model(move(x)), move(y))
            loss.backward()
            opt.step()
            opt.zero_grad()
            if model is cpu:
                loss_cpu = loss.item()
        xt.step()
        out.append((loss_cpu, loss.item(), xp.counters()["compiles"]))
    return out, cpu, dev


def test_sgd_training_matches_cpu_eager_and_compiles_once():
    steps, cpu, dev = train_both(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 5, (20, 31, 17, 5))
    for loss_cpu, loss_dev, _ in steps:
        assert loss_dev == pytest.approx(loss_cpu, rel=1e-4, abs=1e-5)
    # Momentum buffers appear on the first step: steps 2.. are one graph, compiled once.
    compiles = [c for _, _, c in steps]
    assert compiles[1:] == [compiles[1]] * 4, compiles
    for a, b in zip(cpu.parameters(), dev.parameters()):
        torch.testing.assert_close(b.cpu(), a.detach(), rtol=1e-4, atol=1e-5)


def test_adamw_state_and_per_step_floats_do_not_recompile():
    # AdamW passes new Python floats every step (bias corrections): they are graph inputs.
    steps, _, _ = train_both(lambda p: torch.optim.AdamW(p, lr=1e-2), 6, (20, 33, 18, 5))
    for loss_cpu, loss_dev, _ in steps:
        assert loss_dev == pytest.approx(loss_cpu, rel=1e-4, abs=1e-5)
    compiles = [c for _, _, c in steps]
    assert compiles[2:] == [compiles[2]] * 4, compiles


OPTIMIZERS = {
    "SGD, Nesterov momentum, weight decay": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                                                     weight_decay=0.01),
    "Adam, AMSGrad": lambda p: torch.optim.Adam(p, lr=0.01, amsgrad=True),
    "AdamW": lambda p: torch.optim.AdamW(p, lr=0.01),
    "RMSprop, centered, momentum": lambda p: torch.optim.RMSprop(p, lr=0.01, centered=True, momentum=0.5),
    "Adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1),
    "NAdam": lambda p: torch.optim.NAdam(p, lr=0.01),
    "RAdam": lambda p: torch.optim.RAdam(p, lr=0.01),
    "Adamax": lambda p: torch.optim.Adamax(p, lr=0.01),
    "Adadelta": lambda p: torch.optim.Adadelta(p),
    "ASGD": lambda p: torch.optim.ASGD(p, lr=0.01),
    "Rprop": lambda p: torch.optim.Rprop(p, lr=0.01),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizers_take_their_multi_tensor_path_and_match_the_cpu(name):
    """On the device torch's optimizers and clip_grad_norm_ take their foreach (multi-tensor)
    paths, as on CUDA: an op per step for all parameters, not one per parameter. The parameters
    after four steps (gradients clipped, zero_grad keeping the tensors) are the CPU's, where the
    single-tensor path ran, and no op ran on the CPU fallback."""
    from xlaprof.torch import _dispatch

    def run(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).to(device)
        opt = OPTIMIZERS[name](model.parameters())
        g = torch.Generator().manual_seed(1)
        x, y = torch.randn(32, 8, generator=g).to(device), torch.randint(0, 3, (32,), generator=g).to(device)
        for _ in range(4):
            torch.nn.functional.cross_entropy(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            opt.zero_grad(set_to_none=False)
            if device == DEV:
                xt.step()
        return [p.detach().cpu() for p in model.parameters()]

    _dispatch._ROUTES.clear()
    before = dict(xt.fallbacks())
    got = run(DEV)
    assert xt.fallbacks() == before
    taken = {str(op) for op in _dispatch._ROUTES}
    assert {"aten._foreach_norm.Scalar", "aten._foreach_mul_.Tensor"} <= taken, taken
    assert any(op.startswith("aten._foreach_") and op.endswith(("_.List", "_.Scalar", "_.ScalarList"))
               for op in taken - {"aten._foreach_mul_.Tensor"}), taken
    for a, b in zip(got, run(torch.device("cpu"))):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_the_cpu_fallback_writes_into_every_tensor_of_a_list_it_mutates():
    from xlaprof.torch import _dispatch

    a, b = torch.ones(3, device=DEV), torch.zeros(2, device=DEV)
    _dispatch._fallback(torch.ops.aten._foreach_add_.Scalar, ([a, b], 2.0), {})
    assert (a.tolist(), b.tolist()) == ([3.0, 3.0, 3.0], [2.0, 2.0])


def test_a_write_through_a_view_reaches_its_base():
    base = torch.arange(12.0).reshape(3, 4)
    x = base.to(DEV)
    x[1].add_(100)                      # select
    x[:, 2:].mul_(-1)                   # slice
    x.t()[0].fill_(7)                   # transpose, then select
    a, b = x.split(2)                   # views from a split
    b.zero_()
    x.view(12)[5] = 42                  # view, then an index assignment
    expected = base.clone()
    expected[1].add_(100)
    expected[:, 2:].mul_(-1)
    expected.t()[0].fill_(7)
    expected.split(2)[1].zero_()
    expected.view(12)[5] = 42
    torch.testing.assert_close(x.cpu(), expected)
    # A view read after its base changed sees the change.
    row = x[0]
    x.add_(1)
    torch.testing.assert_close(row.cpu(), expected[0] + 1)
    # detach() shares data, as optimizers expect.
    d = x.detach()
    d.zero_()
    assert x.cpu().abs().sum().item() == 0


def test_repr_never_executes_and_print_is_a_sync():
    x = torch.randn(3, 4, device=DEV) * 2
    before = xp.counters()["syncs"]
    text = repr(x)
    assert "lazy float32[3, 4]" in text and "xlaprof:0" in text
    assert xp.counters()["syncs"] == before
    shown = str(x)
    assert "xlaprof:0" in shown and xp.counters()["syncs"] == before + 1


def test_item_in_the_loop_is_a_hidden_sync_at_the_users_line():
    model = mlp(3).to(DEV)
    with xp.profile() as p:
        for _ in range(3):
            loss = model(torch.randn(4, 20, device=DEV)).sum()
            line = this_line(); value = loss.item()  # noqa: E702
            xt.step()
    assert isinstance(value, float)
    hidden = [d for d in p.diagnostics() if d["kind"] == "HiddenSync"]
    assert hidden, p.report()
    assert hidden[0]["location"].startswith(f"test_torch_bridge.py:{line}"), hidden[0]["location"]


def test_ops_are_located_at_the_users_line_not_inside_torch():
    x = torch.randn(4, 4, device=DEV)
    with xp.profile() as p:
        line = this_line(); y = torch.nn.functional.softmax(x, dim=1)  # noqa: E702
        xt.sync()
    locations = p._data().locations()
    assert any(f == "test_torch_bridge.py" and n == line for f, n, _ in locations), locations
    assert all(f == "test_torch_bridge.py" for f, _, _ in locations), locations
    torch.testing.assert_close(y.cpu(), torch.softmax(x.cpu(), 1))


def test_an_op_not_lowered_runs_on_the_cpu_counted_or_is_an_error_when_strict(monkeypatch):
    x = torch.rand(5, 3) * 1.8 - 0.9
    got = torch.special.bessel_j0(x.to(DEV))  # no lowering and no decomposition: the CPU fallback
    torch.testing.assert_close(got.cpu(), torch.special.bessel_j0(x))
    name = "special_bessel_j0"
    assert name in xt.fallbacks() and xt.fallbacks()[name][0] >= 1
    monkeypatch.setenv("XLAPROF_STRICT", "1")
    with pytest.raises(NotImplementedError, match="aten::special_bessel_j0"):
        torch.special.bessel_j0(x.to(DEV))


@torch.library.custom_op("xlaprof_test::scaled_tanh", mutates_args=())
def _scaled_tanh(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.tanh(x) * scale  # for every device: torch ops only


_scaled_tanh.register_fake(lambda x, scale: torch.empty_like(x))
_scaled_tanh.register_autograd(
    lambda ctx, grad: (grad * ctx.scale * (1 - torch.tanh(ctx.saved_tensors[0]) ** 2), None),
    setup_context=lambda ctx, inputs, output: (ctx.save_for_backward(inputs[0]),
                                               setattr(ctx, "scale", inputs[1])))


@torch.library.custom_op("xlaprof_test::cpu_only_square", mutates_args=(), device_types="cpu")
def _cpu_only_square(x: torch.Tensor) -> torch.Tensor:
    return x * x


def test_custom_ops_written_for_every_device_run_on_it_with_their_autograd():
    # A torch.library.custom_op with one implementation for every device runs it on these
    # tensors, as CUDA does: no CPU fallback. PyTorch's own chunked linear_cross_entropy is one.
    from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(12, 16, generator=g, dtype=torch.float64), torch.randn(40, 16, generator=g, dtype=torch.float64)
    target = torch.randint(0, 40, (12,), generator=g)
    target[3] = -100
    before = dict(xt.fallbacks())
    for call in (lambda x, w, t: _scaled_tanh(x @ w.T, 0.5).sum(),
                 lambda x, w, t: torch.nn.functional.linear_cross_entropy(
                     x, w, t, options=LinearCrossEntropyOptions(batch_chunk_size=5)),
                 lambda x, w, t: torch.nn.functional.linear_cross_entropy(
                     x, w, t, linear_bias=w[:, 0] * 2, reduction="none",
                     options=LinearCrossEntropyOptions(batch_chunk_size=5)).sum()):
        cpu = [x.clone().requires_grad_(), w.clone().requires_grad_()]
        dev = [x.to(DEV).requires_grad_(), w.to(DEV).requires_grad_()]
        want, got = call(*cpu, target), call(*dev, target.to(DEV))
        want.backward(), got.backward()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-12, atol=1e-12)
        for d, c in zip(dev, cpu):
            torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=1e-12, atol=1e-12)
    assert xt.fallbacks() == before
    # One written for the CPU alone is the fallback's, and named as it is (not as an aten op).
    with pytest.warns(UserWarning, match=r"^xlaprof_test::cpu_only_square is not lowered"):
        got = _cpu_only_square(x.to(DEV))
    torch.testing.assert_close(got.cpu(), x * x)
    assert xt.fallbacks()["xlaprof_test::cpu_only_square"][0] == 1


def test_bitwise_ops_on_integers_and_bools_match_the_cpu_without_the_fallback():
    # Hugging Face's generate() ends each token with `unfinished & ~stopping_criteria(...)`, an
    # int64 tensor and a bool one: every dtype pair, and Python scalars, as torch promotes them.
    g = torch.Generator().manual_seed(0)
    vals = [torch.randint(-2**40, 2**40, (5, 4), generator=g),
            torch.randint(-2**30, 2**30, (5, 4), generator=g, dtype=torch.int32),
            torch.randint(0, 256, (1, 4), generator=g, dtype=torch.uint8),
            torch.randint(-128, 128, (4,), generator=g, dtype=torch.int8),
            torch.rand(5, 4, generator=g) > 0.5]
    before = sum(c for c, _ in xt.fallbacks().values())
    for a in vals:
        assert torch.equal((~a.to(DEV)).cpu(), ~a), a.dtype
        for op in (torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor):
            for b in vals + [3, True, 0]:
                want, got = op(a, b), op(a.to(DEV), b.to(DEV) if torch.is_tensor(b) else b).cpu()
                assert got.dtype == want.dtype and torch.equal(got, want), (op, a.dtype, b)
    unfinished, stop = torch.tensor([1, 1, 0, 1]), torch.tensor([True, False, False, True])
    on_dev = unfinished.to(DEV)
    on_dev &= ~stop.to(DEV)
    assert torch.equal(on_dev.cpu(), unfinished & ~stop)
    assert sum(c for c, _ in xt.fallbacks().values()) == before
    with pytest.raises(Exception, match="bitwise"):
        torch.bitwise_and(torch.ones(2).to(DEV), torch.ones(2).to(DEV)).cpu()


def test_unsupported_dtypes_and_layouts_are_clear_errors():
    with pytest.raises(TypeError, match="complex32"):
        torch.randn(3, dtype=torch.complex32).to(DEV)
    with pytest.raises(TypeError, match="uint16 is not supported"):
        torch.zeros(3, dtype=torch.uint16).to(DEV)
    with pytest.raises(TypeError, match="sparse_coo tensors are not supported"):
        torch.eye(3).to_sparse().to(DEV)
    with pytest.raises(TypeError, match="sparse_coo tensors are not supported"):
        torch.eye(3, device=DEV).to_sparse()


def test_factories_and_conversions():
    torch.testing.assert_close(torch.arange(2, 11, 3, device=DEV).cpu(), torch.arange(2, 11, 3))
    torch.testing.assert_close(torch.full((2, 3), 1.5, device=DEV).cpu(), torch.full((2, 3), 1.5))
    z = torch.zeros(2, 2, device=DEV, dtype=torch.int64)
    assert z.dtype == torch.int64 and z.device == DEV
    h = torch.randn(4, 4).to(DEV).to(torch.bfloat16)
    assert h.dtype == torch.bfloat16 and h.cpu().dtype == torch.bfloat16
    assert torch.ones(3, device=DEV).sum().item() == 3.0
    assert bool(torch.ones(1, device=DEV) > 0)
    # torch.manual_seed seeds the device's random stream too.
    torch.manual_seed(3)
    a = torch.randn(4, device=DEV).cpu()
    torch.manual_seed(3)
    assert torch.equal(torch.randn(4, device=DEV).cpu(), a)


def test_torch_accelerator_memory_functions_answer_for_the_device():
    # The device is torch's current accelerator; accelerate empties its cache as the Trainer
    # starts, which failed with torch's internal assert before.
    assert torch.accelerator.current_accelerator() == torch.device("xlaprof")
    x = torch.randn(256, 256, device=DEV) * 2
    torch.accelerator.empty_cache()
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.memory_stats() == {}
    assert torch.accelerator.memory_allocated() == 0 and torch.accelerator.max_memory_reserved() == 0
    with pytest.raises(RuntimeError, match="no figures for the xlaprof device"):
        torch.accelerator.get_memory_info()
    # synchronize() keeps CUDA's promise: what was issued before it has run.
    runs = xp.counters()["executions"]
    torch.accelerator.synchronize()
    torch.get_device_module(DEV).synchronize()
    assert xp.counters()["executions"] == runs + 1
    assert x.sum().item() == pytest.approx((x.cpu()).sum().item(), rel=1e-4)


def test_import_xlaprof_does_not_import_torch():
    code = "import sys, xlaprof; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})


ADAMW_STEPS = """
import json, sys, torch
import xlaprof as xp, xlaprof.torch as xt

torch.manual_seed(0)
cpu = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(3)])
dev = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(3)])
dev.load_state_dict(cpu.state_dict())
dev.to(xt.device())
opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (cpu, dev)]
x = torch.randn(8, 64)
with xp.profile() as p:
    for _ in range(4):
        for m, opt, d in ((cpu, opts[0], "cpu"), (dev, opts[1], xt.device())):
            m(x.to(d)).square().sum().backward()
            xt.sync()  # the optimizer's step a graph of its own
            opt.step()
            opt.zero_grad()
        xt.sync()
gap = max((a - b.cpu()).abs().max().item() for a, b in zip(cpu.parameters(), dev.parameters()))
p.export(sys.argv[1])
print(gap)
"""


def test_an_optimizer_step_donates_each_buffer_to_its_own_update_and_xla_copies_nothing(tmp_path):
    # The torch bridge gives a written tensor a new value; the sync pairs the old buffer with
    # that value. Paired by shape alone, a parameter's buffer went to a moment's update and XLA
    # copied each such input and output: 48 copies in a 12-tensor AdamW step, 1.6x its time.
    out = tmp_path / "adamw.json"
    run = subprocess.run([sys.executable, "-c", ADAMW_STEPS, str(out)], capture_output=True, text=True,
                         env={**os.environ, "XLAPROF_OPTIMIZED_HLO": "1"})
    assert run.returncode == 0, run.stderr
    assert float(run.stdout.split()[-1]) < 1e-5, run.stdout  # parameters as CPU eager's
    graphs = json.loads(out.read_text())["profile"]["graphs"]
    graphs = list(graphs.values()) if isinstance(graphs, dict) else graphs
    def donated(g):
        return sum(1 for i in g["def"]["inputs"] if i.get("donated"))

    # The optimizer's steady step: 6 parameters and their 12 moments, each donated.
    steps = [g for g in graphs if g["executions"] >= 2 and donated(g) == 18]
    assert len(steps) == 1, [(g["def"]["nodes"], g["executions"], donated(g)) for g in graphs]
    g = steps[0]
    entry = g["optimized_hlo"][g["optimized_hlo"].index("ENTRY"):]
    copies = [line.strip() for line in entry.splitlines() if " copy(" in line]
    assert not copies, copies


SAMPLE = pathlib.Path(__file__).parents[2] / "samples" / "torch" / "mlp_adamw.py"


def run_sample_recorded(out, **env):
    """Runs the torch sample recording to `out` (what `xlaprof run -- python ...` does), checks
    each of its 8 steps' loss against torch's CPU eager, and loads the profile."""
    run = subprocess.run([sys.executable, str(SAMPLE)],
                         env={**os.environ, "XLAPROF_PROFILE": str(out), **env},
                         capture_output=True, text=True, check=True)
    lines = [l for l in run.stdout.splitlines() if l.startswith("step ")]
    assert len(lines) == 8, run.stdout
    for line in lines:
        ours = float(line.split("loss ")[1].split()[0])
        eager = float(line.split("CPU eager ")[1].split(")")[0])
        assert ours == pytest.approx(eager, rel=1e-4, abs=1e-5), line
    return xp.load(str(out))


def test_the_torch_sample_is_recorded_by_xlaprof_profile(tmp_path):
    # What `xlaprof run -- python samples/torch/mlp_adamw.py` does: the program records itself
    # from `import xlaprof` on; the profile names the sample's own lines.
    p = run_sample_recorded(tmp_path / "mlp.xlaprof")
    assert p.steps == 8
    # AdamW's state appears on the first step: two graphs, then cache hits only.
    assert p.compiles == 2, p.report()
    # Every op is located at a line of the sample, never inside torch; the backward's ops at the
    # line of `loss.backward()`.
    locations = p._data().locations()
    assert {f for f, _, _ in locations} == {"mlp_adamw.py"}, locations
    source = SAMPLE.read_text().splitlines()
    backward = next(i + 1 for i, l in enumerate(source) if "loss.backward()" in l)
    assert any(n == backward for _, n, _ in locations), locations
    # The losses are read after xt.step(): their values are already there, so no hidden sync.
    assert not [d for d in p.diagnostics() if d["kind"] == "HiddenSync"], p.report()


def test_running_ahead_of_the_device_trains_the_same_and_profiles_every_execution(tmp_path):
    # XLAPROF_RUN_AHEAD=1, the default on GPUs, here on the CPU plugin: each xt.step() returns
    # once its program is launched; the losses are the same, and the profile (stopped at exit,
    # after the programs still running) has each sync's execution, timed to the device's end.
    p = run_sample_recorded(tmp_path / "ahead.xlaprof", XLAPROF_RUN_AHEAD="1")
    assert p.steps == 8 and p.compiles == 2, p.report()
    executed = sorted(p.to_polars("executions")["sync"].to_list())
    assert len(executed) == p.syncs and len(set(executed)) == p.syncs, (executed, p.syncs)


def test_param_data_assignment_and_slice_writes_keep_torchs_semantics():
    m = torch.nn.Linear(3, 2).to(DEV)
    m.weight.data = torch.zeros(2, 3, device=DEV)          # replaces the values behind the param
    assert m.weight.cpu().abs().sum().item() == 0
    m.weight.data = torch.ones(4, 3)                        # and, as in torch, may change its shape
    assert m.weight.shape == (4, 3) and m.weight.cpu().sum().item() == 12
    m.weight.data.mul_(3)                                   # `.data` is an alias
    assert m.weight.cpu().sum().item() == 36
    cache = torch.zeros(2, 8, device=DEV)                   # a KV cache written in place
    cache[:, 2:4] = torch.full((2, 2), 5.0, device=DEV)
    cache[1, 6] = 7.0
    expected = torch.zeros(2, 8)
    expected[:, 2:4] = 5.0
    expected[1, 6] = 7.0
    torch.testing.assert_close(cache.cpu(), expected)


def test_diagonal_and_strided_views_write_through_and_a_cpu_view_refuses_writes():
    base = torch.arange(12.0).reshape(3, 4)
    x = base.to(DEV)
    x.diagonal(1).fill_(-1)
    x.fill_diagonal_(7.0)  # torch writes through as_strided
    expected = base.clone()
    expected.diagonal(1).fill_(-1)
    expected.fill_diagonal_(7.0)
    torch.testing.assert_close(x.cpu(), expected)
    # unfold is a view: a write through its windows reaches the tensor.
    windows = torch.arange(10.0, device=DEV).unfold(0, 3, 2)
    torch.testing.assert_close(windows.cpu(), torch.arange(10.0).unfold(0, 3, 2))
    t, expected = torch.arange(10.0, device=DEV), torch.arange(10.0)
    t.unfold(0, 3, 3)[1:].mul_(-1)
    expected.unfold(0, 3, 3)[1:].mul_(-1)
    torch.testing.assert_close(t.cpu(), expected)
    # view(dtype) has no lowering: its result is read from the CPU, and a write through it is
    # an error rather than a write that goes nowhere.
    bits = torch.arange(4.0, device=DEV).view(torch.int32)
    torch.testing.assert_close(bits.cpu(), torch.arange(4.0).view(torch.int32))
    with pytest.raises(NotImplementedError, match="aten::view.dtype ran on the CPU"):
        bits.zero_()


def test_in_place_shape_changes_reach_the_tensor_torch_holds():
    # matmul of a vector squeezes its own result in place, in C++: the object it holds must
    # take the new shape.
    a, b = torch.randn(5), torch.randn(5, 3)
    torch.testing.assert_close((a.to(DEV) @ b.to(DEV)).cpu(), a @ b)
    torch.testing.assert_close(torch.quantile(a.to(DEV), 0.5).cpu(), torch.quantile(a, 0.5))
    x = torch.randn(2, 3).to(DEV)
    x.unsqueeze_(0)
    assert x.shape == (1, 2, 3) and x.cpu().shape == (1, 2, 3)
    assert not xt.fallbacks().get("squeeze_.dim")


def test_an_in_place_op_takes_the_functional_overload_of_its_arguments():
    # `x.pow_(2)` is `aten.pow_.Scalar`, whose functional form is `pow.Tensor_Scalar`, not
    # `pow.Scalar` (`2 ** x`); Adafactor squares its gradient norms so.
    x = torch.randn(3, 4)
    before = dict(xt.fallbacks())
    for write in (lambda t: t.pow_(2), lambda t: t.pow_(2.5), lambda t: t.pow_(t.abs()), lambda t: t.square_()):
        got = write(x.to(DEV))
        torch.testing.assert_close(got.cpu(), write(x.clone()), equal_nan=True)
    assert xt.fallbacks() == before


def test_transposed_convolution_and_its_gradients_match_the_cpu():
    torch.manual_seed(0)
    cpu = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    on_device = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    on_device.load_state_dict(cpu.state_dict())
    on_device = on_device.to(DEV)
    x = torch.randn(2, 4, 5, 5, requires_grad=True)
    cpu(x).square().sum().backward()
    xd = x.detach().to(DEV).requires_grad_()
    before = sum(n for n, _ in xt.fallbacks().values())
    y = on_device(xd)
    y.square().sum().backward()
    assert tuple(y.shape) == (2, 6, 10, 10)
    torch.testing.assert_close(y.cpu(), cpu(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(xd.grad.cpu(), x.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(on_device.weight.grad.cpu(), cpu.weight.grad, rtol=1e-4, atol=1e-4)
    assert sum(n for n, _ in xt.fallbacks().values()) == before, xt.fallbacks()


def test_complex_tensors_ffts_and_their_views_match_the_cpu():
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    for f, arg in [(torch.fft.fft, x), (torch.fft.rfft2, x), (torch.fft.ifftn, x),
                   (torch.fft.irfft, torch.fft.rfft(x)), (torch.fft.hfft, torch.fft.rfft(x))]:
        torch.testing.assert_close(f(arg.to(DEV)).cpu(), f(arg), rtol=1e-5, atol=1e-5)
    z = torch.randn(3, 2, dtype=torch.complex64)
    zd = z.to(DEV)
    torch.testing.assert_close((zd * zd + 1.5).cpu(), z * z + 1.5)
    torch.testing.assert_close(zd.abs().cpu(), z.abs())
    torch.testing.assert_close(zd.sum(0).cpu(), z.sum(0))
    torch.testing.assert_close(zd.angle().cpu(), z.angle())
    # A write through view_as_real reaches the complex tensor.
    torch.view_as_real(zd)[0, 1] = 5.0
    torch.view_as_real(z)[0, 1] = 5.0
    torch.testing.assert_close(zd.cpu(), z)
    torch.testing.assert_close(zd.imag.cpu(), z.imag)
    # An op written for real numbers runs on the CPU for complex ones, counted, never wrong.
    before = xt.fallbacks().get("cumsum", (0, 0.0))[0]
    torch.testing.assert_close(zd.cumsum(0).cpu(), z.cumsum(0))
    assert xt.fallbacks()["cumsum"][0] == before + 1
    # Python complex numbers and complex factories.
    torch.testing.assert_close((zd * (1 - 2j)).cpu(), z * (1 - 2j))
    torch.testing.assert_close((torch.ones(2).to(DEV) * 2j).cpu(), torch.ones(2) * 2j)
    power = torch.randn(20_000, dtype=torch.complex64, device=DEV).abs().square().mean().item()
    assert abs(power - 1.0) < 0.05, power
    # int16 is a dtype of the device too.
    s = torch.tensor([-300, 7, 1000], dtype=torch.int16)
    assert (s.to(DEV) * 2).cpu().tolist() == (s * 2).tolist()


def test_linear_algebra_runs_on_the_device_and_matches_the_cpu():
    torch.manual_seed(0)
    a = torch.randn(2, 5, 5, dtype=torch.float64)
    spd = a @ a.mT + 5 * torch.eye(5, dtype=torch.float64)
    b = torch.randn(2, 5, 3, dtype=torch.float64)
    before = sum(c for c, _ in xt.fallbacks().values())
    checks = [
        (torch.linalg.solve, (a, b)), (torch.linalg.inv, (a,)), (torch.linalg.det, (a,)),
        (lambda m: torch.linalg.slogdet(m)[1], (a,)), (torch.linalg.cholesky, (spd,)),
        (torch.linalg.eigvalsh, (spd,)), (lambda m: torch.linalg.qr(m)[1].abs(), (a,)),
        (lambda m: torch.linalg.lu_factor(m)[0], (a,)),
        (torch.cholesky_solve, (b, torch.linalg.cholesky(spd))),
    ]
    for f, args in checks:
        got = f(*[t.to(DEV) for t in args]).cpu()
        torch.testing.assert_close(got, f(*args), rtol=1e-6, atol=1e-6)
    # Singular values and vectors of float32 matrices (from float64 Gram matrices); vectors are
    # defined up to sign: U diag(s) Vh must rebuild the matrix, with orthonormal U and V, also
    # where the matrix is singular.
    a32 = torch.randn(2, 6, 4)
    a32[1, :, 3] = a32[1, :, 0]
    for full in (False, True):
        u, s, vh = torch.linalg.svd(a32.to(DEV), full_matrices=full)
        u, s, vh = u.cpu(), s.cpu(), vh.cpu()
        torch.testing.assert_close(s, torch.linalg.svdvals(a32), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(u[..., :4] * s.unsqueeze(-2) @ vh, a32, rtol=1e-5, atol=1e-5)
        eye = torch.eye(u.shape[-1]).expand(2, -1, -1)
        torch.testing.assert_close(u.mT @ u, eye, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.linalg.pinv(a32.to(DEV)).cpu(), torch.linalg.pinv(a32),
                               rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(torch.linalg.matrix_rank(a32.to(DEV)).cpu(), torch.tensor([4, 3]))
    assert sum(c for c, _ in xt.fallbacks().values()) == before, xt.fallbacks()


def test_least_squares_are_cuda_s_on_the_device_and_other_drivers_the_cpu_s():
    # The default driver is CUDA's, gels (QR): tall, square and wide matrices, vectors on the
    # right, broadcast batches, against the CPU's gels in float64, results' shapes included
    # (the residuals of tall matrices; the rank and singular values empty, as on CUDA).
    g = torch.Generator().manual_seed(0)
    before = sum(c for c, _ in xt.fallbacks().values())
    for a_shape, b_shape in [((6, 3), (6, 2)), ((6, 3), (6,)), ((3, 6), (3, 2)), ((4, 4), (4, 1)),
                             ((2, 5, 3), (2, 5)), ((1, 6, 3), (4, 6, 2))]:
        a = torch.randn(a_shape, generator=g, dtype=torch.float64)
        b = torch.randn(b_shape, generator=g, dtype=torch.float64)
        want, got = torch.linalg.lstsq(a, b, driver="gels"), torch.linalg.lstsq(a.to(DEV), b.to(DEV))
        for w, d in zip(want, got):
            assert (d.shape, d.dtype) == (w.shape, w.dtype), (a_shape, b_shape)
            torch.testing.assert_close(d.cpu(), w, rtol=1e-10, atol=1e-10)
    assert sum(c for c, _ in xt.fallbacks().values()) == before, xt.fallbacks()
    # A driver for rank-deficient matrices runs on the CPU's LAPACK, with its rank.
    a = torch.randn(6, 3, generator=g, dtype=torch.float64)
    a[:, 2] = a[:, 0]
    b = torch.randn(6, 2, generator=g, dtype=torch.float64)
    got = torch.linalg.lstsq(a.to(DEV), b.to(DEV), driver="gelsd")
    torch.testing.assert_close(got.solution.cpu(), torch.linalg.lstsq(a, b, driver="gelsd").solution)
    assert got.rank.item() == 2 and xt.fallbacks()["linalg_lstsq"][0] >= 1
    with pytest.raises(RuntimeError, match=r"input.size\(-2\) should match other.size\(-2\)"):
        torch.linalg.lstsq(torch.zeros(5, 3, device=DEV), torch.zeros(4, 2, device=DEV))


def test_the_matrix_exponential_and_its_gradient_match_the_cpu_in_one_graph():
    # Scaling and squaring with a count per matrix decided on the device: a batch whose norms
    # need 0, a few and many squarings, a zero matrix and a 1 x 1 one, in float64 against torch's
    # CPU, and the gradient (torch's formula: the exponential of a block matrix). Nothing falls
    # back or is read before the result.
    g = torch.Generator().manual_seed(0)
    scales = torch.tensor([0.05, 1.0, 3.0, 40.0], dtype=torch.float64).view(4, 1, 1)
    a = torch.randn(4, 5, 5, generator=g, dtype=torch.float64) * scales
    a[0] = 0
    before = sum(c for c, _ in xt.fallbacks().values())
    for m in (a, a[1], torch.randn(3, 1, 1, generator=g, dtype=torch.float64)):
        cpu, dev = m.clone().requires_grad_(), m.to(DEV).requires_grad_()
        out_grad = torch.randn(m.shape, generator=g, dtype=torch.float64)
        xt.sync()
        reads = xp.counters()["value_reads"]
        want, got = torch.linalg.matrix_exp(cpu), torch.linalg.matrix_exp(dev)
        want.backward(out_grad), got.backward(out_grad.to(DEV))
        xt.sync()
        assert xp.counters()["value_reads"] == reads
        # Relative to each matrix's largest entry (exp(40 x) has entries of 1e40 and more).
        big = want.detach().abs().amax((-2, -1), keepdim=True)
        torch.testing.assert_close(got.detach().cpu() / big, want.detach() / big, rtol=0, atol=1e-12)
        big = cpu.grad.abs().amax((-2, -1), keepdim=True)
        torch.testing.assert_close(dev.grad.cpu() / big, cpu.grad / big, rtol=0, atol=1e-11)
    # float32, and torch.nn.utils.parametrizations.orthogonal, whose default map for square
    # weights is the matrix exponential: the same outputs as on the CPU.
    a32 = torch.randn(3, 6, 6, generator=g) * 2
    torch.testing.assert_close(torch.linalg.matrix_exp(a32.to(DEV)).cpu(), torch.linalg.matrix_exp(a32),
                               rtol=1e-5, atol=1e-5)
    torch.manual_seed(1)
    cpu = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(8, 8))
    dev = copy.deepcopy(cpu).to(DEV)
    x = torch.randn(4, 8, generator=g)
    torch.testing.assert_close(dev(x.to(DEV)).cpu(), cpu(x), rtol=1e-5, atol=1e-5)
    assert sum(c for c, _ in xt.fallbacks().values()) == before, xt.fallbacks()
    with pytest.raises(RuntimeError, match="square matrices, but they are 2 by 3"):
        torch.linalg.matrix_exp(torch.zeros(2, 3, device=DEV))


def test_orthogonal_polynomials_of_each_element_s_own_degree_match_the_cpu_in_one_loop():
    # torch.special's twelve orthogonal polynomials in float64, over x at the ends of [-1, 1]
    # (0 and 1 for the shifted ones), inside and outside it, and degrees negative, fractional
    # (truncated), NaN, infinite, small and large (the closed trigonometric forms), each
    # element its own; the NaN of an overflowing recurrence stops its loop (degree 1e8 at x = 3
    # returns at once, as on the CPU). The scalar overloads, and integers computed in float32.
    xs = torch.tensor([-1.0, 1.0, 0.0, 0.5, -0.3, 0.999, 1.5, -2.5, 0.25, 3.0], dtype=torch.float64)
    ns = torch.tensor([0.0, 1, 2, 3, 7, 9, 12, 40, -1, float("nan"), 2.7, 600, float("inf")], dtype=torch.float64)
    x, n = torch.meshgrid(xs, ns, indexing="ij")
    before = sum(c for c, _ in xt.fallbacks().values())
    names = ["chebyshev_polynomial_" + k for k in "tuvw"] + ["shifted_chebyshev_polynomial_" + k for k in "tuvw"]
    names += ["hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]
    for name in names:
        f = getattr(torch.special, name)
        want, got = f(x, n), f(x.to(DEV), n.to(DEV)).cpu()
        torch.testing.assert_close(got / want.abs().clamp(min=1), want / want.abs().clamp(min=1),
                                   rtol=0, atol=1e-12, equal_nan=True, msg=name)
        assert torch.equal(got.isinf(), want.isinf()), name
        torch.testing.assert_close(f(0.5, n[0].to(DEV)).cpu(), f(0.5, n[0]), rtol=1e-12, atol=1e-12, equal_nan=True)
        torch.testing.assert_close(f(xs.to(DEV), 5).cpu(), f(xs, 5), rtol=1e-12, atol=1e-12)
        ints = torch.tensor([1, 2, -3]), torch.tensor([3, 4, 2])
        torch.testing.assert_close(f(*[t.to(DEV) for t in ints]).cpu(), f(*ints), rtol=1e-6, atol=0)
    far = torch.special.chebyshev_polynomial_t(torch.tensor([3.0]).to(DEV), torch.tensor([1e8]).to(DEV))
    assert far.cpu().isnan().all()
    assert sum(c for c, _ in xt.fallbacks().values()) == before, xt.fallbacks()


def test_antialiased_resampling_and_its_gradient_match_the_cpu():
    # F.interpolate(..., antialias=True), torchvision's Resize on tensors: bilinear and bicubic,
    # shrinking and growing, align_corners or not, sizes or scale factors, in float64 against
    # torch's CPU, with the gradient, and nothing on the fallback.
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    before = sum(c for c, _ in xt.fallbacks().values())
    for mode in ("bilinear", "bicubic"):
        for size, align in (((5, 7), False), ((16, 20), True), ((40, 11), False)):
            x = torch.randn(2, 3, 13, 9, generator=g, dtype=torch.float64)
            cpu, dev = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
            want = F.interpolate(cpu, size=size, mode=mode, antialias=True, align_corners=align)
            got = F.interpolate(dev, size=size, mode=mode, antialias=True, align_corners=align)
            out_grad = torch.randn(want.shape, generator=g, dtype=torch.float64)
            want.backward(out_grad), got.backward(out_grad.to(DEV))
            torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(dev.grad.cpu(), cpu.grad, rtol=1e-12, atol=1e-12)
        x = torch.randn(1, 2, 20, 30, generator=g, dtype=torch.float64)
        for factor in (0.3, 1.7):
            want = F.interpolate(x, scale_factor=factor, mode=mode, antialias=True)
            got = F.interpolate(x.to(DEV), scale_factor=factor, mode=mode, antialias=True)
            torch.testing.assert_close(got.cpu(), want, rtol=1e-12, atol=1e-12)
    assert sum(c for c, _ in xt.fallbacks().values()) == before, xt.fallbacks()


def test_the_mode_is_the_cpu_s_most_frequent_value_and_its_last_index():
    # Of equally frequent values the smallest, and the index of its last occurrence, along
    # every dim, kept or not, of floats and integers full of ties, as torch's CPU kernel has it.
    g = torch.Generator().manual_seed(0)
    before = sum(c for c, _ in xt.fallbacks().values())
    for x in (torch.tensor([[3.0, 1, 3, 1, 2], [5, 5, 4, 4, 4], [2, 1, 0, 7, 9]]),
              torch.randint(0, 4, (6, 7, 9), generator=g).double(), torch.randint(-3, 3, (5, 11), generator=g),
              torch.randint(0, 3, (4, 1), generator=g), torch.tensor(3.0)):
        for dim in range(-1, x.ndim) if x.ndim else [0]:
            for keepdim in (False, True):
                want, got = torch.mode(x, dim, keepdim), torch.mode(x.to(DEV), dim, keepdim)
                assert torch.equal(got.values.cpu(), want.values), (x.shape, dim, keepdim)
                assert torch.equal(got.indices.cpu(), want.indices), (x.shape, dim, keepdim)
    assert sum(c for c, _ in xt.fallbacks().values()) == before, xt.fallbacks()


def test_a_randomized_leaky_relu_draws_its_slopes_on_the_device_and_its_gradient_uses_them():
    # In training each input at or below 0 takes a slope drawn from U(lower, upper), the others
    # pass unchanged, and the gradient is each input's own slope, as torch's CPU kernel has it;
    # in eval the slope is the middle one. The draws are the device's, so they are held to the
    # distribution, not to the CPU's values.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4000, generator=g, dtype=torch.float64)
    x[:5] = 0
    before = sum(c for c, _ in xt.fallbacks().values())
    layer = torch.nn.RReLU(0.1, 0.3)
    xd = x.to(DEV).requires_grad_()
    y = layer(xd)
    y.sum().backward()
    y, grad = y.detach().cpu(), xd.grad.cpu()
    neg = x < 0
    slopes = y[neg] / x[neg]
    assert 0.1 <= slopes.min() and slopes.max() <= 0.3
    assert abs(slopes.mean() - 0.2) < 0.01 and abs(slopes.std() - 0.2 / 12 ** 0.5) < 0.01
    assert torch.equal(y[~neg], x[~neg])
    torch.testing.assert_close(grad[neg], slopes, rtol=1e-12, atol=0)
    assert torch.equal(grad[x > 0], torch.ones(int((x > 0).sum()), dtype=torch.float64))
    assert (0.1 <= grad[:5]).all() and (grad[:5] <= 0.3).all()  # at 0 a drawn slope, as on the CPU
    in_place = x.to(DEV)
    torch.nn.functional.rrelu_(in_place, 0.1, 0.3, training=True)
    assert torch.equal(in_place.cpu()[~neg], x[~neg])
    layer.eval()
    torch.testing.assert_close(layer(x.to(DEV)).cpu(), layer(x), rtol=1e-12, atol=0)
    assert sum(c for c, _ in xt.fallbacks().values()) == before, xt.fallbacks()


def test_pools_and_3d_convolutions_match_the_cpu_with_their_gradients():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 8, 9, requires_grad=True)
    w = torch.randn(4, 3, 3, 2, 3, requires_grad=True)
    xd = x.detach().to(DEV).requires_grad_()
    wd = w.detach().to(DEV).requires_grad_()

    def net(x, w):
        y = torch.nn.functional.conv3d(x, w, stride=(2, 1, 1), padding=1)
        y = torch.nn.functional.avg_pool3d(y, 2, ceil_mode=True, count_include_pad=False)
        return torch.nn.functional.adaptive_avg_pool3d(y, (2, 3, 2)).square().sum()

    before = sum(c for c, _ in xt.fallbacks().values())
    loss, loss_d = net(x, w), net(xd, wd)
    loss.backward()
    loss_d.backward()
    torch.testing.assert_close(loss_d.cpu(), loss.detach(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(xd.grad.cpu(), x.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(wd.grad.cpu(), w.grad, rtol=1e-4, atol=1e-4)
    assert sum(c for c, _ in xt.fallbacks().values()) == before, xt.fallbacks()


def test_a_long_prefix_sum_needs_no_square_matrix():
    # 60,000 values: an n x n product of ones would be 29 GB; blocks keep it linear.
    x = torch.randn(2, 60_000, dtype=torch.float64)
    torch.testing.assert_close(torch.cumsum(x.to(DEV), 1).cpu(), torch.cumsum(x, 1))
    torch.testing.assert_close(torch.logcumsumexp(x.to(DEV), 1).cpu(), torch.logcumsumexp(x, 1))


def test_the_native_dispatcher_records_what_the_python_one_records():
    """`LazyTensor.__torch_dispatch__` is native for the common case and hands the rest to the
    Python dispatcher, which can do it all. The same program through each gives the same values
    and the same graph (compiled once, then a cache hit)."""
    from xlaprof.torch import _dispatch, _tensor

    def program(x, w, z):
        h = torch.cat([x * 2.0 + 1, x.relu(), x - x.mean()], dim=1)  # a list of tensors, scalars
        top, where = h.max(dim=1)  # a tuple result
        total = h.sum(dim=[0, 1]) + (h @ w).tanh().mean()  # a list of ints
        moved = h.view(-1, 2).t().contiguous() * 3  # views, a clone of a view
        moved.add_(h.view(-1, 2).t()[0:1], alpha=2)  # an in-place op with a keyword, into a view
        bits = (h > 0.5) & (x.sum(1, keepdim=True) > 0)  # booleans
        acc = x.clone()
        acc.mul_(2.0).add_(x, alpha=-0.5)  # in-place ops on a tensor that owns its value
        buf = x.clone()  # writes through views of views reach it
        buf.view(2, -1).t().unsqueeze(0).mul_(3.0)
        buf.permute(-1, 0).transpose(-1, 0).detach().add_(1.0)
        return [top, where, total, moved, bits, z * 2, h.add(x.repeat(1, 3), alpha=0.5), acc, buf]

    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(4, 6, generator=g), torch.randn(18, 3, generator=g)
    z = torch.randn(3, dtype=torch.complex64, generator=g)  # complex: the Python dispatcher's
    expected = program(x, w, z)

    native = _tensor.LazyTensor.__dict__["__torch_dispatch__"]
    # The Python dispatcher as `__torch_dispatch__`, compiled as the package's own code: frames of
    # the package are not the user's, so ops are located at the program's lines either way.
    scope = {"dispatch": _dispatch.dispatch}
    exec(compile("def python(cls, func, types, args=(), kwargs=None):\n"
                 "    return dispatch(func, args, kwargs or {})\n", _dispatch.__file__, "exec"), scope)
    python = classmethod(scope["python"])
    program(x.to(DEV), w.to(DEV), z.to(DEV))  # each op's route is found on its first call (and
    # the native table filled); its results are dropped unread, so nothing of it compiles
    runs = {}
    try:
        for name, route in (("native", native), ("python", python)):
            _tensor.LazyTensor.__torch_dispatch__ = route
            _dispatch._ROUTES.clear()
            xt.sync()
            before = xp.counters()["compiles"]
            out = program(x.to(DEV), w.to(DEV), z.to(DEV))
            xt.sync()
            runs[name] = ([t.cpu() for t in out], xp.counters()["compiles"] - before, set(_dispatch._ROUTES))
    finally:
        _tensor.LazyTensor.__torch_dispatch__ = native
    for values, _, _ in runs.values():
        for got, want in zip(values, expected):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert (runs["native"][1], runs["python"][1]) == (1, 0)
    # The native dispatcher took the plain ops (views, keywords, in-place forms among them) and
    # handed on the one with a complex tensor (`z * 2`) and those whose route is of another kind
    # (host transfers).
    aten = torch.ops.aten
    plain = {aten.cat.default, aten.relu.default, aten.max.dim, aten.sum.dim_IntList, aten.view.default,
             aten.t.default, aten.add.Tensor, aten.add_.Tensor}
    assert plain <= runs["python"][2] and not plain & runs["native"][2]
    assert runs["native"][2] == {aten.mul.Tensor, aten._to_copy.default, aten.copy_.default}


def test_the_all_true_checks_of_torch_asserts_are_lowered():
    # `_is_all_true` is how `torch.distributions` validates its arguments.
    before = dict(xt.fallbacks())
    for values in ([True, True], [True, False], [False, False]):
        t = torch.tensor(values)
        assert torch.ops.aten._is_all_true(t.to(DEV)).item() == torch.ops.aten._is_all_true(t).item()
        assert torch.ops.aten._is_any_true(t.to(DEV)).item() == torch.ops.aten._is_any_true(t).item()
    assert xt.fallbacks() == before


def test_complex_padding_resize_as_and_rrelu_in_eval_run_on_the_device():
    before = dict(xt.fallbacks())
    z = torch.randn(3, 4, dtype=torch.complex64)
    for pad, v in (((1, 2), 0.0), ((1, 1, 2, 0), 1.5), ((-1, 2), 0.0)):
        torch.testing.assert_close(torch.nn.functional.pad(z.to(DEV), pad, value=v).cpu(),
                                   torch.nn.functional.pad(z, pad, value=v))
    torch.testing.assert_close(torch.fft.fft2(z.to(DEV), s=(5, 6)).cpu(), torch.fft.fft2(z, s=(5, 6)))
    x, template = torch.randn(2, 3), torch.empty(3, 2)
    assert x.to(DEV).resize_as_(template.to(DEV)).shape == (3, 2)
    y = torch.randn(4, 5)
    torch.testing.assert_close(torch.nn.functional.rrelu(y.to(DEV), training=False).cpu(),
                               torch.nn.functional.rrelu(y, training=False))
    assert xt.fallbacks() == before


def test_tolist_reads_the_values():
    x = torch.arange(6.0).reshape(2, 3)
    assert x.to(DEV).tolist() == x.tolist()
    assert (x.to(DEV)[1, 2] * 2).tolist() == 10.0


def test_a_checkpoint_saved_from_the_device_resumes_training_exactly(tmp_path):
    # torch.save of a state_dict (its tensors are detached views) and of an optimizer's state;
    # torch.load, weights-only as by default, puts them back on the device.
    torch.manual_seed(4)
    model = mlp(4).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 20).to(DEV), torch.randint(0, 5, (8,)).to(DEV)

    def step(model, opt):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        xt.step()
        return loss.item()

    step(model, opt), step(model, opt)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp_path / "ckpt.pt")
    values = {name: t.cpu() for name, t in model.state_dict().items()}
    saved = torch.load(tmp_path / "ckpt.pt")
    assert {t.device for t in saved["model"].values()} == {DEV}
    restored = mlp(5).to(DEV)
    restored.load_state_dict(saved["model"])
    restored_opt = torch.optim.AdamW(restored.parameters(), lr=0.01)
    restored_opt.load_state_dict(saved["opt"])
    assert step(restored, restored_opt) == step(model, opt)
    on_cpu = torch.load(tmp_path / "ckpt.pt", map_location="cpu")["model"]
    assert {t.device.type for t in on_cpu.values()} == {"cpu"}
    for name, t in values.items():
        torch.testing.assert_close(on_cpu[name], t, rtol=0, atol=0)


def test_bfloat16_reductions_and_normalizations_are_as_accurate_as_torch_s():
    # torch's CPU and CUDA kernels sum, normalize, softmax, scan and activate half-precision
    # tensors in float32 and round once; computed in bfloat16 a layer norm over 512 values was off by 9e-3
    # of its size where torch's is off by 3e-3 (2.5x to 5x for sums, variances, softmax and its
    # backward, group norm, cumsum). Each op's error against float64 must be torch's own.
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    x = (torch.randn(64, 512, generator=g) * 3).bfloat16()
    gy = torch.randn(64, 512, generator=g).bfloat16()
    w, b = torch.randn(512, generator=g).bfloat16(), torch.randn(512, generator=g).bfloat16()
    sm, lsm = torch.softmax(x.float(), -1).bfloat16(), torch.log_softmax(x.float(), -1).bfloat16()
    depthwise, k3 = torch.randn(16, 1, 7, 7, generator=g).bfloat16(), torch.randn(4, 8, 3, 3, 3, generator=g).bfloat16()
    aten = torch.ops.aten

    def on(t, like):  # t beside like: on its device, and in float64 where like is
        return t.to(like.device, like.dtype if t.is_floating_point() and like.dtype == torch.float64 else t.dtype)

    cases = {
        "sum": lambda x: x.sum(-1), "mean": lambda x: x.mean(-1), "var": lambda x: x.var(-1),
        "std": lambda x: x.std(-1), "var_mean": lambda x: torch.var_mean(x, -1)[0],
        "norm": lambda x: x.norm(dim=-1), "softmax": lambda x: torch.softmax(x, -1),
        "log_softmax": lambda x: torch.log_softmax(x, -1), "logsumexp": lambda x: torch.logsumexp(x, -1),
        "layer_norm": lambda x: F.layer_norm(x, (512,), on(w, x), on(b, x)),
        "group_norm": lambda x: F.group_norm(x.view(64, 8, 64), 4),
        "cumsum": lambda x: x.cumsum(-1), "prod": lambda x: (x[:, :64] / 8 + 1).prod(-1),
        "embedding_bag": lambda x: F.embedding_bag(on(torch.arange(64) % 64, x), x, on(torch.tensor([0, 10, 40]), x)),
        "softmax_backward": lambda x: aten._softmax_backward_data(on(gy, x), on(sm, x), -1, x.dtype),
        "log_softmax_backward": lambda x: aten._log_softmax_backward_data(on(gy, x), on(lsm, x), -1, x.dtype),
        # (torch decomposes these two above the device: they are sent below autograd to theirs.)
        "silu_backward": lambda x: aten.silu_backward(on(gy, x), x),
        "mish_backward": lambda x: aten.mish_backward(on(gy, x), x),
        "gelu_backward": lambda x: aten.gelu_backward(on(gy, x), x),
        # Convolutions written as sums: a depthwise one over its 49 taps, a 3-d one over planes.
        "depthwise_conv2d": lambda x: F.conv2d(x.view(4, 16, 16, 32), on(depthwise, x), padding=3, groups=16),
        "conv3d": lambda x: F.conv3d(x.view(4, 8, 16, 16, 4), on(k3, x)),
        # Elementwise ops of several steps, which torch computes in float32 (its opmath type).
        "silu": F.silu, "exp2": torch.exp2, "log2": lambda x: (x.abs() + 0.1).log2(),
        "log10": lambda x: (x.abs() + 0.1).log10(), "sinc": torch.sinc, "asinh": torch.asinh,
        "hypot": lambda x: torch.hypot(x, on(gy, x)), "logaddexp2": lambda x: torch.logaddexp2(x, on(gy, x)),
        "addcmul": lambda x: torch.addcmul(x, x, on(gy, x), value=0.5), "renorm": lambda x: x.renorm(2, 0, 5.0),
    }
    for name, f in cases.items():
        truth = f(x.double())
        if name == "softmax_backward":
            truth = sm.double() * (gy.double() - (gy.double() * sm.double()).sum(-1, keepdim=True))
        elif name == "log_softmax_backward":
            truth = gy.double() - lsm.double().exp() * gy.double().sum(-1, keepdim=True)
        got = f(x.to(DEV))
        assert got.dtype == torch.bfloat16, name
        scale = truth.abs().max()
        theirs = (f(x).double() - truth).abs().max() / scale
        ours = (got.cpu().double() - truth).abs().max() / scale
        assert ours <= 1.2 * theirs + 1e-4, f"{name}: off by {ours:.2e} of its size, torch's CPU by {theirs:.2e}"
    # A float32 tensor beside a bfloat16 one makes the result float32, computed as float32 from
    # the start (exp(x ln 2)'s product rounded to bfloat16 first, `logaddexp2` was off by 4e-3):
    # torch's inputs promoted to their common dtype, as CUDA's kernels take them. (torch 2.15's
    # CPU gelu_backward of a float32 gradient and a bfloat16 input rounds the gradient to
    # bfloat16 first, 1.6e-2 off the promoted result; CUDA's computes in the common float32.)
    y = torch.randn(64, 512, generator=g)
    for f in (torch.hypot, torch.logaddexp2, lambda a, b: torch.addcmul(a, a, b), lambda a, b: aten.gelu_backward(b, a),
              lambda a, b: aten.silu_backward(b, a)):
        got = f(x.to(DEV), y.to(DEV))
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.cpu(), f(x.float(), y), rtol=1e-5, atol=1e-5)
    # A bfloat16 tensor times or over a host scalar is computed with the scalar unrounded and
    # rounded once, as torch does (rounded to bfloat16 first, `x * 1.1284` differed in 56 % of
    # the elements); an added scalar torch rounds first. `add(a, b, alpha=)` is CUDA's float32
    # `a + alpha * b`, rounded once.
    c = 1.1283791670955126
    for f in (lambda t: t * c, lambda t: t / c, lambda t: c * t, lambda t: t + c, lambda t: t - c,
              lambda t: t.clone().mul_(c)):
        assert torch.equal(f(x.to(DEV)).cpu(), f(x))
    got = torch.add(x.to(DEV), gy.to(DEV), alpha=c).cpu()
    assert torch.equal(got, (x.float() + c * gy.float()).bfloat16())
    # half_to_float keeps softmax's float32 result, and an op given its result's dtype returns it.
    assert aten._softmax(x.to(DEV), -1, True).dtype == torch.float32
    for f in (lambda t: t.cumsum(1, dtype=torch.float32), lambda t: t[:, :8].prod(1, dtype=torch.float32),
              lambda t: torch.linalg.vector_norm(t, dtype=torch.float32)):
        torch.testing.assert_close(f(x.to(DEV)).cpu(), f(x), rtol=1e-5, atol=1e-5)


def test_autocast_runs_matrix_products_in_bfloat16_and_keeps_float32_where_torch_does():
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    ad, bd = a.to(DEV), b.to(DEV)
    with torch.autocast(device_type="xlaprof", dtype=torch.bfloat16):
        product = ad @ bd  # a lower-precision op
        soft = torch.softmax(product, dim=1)  # float32, as on GPUs
        mixed = torch.addcmul(soft, product, product)  # the widest of its operands
        wide = ad.double() @ bd.double()  # float64 is never cast
    assert (product.dtype, soft.dtype, mixed.dtype, wide.dtype) == (
        torch.bfloat16, torch.float32, torch.float32, torch.float64)
    torch.testing.assert_close(product.cpu(), a.bfloat16() @ b.bfloat16())
    torch.testing.assert_close(soft.cpu(), torch.softmax((a.bfloat16() @ b.bfloat16()).float(), dim=1),
                               rtol=2e-2, atol=1e-3)  # the products' roundings may differ by an ulp

    # Training under autocast: the same losses as torch's CPU autocast, within bfloat16's precision.
    losses = {}
    for device in (torch.device("cpu"), DEV):
        model = mlp(6).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
        g = torch.Generator().manual_seed(7)
        losses[device.type] = []
        for _ in range(4):
            x, y = torch.randn(16, 20, generator=g).to(device), torch.randint(0, 5, (16,), generator=g).to(device)
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            if device == DEV:
                xt.step()
            losses[device.type].append(loss.item())
    assert losses["xlaprof"] == pytest.approx(losses["cpu"], rel=2e-2), losses


@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
def test_a_gradient_scaler_scales_skips_and_steps_as_on_the_cpu_without_a_fallback(fused):
    # Mixed-precision training on CUDA: GradScaler unscales the gradients (or hands its scale to
    # a fused optimizer), skips the steps whose gradients are not finite (two planted here), and
    # backs its scale off or grows it. The scales, the step counts and the parameters against the
    # CPU's own scaler, twelve steps, with no op on the CPU fallback and no compile after warm-up.
    before = dict(xt.fallbacks())
    runs = {}
    for device in (torch.device("cpu"), DEV):
        model = mlp(4)
        if device == DEV:
            model.to(DEV)
        opt = torch.optim.AdamW(model.parameters(), lr=0.01, fused=fused)
        scaler = torch.amp.GradScaler(device.type, init_scale=2.0 ** 10, growth_interval=3)
        g = torch.Generator().manual_seed(5)
        scales, compiles = [], []
        for step in range(12):
            x, y = torch.randn(16, 20, generator=g).to(device), torch.randint(0, 5, (16,), generator=g).to(device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            if step in (4, 8):
                loss = loss * float("inf")  # an overflow, as in float16
            scaler.scale(loss).backward()
            if not fused:
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            if device == DEV:
                xt.step()
            scales.append(scaler.get_scale())
            compiles.append(xp.counters()["compiles"])
        counts = [opt.state[p]["step"].item() for p in model.parameters()]
        runs[device.type] = (scales, counts, [p.detach().cpu() for p in model.parameters()], compiles)
    (scales, counts, params, _), (scales_d, counts_d, params_d, compiles) = runs["cpu"], runs["xlaprof"]
    assert scales_d == scales and scales[4] == scales[3] / 2, scales_d
    assert counts_d == counts == [10.0] * len(counts), "the two skipped steps are not counted"
    for p, q in zip(params, params_d):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6)
    assert xt.fallbacks() == before
    # Warm-up, then the planted overflows (a graph of their own): nothing else compiles.
    assert compiles[-1] == compiles[9], compiles


@pytest.mark.parametrize("layer", [
    lambda: torch.nn.LSTM(6, 5, num_layers=2, bidirectional=True, batch_first=True),
    lambda: torch.nn.LSTM(6, 5, proj_size=3),
    lambda: torch.nn.GRU(6, 5, num_layers=2),
    lambda: torch.nn.RNN(6, 5, nonlinearity="relu"),
    lambda: torch.nn.LSTMCell(6, 5),
    lambda: torch.nn.GRUCell(6, 5),
], ids=["lstm", "lstm-proj", "gru", "rnn", "lstm-cell", "gru-cell"])
def test_recurrent_layers_match_the_cpu_with_their_gradients(layer):
    # On an accelerator torch's LSTM and GRU cells call fused GPU kernels, which no CPU kernel
    # backs: the bridge runs them as torch's own decompositions.
    torch.manual_seed(8)
    cpu, dev = layer(), layer()
    dev.load_state_dict(cpu.state_dict())
    dev = dev.to(DEV)
    x = torch.randn(4, 3, 6)
    x = x[0] if isinstance(cpu, torch.nn.RNNCellBase) else x
    before = sum(c for c, _ in xt.fallbacks().values())

    def loss(module, x):
        out = module(x)
        out = out[0] if isinstance(out, tuple) else out
        return out.square().sum()

    loss(cpu, x).backward()
    loss_d = loss(dev, x.to(DEV))
    loss_d.backward()
    torch.testing.assert_close(loss_d.cpu(), loss(cpu, x).detach(), rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-5, msg=name)
    assert sum(c for c, _ in xt.fallbacks().values()) == before, xt.fallbacks()


@pytest.mark.parametrize("kind", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN,
                                  functools.partial(torch.nn.RNN, nonlinearity="relu")],
                         ids=["lstm", "gru", "rnn-tanh", "rnn-relu"])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_recurrent_layers_are_the_cpus_in_float64_with_every_gradient(kind, bidirectional, batch_first, bias):
    # The engine's loops over time and back, beside torch's CPU kernels in float64 (a wrong term
    # cannot hide in rounding there): the outputs, the final states, and the gradients of the
    # input, the initial states and every weight, from a loss of all of them.
    torch.manual_seed(3)
    make = lambda: kind(4, 6, num_layers=2, bidirectional=bidirectional, batch_first=batch_first,  # noqa: E731
                        bias=bias).double()
    cpu, dev = make(), make()
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    x = torch.randn(3, 7, 4, dtype=torch.float64)
    x = x if batch_first else x.transpose(0, 1).contiguous()
    lstm = kind is torch.nn.LSTM
    states = [torch.randn((4 if bidirectional else 2), 3, 6, dtype=torch.float64) for _ in range(2 if lstm else 1)]
    out_grad = torch.randn(*x.shape[:2], 12 if bidirectional else 6, dtype=torch.float64)
    before = sum(c for c, _ in xt.fallbacks().values())
    grads = []
    for module, move in ((cpu, lambda t: t), (dev, lambda t: t.to(DEV))):
        inputs = [move(t).detach().requires_grad_() for t in (x, *states)]
        out, final = module(inputs[0], tuple(inputs[1:]) if lstm else inputs[1])
        finals = list(final) if lstm else [final]
        loss = (out * move(out_grad)).sum() + 0.3 * finals[0].sum() + sum(f.square().sum() for f in finals[1:])
        loss.backward()
        grads.append([t.detach().cpu() for t in (out, *finals)] + [t.grad.cpu() for t in inputs]
                     + [p.grad.cpu() for p in module.parameters()])
    for want, got in zip(*grads):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert sum(c for c, _ in xt.fallbacks().values()) == before, xt.fallbacks()


@pytest.mark.parametrize("kind", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
def test_recurrent_layers_over_time_are_loops_not_graphs_that_grow_with_the_steps(kind):
    # Unrolled, XLA fused the state's gradient chain into every step's kernel: a 50-step LSTM
    # compiled for 50 s, growing with the square of the steps. As a loop, the graph is the same
    # at 400 steps as at 40.
    from xlaprof.torch._tensor import value

    sizes = {}
    for steps in (40, 400):
        torch.manual_seed(0)
        layer = kind(8, 16).to(DEV)
        out, _ = layer(torch.randn(steps, 2, 8).to(DEV))
        out.sum().backward()
        sizes[steps] = value(layer.weight_hh_l0.grad).graph_size
        xt.sync()
    assert sizes[40] == sizes[400], sizes


@pytest.mark.parametrize("kind", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
def test_dropout_between_recurrent_layers_is_applied_in_training_as_on_the_cpu(kind):
    # torch's decompositions of the layers drop it: a model trained with it on the device
    # trained without it, silently. Dropout of 1 zeroes the first layer's output, which makes
    # the second's from its biases alone, on either side, with no draw to differ.
    torch.manual_seed(5)
    cpu = kind(4, 5, num_layers=2, dropout=1.0)
    dev = kind(4, 5, num_layers=2, dropout=1.0)
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    x = torch.randn(6, 3, 4)
    for mode in ("train", "eval"):
        getattr(cpu, mode)()
        getattr(dev, mode)()
        want, got = cpu(x)[0], dev(x.to(DEV))[0].cpu()
        torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-6, msg=mode)
    cpu.train()
    assert not torch.allclose(cpu(x)[0], cpu.eval()(x)[0]), "dropout of 1 changes the output in training"


def test_packed_sequences_train_as_on_the_cpu_with_their_batch_sizes_on_the_cpu():
    # NLP code packs padded batches for its recurrent layers; PackedSequence refuses batch sizes
    # on any device but the CPU, as CUDA keeps them. Unsorted lengths, a two-layer bidirectional
    # LSTM, pad_packed_sequence, and pack_sequence into a GRU: five SGD steps beside the CPU.
    class Tagger(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(4, 6, num_layers=2, bidirectional=True, batch_first=True)
            self.gru = torch.nn.GRU(12, 5)
            self.out = torch.nn.Linear(5, 2)

        def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            assert packed.batch_sizes.device.type == "cpu"
            out, (h, c) = self.lstm(packed)
            out, back = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
            assert back.tolist() == lengths.tolist()
            again = torch.nn.utils.rnn.pack_sequence([out[0, :5], out[2, :4], out[1, :3]])
            out, _ = self.gru(again)
            out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, total_length=6)
            return self.out(out.sum(0)) + h.sum(0).sum(-1, keepdim=True) + c.mean()

    torch.manual_seed(0)
    cpu = Tagger()
    dev = Tagger()
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (cpu, dev)]
    before = dict(xt.fallbacks())
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([5, 3, 4])
    for step in range(5):
        x = torch.randn(3, 5, 4, generator=g)
        losses = []
        for model, opt, move in ((cpu, opts[0], lambda t: t), (dev, opts[1], lambda t: t.to(DEV))):
            loss = model(move(x), lengths).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        xt.step()
        assert losses[1] == pytest.approx(losses[0], rel=1e-5), step
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.cpu(), p.detach(), rtol=1e-5, atol=1e-6, msg=name)
    assert xt.fallbacks() == before
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        torch.nn.utils.rnn.pack_padded_sequence(torch.zeros(3, 5, 4, device=DEV), lengths, batch_first=True)


def test_a_pool_wider_than_its_input_is_a_global_pool_of_its_input_size(tmp_path):
    # Hugging Face's EfficientNet pools its last map with `AvgPool2d(1280, ceil_mode=True)`. The
    # window is cut to the input: padded to the whole window, this step's program planned a
    # 2x64x1280x1280 array (800 MB); its values and gradients are the CPU's either way.
    import json

    pool = torch.nn.AvgPool2d(1280, ceil_mode=True)
    x = torch.randn(2, 64, 7, 7, requires_grad=True)
    expected = pool(x)
    (grad,) = torch.autograd.grad(expected.square().sum(), x)
    xd = x.detach().to(DEV).requires_grad_()
    with xp.profile() as p:
        got = pool(xd)
        (grad_d,) = torch.autograd.grad(got.square().sum(), xd)
        xt.sync()
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad_d.cpu(), grad, rtol=1e-5, atol=1e-7)
    p.export(str(tmp_path / "pool.json"), "json")
    graphs = json.loads((tmp_path / "pool.json").read_text())["profile"]["graphs"]
    temp = max(g["memory"]["temp_bytes"] for g in graphs.values() if g.get("memory"))
    assert temp < 1_000_000, f"the program plans {temp} bytes of temporaries"


def test_weight_norm_trains_on_the_device_without_a_fallback():
    # wav2vec2's positional convolution: torch has no decomposition of the weight norm's backward.
    torch.manual_seed(0)
    cpu = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 4, 3, padding=1), dim=2)
    dev = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 4, 3, padding=1), dim=2)
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    before = dict(xt.fallbacks())
    x = torch.randn(2, 4, 9)
    cpu(x).square().sum().backward()
    dev(x.to(DEV)).square().sum().backward()
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-5, atol=1e-5, msg=name)
    assert xt.fallbacks() == before


def test_grouped_mm_forms_and_their_gradients_match_the_cpu_without_a_fallback():
    # transformers 5's mixture-of-experts layers call torch._grouped_mm (rows split among the
    # experts by the cumulative offsets); its backward calls it again in the other forms. The
    # offsets are data: an empty group and a last group that ends at the last row included.
    torch.manual_seed(0)
    rows = torch.tensor([2, 2, 7], dtype=torch.int32)
    inner = torch.tensor([8, 8, 16], dtype=torch.int32)
    forms = {
        "2d x 3d": (torch.randn(7, 8), torch.randn(3, 16, 8), rows),  # weights passed transposed
        "3d x 3d": (torch.randn(3, 8, 8), torch.randn(3, 8, 16), None),
        "3d x 2d": (torch.randn(3, 8, 8), torch.randn(8, 16), inner),
        "2d x 2d": (torch.randn(8, 16), torch.randn(16, 8), inner),
    }
    before = dict(xt.fallbacks())
    for name, (a, b, offs) in forms.items():
        results = []
        for device in ("cpu", DEV):
            a_, b_ = (t.detach().to(device).requires_grad_() for t in (a, b))
            out = torch._grouped_mm(a_, b_.transpose(-2, -1) if name == "2d x 3d" else b_,
                                    offs=None if offs is None else offs.to(device))
            out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(device))
            results.append([t.detach().cpu() for t in (out, a_.grad, b_.grad)])
        for cpu, dev in zip(*results):
            torch.testing.assert_close(dev, cpu, rtol=1e-5, atol=1e-5, msg=name)
    assert xt.fallbacks() == before


FUSED = {
    "AdamW": lambda p: torch.optim.AdamW(p, lr=1e-2, fused=True),
    "Adam, AMSGrad, weight decay": lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.1, amsgrad=True, fused=True),
    "AdamW, tensor lr": lambda p: torch.optim.AdamW(p, lr=torch.tensor(1e-2), fused=True),
    "SGD, Nesterov momentum": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, nesterov=True, weight_decay=0.01,
                                                         fused=True),
}


@pytest.mark.parametrize("name", FUSED)
def test_fused_optimizers_run_on_the_device_and_compile_once(name):
    """`fused=True` (Hugging Face Trainer's default AdamW) calls one fused kernel per step, which
    torch has for CUDA and the CPU only: on the device it is torch's multi-tensor step, with the
    step counts on the device. Twelve steps beside the CPU's fused kernel: equal losses and
    parameters, no fallback, no compile after the optimizer's state exists."""
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    dev = copy.deepcopy(cpu).to(DEV)
    opt_cpu, opt_dev = FUSED[name](cpu.parameters()), FUSED[name](dev.parameters())
    before = dict(xt.fallbacks())
    g = torch.Generator().manual_seed(1)
    compiles = []
    for _ in range(12):
        x, y = torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g)
        losses = []
        for model, opt, move in ((cpu, opt_cpu, lambda t: t), (dev, opt_dev, lambda t: t.to(DEV))):
            loss = torch.nn.functional.mse_loss(model(move(x)), move(y))
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss)
        xt.step()
        compiles.append(xp.counters()["compiles"])
        assert losses[1].item() == pytest.approx(losses[0].item(), rel=1e-5)
    assert xt.fallbacks() == before
    assert compiles[2:] == [compiles[2]] * 10, compiles
    for p, q in zip(cpu.parameters(), dev.parameters()):
        torch.testing.assert_close(q.cpu(), p.detach(), rtol=1e-5, atol=1e-6)


def test_nonzero_reads_only_its_count_and_matches_the_cpu():
    # DeBERTa's classification loss calls nonzero: the count is read (a sync, as on CUDA), the
    # indices come from the device, and nothing runs on the CPU fallback.
    before = dict(xt.fallbacks())
    cases = [torch.tensor([0, 3, 0, 5]), torch.tensor([[1.0, 0, 2], [0, 0, 3]]), torch.zeros(3, 2),
             torch.tensor(2.0), torch.randint(0, 2, (2, 3, 4)).bool(), torch.empty(0, 3)]
    for t in cases:
        torch.testing.assert_close(torch.nonzero(t.to(DEV)).cpu(), torch.nonzero(t))
        for got, want in zip(t.to(DEV).nonzero(as_tuple=True), t.nonzero(as_tuple=True)):
            torch.testing.assert_close(got.cpu(), want)
    assert xt.fallbacks() == before


def test_a_backward_before_the_import_does_not_stop_the_devices_backward():
    # torch's autograd engine makes its per-device threads and queues at its first backward,
    # once: a device registered later had none, and its first backward failed with an internal
    # assert. The device's backward runs on the calling thread (`_device.py`), which needs none:
    # it runs, and its gradients are the CPU's.
    code = (
        "import torch\n"
        "x = torch.randn(3, requires_grad=True); (x * 2).sum().backward()\n"
        "import xlaprof.torch as xt\n"
        "torch.manual_seed(0)\n"
        "m = torch.nn.Linear(3, 2)\n"
        "x = torch.randn(4, 3)\n"
        "(m(x) ** 2).sum().backward()\n"
        "cpu = m.weight.grad.clone(); m.zero_grad()\n"
        "m.to(xt.device())\n"
        "(m(x.to(xt.device())) ** 2).sum().backward()\n"
        "print(torch.allclose(m.weight.grad.cpu(), cpu, rtol=1e-5, atol=1e-6))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True", run.stdout


def test_reshape_infers_a_minus_one_by_torchs_rule_in_one_place():
    # The native dispatcher's views, the view lowerings and the engine ask one function
    # (`xlaprof_core::shape::infer_dims`): a -1 beside a 0 is ambiguous, as torch says.
    dev = xt.device()
    for make in (lambda t: t.reshape(0, -1), lambda t: t.view(0, -1), lambda t: t.reshape(-1, 0)):
        with pytest.raises(RuntimeError):
            make(torch.zeros(0, 3))
        with pytest.raises(xp.ShapeError, match=r"cannot reshape f32\[0,3\] \(0 elements\)"):
            make(torch.zeros(0, 3).to(dev))
    x = torch.arange(12.0)
    for size in ((3, -1), (-1, 6), (2, -1, 3), (12,), (-1,)):
        assert x.to(dev).reshape(*size).cpu().tolist() == x.reshape(*size).tolist()
        assert x.to(dev).view(*size).shape == x.view(*size).shape
    with pytest.raises(xp.ShapeError, match=r"cannot reshape f32\[12\] \(12 elements\) to \[5, -1\]"):
        x.to(dev).view(5, -1)


def _ctc_case(targets_1d: bool, lengths_on_device: bool, reduction: str, zero_infinity: bool, blank: int) -> None:
    """One CTC loss and its gradient on the device beside the CPU: every length kind torch
    allows (full, short, zero input or target, a target too long for its input: inf), repeated
    labels (which need a blank between them), in float64 so that a wrong term cannot hide."""
    g = torch.Generator().manual_seed(7)
    steps, batch, classes, width = 9, 6, 5, 4
    log_probs = torch.randn(steps, batch, classes, generator=g, dtype=torch.float64).log_softmax(2)
    labels = [c for c in range(classes) if c != blank]
    targets = torch.tensor(labels)[torch.randint(0, len(labels), (batch, width), generator=g)]
    targets[1, 1] = targets[1, 0]  # a repeat
    input_lengths = [9, 7, 0, 0, 3, 9]
    target_lengths = [4, 2, 0, 3, 3, 0]  # row 4: three labels in three steps, row 3: no steps
    if targets_1d:
        targets = torch.cat([targets[b, :n] for b, n in enumerate(target_lengths)])
    cpu = log_probs.clone().requires_grad_()
    dev = log_probs.to(DEV).requires_grad_()
    lengths = (torch.tensor(input_lengths), torch.tensor(target_lengths))
    args = dict(blank=blank, reduction=reduction, zero_infinity=zero_infinity)
    want = torch.nn.functional.ctc_loss(cpu, targets, *(lengths if lengths_on_device else (input_lengths, target_lengths)), **args)
    on = (lengths[0].to(DEV), lengths[1].to(DEV)) if lengths_on_device else (input_lengths, target_lengths)
    got = torch.nn.functional.ctc_loss(dev, targets.to(DEV), *on, **args)
    out_grad = torch.randn(want.shape, generator=g, dtype=torch.float64)
    want.backward(out_grad)
    got.backward(out_grad.to(DEV))
    case = (targets_1d, lengths_on_device, reduction, zero_infinity, blank)
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-10, atol=1e-10, equal_nan=True, msg=str(case))
    torch.testing.assert_close(dev.grad.cpu(), cpu.grad, rtol=1e-10, atol=1e-10, equal_nan=True, msg=str(case))


@pytest.mark.parametrize("targets_1d", [False, True])
@pytest.mark.parametrize("lengths_on_device", [False, True])
def test_the_ctc_loss_and_its_gradient_run_on_the_device_as_on_the_cpu(targets_1d, lengths_on_device):
    before = sum(c for c, _ in xt.fallbacks().values())
    for reduction, zero_infinity, blank in (("none", False, 0), ("sum", True, 0), ("mean", True, 3)):
        _ctc_case(targets_1d, lengths_on_device, reduction, zero_infinity, blank)
    assert sum(c for c, _ in xt.fallbacks().values()) == before, xt.fallbacks()


def test_a_ctc_loss_is_one_loop_and_its_lengths_on_the_device_are_no_sync():
    from xlaprof.torch._tensor import value

    # Padded targets with lengths on the device (as transformers' CTC heads compute them) read
    # nothing: the step is one sync. Concatenated ones read their longest target, once per step
    # (the backward takes it from the forward's alphas). A long input is a loop, not unrolled:
    # the graph is the same size at 400 steps as at 40.
    torch.manual_seed(0)
    sizes = {}
    for steps in (40, 400):
        head = torch.nn.Linear(8, 6).to(DEV)
        x = torch.randn(steps, 3, 8).to(DEV)
        targets = torch.randint(1, 6, (3, 5)).to(DEV)
        lengths = torch.tensor([steps, steps - 3, 20]).to(DEV), torch.tensor([5, 2, 4]).to(DEV)
        xt.sync()
        reads = xp.counters()["value_reads"]
        loss = torch.nn.functional.ctc_loss(head(x).log_softmax(2), targets, *lengths)
        loss.backward()
        sizes[steps] = value(head.weight.grad).graph_size
        xt.sync()
        assert xp.counters()["value_reads"] == reads
        assert torch.isfinite(head.weight.grad.cpu()).all()
        flat = torch.cat([targets[0], targets[1, :2], targets[2, :4]])
        reads = xp.counters()["value_reads"]
        torch.nn.functional.ctc_loss(head(x).log_softmax(2), flat, *lengths).backward()
        xt.sync()
        assert xp.counters()["value_reads"] == reads + 1
    assert sizes[40] == sizes[400], sizes


def test_the_demo_trains_on_the_device_and_its_report_finds_the_two_planted_mistakes(tmp_path):
    """samples/torch/demo.py, what `bash scripts/demo.sh` runs: the ragged last batch is a
    recompile explained by the batch's shape, the loss read mid-step a hidden sync at its line,
    and the saved profile opens."""
    import subprocess
    import sys

    demo = pathlib.Path(__file__).parents[2] / "samples" / "torch" / "demo.py"
    out = tmp_path / "demo.xlaprof"
    run = subprocess.run([sys.executable, str(demo), "--out", str(out)], capture_output=True, text=True,
                         timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    text = run.stdout
    assert "Findings, by time lost" in text, text
    assert "Where to look next:" in text and f"view {out}" in text, text
    import xlaprof as xp

    # The planted mistakes among all the findings: the demo prints the first three by time lost,
    # and on a loaded machine its compiles can pass the slow-compile threshold and rank first.
    saved = xp.load(str(out))
    findings = saved.report()
    assert "[recompile]" in findings and "changed from f32[64,784] to f32[40,784]" in findings, findings
    assert "drop it (`DataLoader(drop_last=True)`)" in findings, findings
    assert "[hidden sync]" in findings and "a value read at demo.py:55 in train" in findings, findings
    kinds = [d["kind"] for d in saved.diagnostics()]
    assert "Recompile" in kinds and "HiddenSync" in kinds, kinds


VIEWS = [
    "x[1]", "x[:, 2:5]", "x[..., ::2]", "x.transpose(0, 2)", "x.permute(2, 0, 1)",
    "x.transpose(1, 2)[1]", "x[1].t()", "x[1:3].unsqueeze(1)", "x[1].view(30)",
    "x.unbind(1)[2]", "x.split(2, 1)[1]", "x.diagonal(0, 1, 2)", "x.narrow(2, 1, 3)",
    "x[:, 1].unsqueeze(0).transpose(0, 1)", "x.unfold(1, 2, 2)", "x.movedim(0, 2)[:, 1]",
    "x[1].as_strided((3, 2), (5, 2), 7)", "x.transpose(0, 1).as_strided((3, 2), (1, 6), 4)",
    "x.transpose(0, 1).reshape(6, 20)", "x.transpose(1, 2).contiguous()", "x.detach()[2]",
    # views of laid-out views, made natively: their layouts from the base's
    "x.permute(2, 0, 1).transpose(0, 1)", "x[1:3].view(2, 3, 10)", "x[:, 2].unsqueeze(1)",
    "x.transpose(0, 2).unsqueeze(3)", "x[1].t().reshape(5, 2, 3)", "x[2].t().t()",
    "x[:, :, 1].view(4, 6, 1)", "x[1:].reshape(-1)", "x.transpose(0, 2)[1:].detach()",
]


@pytest.mark.parametrize("view", VIEWS)
def test_a_view_reports_torchs_strides_and_offset_and_reads_its_values(view):
    # As on any device: code that asks a view's layout (`is_contiguous()` before a `.view`,
    # Dynamo rebuilding a view argument from its base) gets torch's answer, and `as_strided`
    # addresses the storage those strides describe, the root's values.
    cpu = torch.arange(120.0).reshape(4, 6, 5)
    ref, got = eval(view, {"x": cpu}), eval(view, {"x": cpu.to(DEV)})
    assert (got.stride(), got.storage_offset()) == (ref.stride(), ref.storage_offset())
    assert got.is_contiguous() == ref.is_contiguous()
    torch.testing.assert_close(got.cpu(), ref, rtol=0, atol=0)


def test_a_write_through_a_view_of_a_laid_out_view_reaches_the_root():
    cpu = torch.arange(120.0).reshape(4, 6, 5)
    dev = cpu.to(DEV)
    for x in (cpu, dev):
        v = x.transpose(0, 2)[1:3]  # a slice of a transpose: laid out in the root
        v.mul_(-1)
        v[0, 2].add_(100)
        x[1].t()[2].zero_()
    torch.testing.assert_close(dev.cpu(), cpu, rtol=0, atol=0)


def test_a_view_of_a_layout_torch_cannot_view_is_a_copy_of_its_values():
    # torch refuses `x.t().view(-1)`; here a tensor CUDA would lay out otherwise may be viewed,
    # so the bridge takes the view as a copy of the values (the engine lays results out
    # contiguously; CUDA keeps an operand's layout).
    cpu = torch.arange(12.0).reshape(3, 4)
    got = cpu.to(DEV).t().view(-1)
    torch.testing.assert_close(got.cpu(), cpu.t().reshape(-1), rtol=0, atol=0)
    assert got.is_contiguous() and got.storage_offset() == 0


@pytest.mark.parametrize("seed", range(4))
def test_writes_through_chains_of_slices_selects_and_transposes_reach_the_root(seed):
    # Slices and selects are made natively (their way back writes the view's values into its
    # base's), and so are the pieces of `split` and `unbind`: random chains of them, written in
    # place, leave the root as on the CPU.
    rng = random.Random(seed)
    cpu = torch.arange(210.0).reshape(5, 6, 7)
    dev = cpu.to(DEV)
    for _ in range(12):
        steps = []
        shape = list(cpu.shape)
        for _ in range(rng.randint(1, 3)):
            if not shape:
                break
            d = rng.randrange(len(shape))
            kind = rng.choice(["slice", "select", "transpose", "split", "unbind"])
            if kind == "slice" and shape[d] > 1:
                a = rng.randrange(shape[d] - 1)
                b = rng.randint(a + 1, shape[d])
                steps.append(lambda t, d=d, a=a, b=b: t.narrow(d, a, b - a))
                shape[d] = b - a
            elif kind == "select":
                i = rng.randrange(-shape[d], shape[d])
                steps.append(lambda t, d=d, i=i: t.select(d, i))
                del shape[d]
            elif kind == "transpose" and len(shape) > 1:
                e = (d + 1) % len(shape)
                steps.append(lambda t, d=d, e=e: t.transpose(d, e))
                shape[d], shape[e] = shape[e], shape[d]
            elif kind == "split" and shape[d] > 1:
                size = rng.randint(1, shape[d] - 1)
                k = rng.randrange(len(range(0, shape[d], size)))
                steps.append(lambda t, d=d, size=size, k=k: t.split(size, d)[k])
                shape[d] = min(size, shape[d] - k * size)
            elif kind == "unbind":
                i = rng.randrange(shape[d])
                steps.append(lambda t, d=d, i=i: t.unbind(d)[i])
                del shape[d]
        scale, shift = rng.choice([-1.0, 2.0, 0.5]), float(rng.randint(-9, 9))
        layouts = []
        for x in (cpu, dev):
            v = x
            for step in steps:
                v = step(v)
            layouts.append((v.stride(), v.storage_offset()))
            v.mul_(scale).add_(shift)
        torch.testing.assert_close(dev.cpu(), cpu, rtol=0, atol=0)
        assert layouts[1] == layouts[0]
