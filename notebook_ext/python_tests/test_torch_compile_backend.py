"""torch.compile(backend="xlaprof"): Dynamo's graphs captured once on the engine and replayed,
checked against torch's CPU eager (training many steps, parameters too), and the ways a graph
can leave the fast path: random ops, lazy code around compiled code, an op with no lowering,
new shapes, CPU tensors, a program that never imports xlaprof."""

import copy
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import xlaprof as xp  # noqa: E402
import xlaprof.torch as xt  # noqa: E402
from xlaprof.torch import _compile  # noqa: E402

DEV = xt.device()


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Linear(32, 5))


def test_a_compiled_model_and_optimizer_train_like_cpu_eager():
    torch.manual_seed(0)
    eager = _mlp()
    ours = _mlp()
    ours.load_state_dict(eager.state_dict())
    ours.to(DEV)
    opt_e = torch.optim.AdamW(eager.parameters(), lr=1e-2)
    opt = torch.optim.AdamW(ours.parameters(), lr=1e-2)
    model = torch.compile(ours, backend="xlaprof")
    step = torch.compile(opt.step, backend="xlaprof")
    g = torch.Generator().manual_seed(3)
    before = dict(xt.fallbacks())
    stats_before = _compile.stats()  # counted for the process: other tests' too
    compiles = []
    for i in range(20):
        x, y = torch.randn(16, 12, generator=g), torch.randint(0, 5, (16,), generator=g)
        loss_e = torch.nn.functional.cross_entropy(eager(x), y)
        loss_e.backward()
        opt_e.step()
        opt_e.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x.to(DEV)), y.to(DEV))
        loss.backward()
        step()
        opt.zero_grad()
        assert loss.item() == pytest.approx(loss_e.item(), rel=1e-5), f"step {i}"
        compiles.append(xp.counters()["compiles"])
    for p, q in zip(eager.parameters(), ours.parameters()):
        torch.testing.assert_close(q.cpu(), p.detach(), rtol=1e-5, atol=1e-5)
    assert compiles[-1] == compiles[2], "the engine compiled again after warm-up"
    assert xt.fallbacks() == before
    s = _compile.stats()
    assert s["replays"] - stats_before["replays"] >= 3 * 17
    assert s["uncaptured"] == stats_before["uncaptured"]
    # AdamW's step counts live on the device, as Dynamo puts them for CUDA: counted and used
    # inside the optimizer's graph, with no CPU part computed and uploaded at each call.
    counts = [opt.state[p]["step"] for p in ours.parameters()]
    assert all(c.device == DEV for c in counts) and {c.item() for c in counts} == {20.0}


def test_a_compiled_optimizer_step_donates_what_it_writes_except_a_buffer_still_read():
    # Each run hands the program the buffers of the tensors it writes (parameters, moments, step
    # counts), as a sync donates an updated parameter's: without, every step wrote the model's
    # whole state to new memory. A buffer something else still reads is kept.
    torch.manual_seed(0)
    eager = torch.nn.Linear(16, 16)
    ours = copy.deepcopy(eager).to(DEV)
    eager_opt = torch.optim.AdamW(eager.parameters(), lr=1e-2)
    opt = torch.optim.AdamW(ours.parameters(), lr=1e-2)
    step = torch.compile(opt.step, backend="xlaprof")
    x = torch.randn(4, 16)
    donated = []
    for i in range(5):
        eager(x).square().sum().backward()
        ours(x.to(DEV)).square().sum().backward()
        eager_opt.step()
        held = None
        if i == 4:  # a pending tensor that reads the weight while the step runs (the gradients
            xt.sync()  # computed first: a pending argument's sync would compute it too)
            held = ours.weight.detach().clone()
        before = xp.counters()["buffers_donated"]
        step()
        xt.wait()
        donated.append(xp.counters()["buffers_donated"] - before)
        eager_opt.zero_grad()
        opt.zero_grad()
        if held is not None:
            torch.testing.assert_close(held.cpu(), before_step, rtol=0, atol=0)
        before_step = ours.weight.detach().cpu()
    # The first call captures (its arguments still held); then 2 parameters, their 4 moments
    # and 2 step counts, 8 buffers a step, and 7 while the weight is read.
    assert donated == [0, 8, 8, 8, 7], donated
    for a, b in zip(eager.parameters(), ours.parameters()):
        torch.testing.assert_close(b.cpu(), a, rtol=1e-5, atol=1e-6)


def test_a_view_a_compiled_graph_writes_writes_its_base_and_is_not_handed_over():
    # A written argument that is a view (the first rows of a matrix): its value is its root's,
    # read through the view, and its write rebuilds the root, which the other rows keep; its old
    # buffer is the root's, never handed to the program. Beside it, a tensor of its own.
    base, own = torch.zeros(4, 3, device=DEV), torch.ones(3, device=DEV)
    ref_base, ref_own = torch.zeros(4, 3), torch.ones(3)

    def f(rows, x):
        rows.mul_(2).add_(x)
        x.add_(1)

    step = torch.compile(f, backend="xlaprof")
    donated = []
    for _ in range(4):
        before = xp.counters()["buffers_donated"]
        step(base[:2], own)
        xt.wait()
        donated.append(xp.counters()["buffers_donated"] - before)
        f(ref_base[:2], ref_own)
        torch.testing.assert_close(base.cpu(), ref_base, rtol=0, atol=0)
        torch.testing.assert_close(own.cpu(), ref_own, rtol=0, atol=0)
    assert _compile.STATS["replays"] > 0
    assert donated[1:] == [1, 1, 1], donated  # `own`'s buffer alone


@pytest.mark.parametrize("view", ["x[1]", "x[:, 2]", "x.t()[1:]", "x[1:3].t()"])
def test_a_compiled_function_takes_any_view_and_writes_through_it(view):
    # Dynamo rebuilds a view argument from its base and checks the layout it gets against the
    # tensor's: a view not at its base's first element, or transposed, passes as on CUDA, and
    # the function's write reaches the base.
    torch._dynamo.reset()
    ref = torch.arange(12.0).reshape(4, 3)
    base = ref.to(DEV)

    def f(a):
        a.mul_(3)
        return (a + 1).sum()

    step = torch.compile(f, backend="xlaprof")
    for _ in range(3):
        got, want = step(eval(view, {"x": base})), f(eval(view, {"x": ref}))
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
        torch.testing.assert_close(base.cpu(), ref, rtol=0, atol=0)
    assert _compile.STATS["replays"] > 0


def test_a_forward_saves_weights_for_its_backward_not_copies_of_their_transposes(monkeypatch):
    # A program cannot return a view: a transposed weight saved for the backward would be
    # written out by every forward. The backward recomputes it from the weight instead.
    graphs = []
    init = _compile.CompiledGraph.__init__

    def keep(self, gm, kind):
        init(self, gm, kind)
        graphs.append(self)

    monkeypatch.setattr(_compile.CompiledGraph, "__init__", keep)
    # The first compile of `Sequential.forward` has static sizes; the second model's new batch
    # size recompiles it with symbolic ones, where the partitioner saves `t(t(w))`, which the
    # backend folds back to w (the weight itself, an argument: no copy).
    torch._dynamo.reset()
    torch.manual_seed(0)
    models = []
    for batch in (8, 16):
        model = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Linear(32, 5))
        reference = copy.deepcopy(model)
        x = torch.randn(batch, 12)
        reference(x).square().sum().backward()
        model.to(DEV)
        torch.compile(model, backend="xlaprof")(x.to(DEV)).square().sum().backward()
        models.append((model, reference))
    forwards = [g for g in graphs if g.kind == "forward"]
    assert len(forwards) == 2 and any(p.meta.get("val") is not None and not isinstance(p.meta["val"], torch.Tensor)
                                       for p in forwards[1].placeholders), "no recompile with symbolic sizes"
    views = {torch.ops.aten.t.default, torch.ops.aten.permute.default, torch.ops.aten.transpose.int}
    for forward in forwards:
        saved = [n for n in forward.outputs if isinstance(n, torch.fx.Node) and n.target in views]
        assert not saved, f"the forward returns {[n.format_node() for n in saved]}"
    for model, reference in models:
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-5, atol=1e-5)


def test_views_that_give_back_their_input_fold_to_it():
    from torch.fx.experimental.proxy_tensor import make_fx

    x = torch.randn(3, 4)
    gm = make_fx(lambda x: (x.t().t(), x.transpose(0, 1).transpose(1, 0), x.t().contiguous()))(x)
    folded = _compile.fold_identity_views(gm)
    ops = [n.target for n in folded.graph.nodes if n.op == "call_function"]
    assert ops == [torch.ops.aten.t.default, torch.ops.aten.clone.default], ops
    for got, want in zip(folded(x), (x, x, x.t().contiguous())):
        torch.testing.assert_close(got, want)
    y = torch.randn(2, 3, 4)
    gm = make_fx(lambda y: (y.permute(1, 2, 0).permute(2, 0, 1), y.permute(1, 2, 0).permute(1, 0, 2)))(y)
    folded = _compile.fold_identity_views(gm)
    permutes = [n for n in folded.graph.nodes if n.target is torch.ops.aten.permute.default]
    assert len(permutes) == 2, folded.code  # the second pair is no identity: kept
    for got, want in zip(folded(y), (y, y.permute(1, 2, 0).permute(1, 0, 2))):
        torch.testing.assert_close(got, want)


def test_writes_into_a_tensor_made_from_an_argument_reach_the_result():
    """torch's circular padding makes its result with `new_empty(x, device=...)` and writes the
    input into slices of it; that result was made as a real tensor while tracing, taken into the
    graph as a copy of its values, and the writes lost: the compiled padding returned zeros."""
    torch._dynamo.reset()
    torch.manual_seed(0)

    def pad_and_fill(x):
        out = torch.nn.functional.pad(x, (2, 1), mode="circular")
        made = x.new_zeros(x.shape[0], 2, device=x.device)
        made[:, 1:] = x[:, :1] * 3
        return out * 2, made

    for shape in ((2, 4), (3, 5)):
        x = torch.randn(*shape, requires_grad=True)
        xd = x.detach().to(DEV).requires_grad_()
        want = pad_and_fill(x)
        got = torch.compile(pad_and_fill, backend="xlaprof")(xd)
        for g, w in zip(got, want):
            torch.testing.assert_close(g.cpu(), w)
        (want[0].sum() + want[1].sum()).backward()
        (got[0].sum() + got[1].sum()).backward()
        torch.testing.assert_close(xd.grad.cpu(), x.grad)


def test_a_fractional_max_pool_3d_backward_compiles():
    """torch has no meta kernel for its backward: the bridge registers one."""
    torch._dynamo.reset()
    pool = torch.nn.FractionalMaxPool3d(2, output_ratio=0.5, _random_samples=torch.rand(1, 2, 3))
    x = torch.randn(1, 2, 6, 6, 6, requires_grad=True)
    xd = x.detach().to(DEV).requires_grad_()
    pool(x).sum().backward()
    torch.compile(copy.deepcopy(pool).to(DEV), backend="xlaprof")(xd).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


def test_each_run_of_a_compiled_graph_draws_new_random_numbers():
    f = torch.compile(lambda x: torch.nn.functional.dropout(x, 0.5, training=True), backend="xlaprof")
    x = torch.ones(4000, device=DEV)
    a, b = f(x).cpu(), f(x).cpu()
    assert not torch.equal(a, b)
    for r in (a, b):
        assert set(r.unique().tolist()) == {0.0, 2.0}
        assert 0.45 < (r == 0).float().mean().item() < 0.55


def test_random_factories_draw_anew_even_where_they_run_on_the_cpu():
    # randn and randint are lowered (a seed per run); random_() over an integer dtype's whole
    # range falls back to the CPU, whose result must not become a constant of the captured graph.
    for make in (lambda: torch.randn(64, device=DEV), lambda: torch.randint(0, 1000, (64,), device=DEV),
                 lambda: torch.empty(64, dtype=torch.int64, device=DEV).random_()):
        f = torch.compile(make, backend="xlaprof")
        assert not torch.equal(f().cpu(), f().cpu())


def test_random_integers_are_drawn_on_the_device_in_their_range():
    before = dict(xt.fallbacks())
    a = torch.randint(2, 7, (4000,), device=DEV).cpu()
    assert a.dtype == torch.int64 and set(a.unique().tolist()) == {2, 3, 4, 5, 6}
    assert torch.bincount(a - 2).min().item() > 4000 / 5 * 0.8, "uniform over the range"
    b = torch.randint(5, (3, 4), device=DEV, dtype=torch.float32).cpu()
    assert b.dtype == torch.float32 and b.shape == (3, 4) and b.min() >= 0 and b.max() <= 4
    c = torch.zeros(500, dtype=torch.int32, device=DEV).random_(-3, 3).cpu()
    assert c.dtype == torch.int32 and set(c.unique().tolist()) == {-3, -2, -1, 0, 1, 2}
    d = torch.zeros(500, device=DEV).random_(4).cpu()
    assert set(d.unique().tolist()) == {0.0, 1.0, 2.0, 3.0}
    assert xt.fallbacks() == before


def test_lazy_code_before_and_after_a_compiled_function():
    f = torch.compile(lambda x, w: torch.tanh(x @ w) + 1, backend="xlaprof")
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(6, 4, generator=g), torch.randn(4, 3, generator=g)
    pending = x.to(DEV) * 2  # lazy: computed when the compiled graph needs it
    got = (f(pending, w.to(DEV)) * 3).sum(0)  # lazy again after it
    torch.testing.assert_close(got.cpu(), ((torch.tanh((x * 2) @ w) + 1) * 3).sum(0), rtol=1e-5, atol=1e-5)


def test_an_op_with_no_lowering_splits_the_graph_and_strict_mode_refuses_it(monkeypatch):
    def f(x):
        return torch.special.bessel_j0(x * 2) + 1  # no lowering: the CPU fallback

    x = torch.linspace(0, 3, 7)
    before = _compile.stats()["uncaptured"]
    got = torch.compile(f, backend="xlaprof")(x.to(DEV))
    torch.testing.assert_close(got.cpu(), f(x))
    assert _compile.stats()["uncaptured"] == before + 1
    assert "special_bessel_j0" in xt.fallbacks()
    monkeypatch.setenv("XLAPROF_STRICT", "1")
    torch._dynamo.reset()
    with pytest.raises(Exception, match="bessel_j0"):
        torch.compile(f, backend="xlaprof")(x.to(DEV) + 1)


def test_a_graph_that_splits_and_writes_its_argument_writes_it_once_a_call():
    def f(x, y):
        y.add_(1)
        return torch.special.bessel_j0(x) + y  # no lowering: the graph is recorded at each call

    y = torch.zeros(3, device=DEV)
    g = torch.compile(f, backend="xlaprof")
    with torch.no_grad():
        for calls in (1, 2, 3):
            got = g(torch.ones(3, device=DEV), y)
            assert y.cpu().tolist() == [float(calls)] * 3
    torch.testing.assert_close(got.cpu(), torch.special.bessel_j0(torch.ones(3)) + 3)


def test_a_new_size_is_a_new_capture_with_the_right_values():
    f = torch.compile(lambda x: (x * x).sum(-1), backend="xlaprof")
    for n in (3, 5, 8, 5):
        x = torch.arange(n * 2, dtype=torch.float32).reshape(2, n)
        torch.testing.assert_close(f(x.to(DEV)).cpu(), (x * x).sum(-1))


def test_a_tensor_reshaped_in_place_between_calls_is_seen_with_its_new_shape():
    # A lazy tensor's stand-in in Dynamo's graphs is made once and kept: each way of changing a
    # tensor's shape or dtype in place must drop it, or the next call traces the old shape.
    f = torch.compile(lambda x: x * 2 + 1, backend="xlaprof")
    cpu = torch.arange(6, dtype=torch.float32)
    t = cpu.to(DEV)
    changes = [
        lambda a: a.unsqueeze_(0),
        lambda a: a.t_(),
        lambda a: a.squeeze_(),
        lambda a: a.resize_(2, 2),
        lambda a: setattr(a, "data", torch.ones(3, 1, dtype=torch.float64, device=a.device)),
    ]
    for change in changes:
        torch.testing.assert_close(f(t).cpu(), cpu * 2 + 1)
        change(t)
        change(cpu)
        assert t.shape == cpu.shape and t.dtype == cpu.dtype
        torch.testing.assert_close(f(t).cpu(), cpu * 2 + 1)


def test_a_compiled_result_passed_back_keeps_one_stand_in():
    # `x = f(x)` in a loop: each result is handed to the next call as made by the last one (its
    # stand-in made with it), and arguments stand in by themselves, not by a copy per call.
    f = torch.compile(lambda x: x + 1, backend="xlaprof")
    x = torch.zeros(3, device=DEV)
    x = f(f(x))
    for _ in range(5):
        m = x.__dict__["_meta"]  # made with x, by the call that returned it
        y = f(x)
        assert x.__dict__["_meta"] is m and m._xlaprof_owner() is x
        x = y
    torch.testing.assert_close(x.cpu(), torch.full((3,), 7.0))

def test_empty_tensors_and_kernels_that_reshape_their_own_result_compile():
    before = dict(xt.fallbacks())
    # An empty argument: Dynamo's fake copy resizes its zero-byte storage, which torch sends to
    # a device hook a Python-registered device cannot have.
    x = torch.randn(0, 3, 4)
    roll = torch.compile(lambda t: torch.roll(t, 1, 0) + 1, backend="xlaprof")
    assert roll(x.to(DEV)).cpu().shape == (0, 3, 4)
    # quantile of a 0-d tensor squeezes its own [1] result in place; stft transposes its own.
    q = torch.compile(lambda t: torch.quantile(t, 0.5) * 2, backend="xlaprof")
    s = torch.tensor(-4.25)
    torch.testing.assert_close(q(s.to(DEV)).cpu(), torch.quantile(s, 0.5) * 2)
    signal = torch.randn(2, 64, generator=torch.Generator().manual_seed(3))
    window = torch.hann_window(16)
    stft = torch.compile(lambda t, w: torch.stft(t, 16, window=w, return_complex=True).abs(),
                         backend="xlaprof")
    torch.testing.assert_close(stft(signal.to(DEV), window.to(DEV)).cpu(),
                               torch.stft(signal, 16, window=window, return_complex=True).abs(),
                               rtol=1e-4, atol=1e-4)
    assert xt.fallbacks() == before  # all on the engine


def test_cpu_values_of_a_device_graph_are_computed_on_the_cpu_and_fed_to_it_each_call():
    # A CPU count beside device values (as an optimizer's step count, unless it is capturable):
    # torch computes the CPU part at each call, the device graph reads it as an argument (never
    # a constant of the capture), and the count is written after the graph has read it.
    def f(w, count, scale):
        count.add_(1)
        return w * (1 - 0.9 ** count) * scale, count * 2

    g = torch.compile(f, backend="xlaprof")
    w = torch.arange(4, dtype=torch.float32)
    count, scale = torch.zeros(()), torch.tensor(3.0)
    replays = _compile.stats()["replays"]
    with torch.no_grad():
        for calls in (1, 2, 3, 4):
            got, doubled = g(w.to(DEV), count, scale)
            assert count.item() == calls and doubled.device.type == "cpu" and doubled.item() == 2 * calls
            torch.testing.assert_close(got.cpu(), w * (1 - 0.9 ** calls) * 3)
    assert _compile.stats()["replays"] == replays + 3


def test_a_function_of_cpu_tensors_runs_on_the_engine():
    f = torch.compile(lambda a, b: torch.relu(a @ b).mean(0), backend="xlaprof")
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(5, 4, generator=g), torch.randn(4, 3, generator=g)
    runs = xp.counters()["executions"]
    got = f(a, b)
    assert got.device.type == "cpu"
    torch.testing.assert_close(got, torch.relu(a @ b).mean(0), rtol=1e-5, atol=1e-6)
    assert xp.counters()["executions"] > runs


def test_a_model_of_cpu_tensors_trains_like_cpu_eager_its_parameters_and_buffers_read_each_call():
    """The natural first try: `torch.compile(model, backend="xlaprof")` on a model left on the
    CPU. Its parameters change between calls (the optimizer, eager or compiled, updates them on
    the CPU) and its buffers are written inside the graph (batch norm's running statistics):
    each call must read them anew, and write them back."""
    def net():
        return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(),
                                   torch.nn.Linear(32, 5))

    torch.manual_seed(0)
    eager, ours = net(), net()
    ours.load_state_dict(eager.state_dict())
    model = torch.compile(ours, backend="xlaprof")
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    opt = torch.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    step = torch.compile(opt.step, backend="xlaprof")
    g = torch.Generator().manual_seed(5)
    for i in range(12):
        x, y = torch.randn(16, 12, generator=g), torch.randint(0, 5, (16,), generator=g)
        for m, o, run in ((eager, opt_e, opt_e.step), (model, opt, step if i % 2 else opt.step)):
            loss = torch.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            run()
            o.zero_grad()
        with torch.no_grad():
            eager.eval(), ours.eval()
            torch.testing.assert_close(model(x), eager(x), rtol=1e-5, atol=1e-5, msg=f"step {i}")
            eager.train(), ours.train()
    for (name, a), b in zip(eager.state_dict().items(), ours.state_dict().values()):
        assert b.device.type == "cpu"
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5, msg=name)
    assert int(ours[1].num_batches_tracked) == 12


def test_a_model_of_cpu_tensors_under_autocast_runs_its_backward_as_one_captured_graph():
    """Mixed precision on a CPU model (`torch.autocast("cpu", dtype=torch.bfloat16)`): the
    backward casts its bfloat16 gradients back to float32 with `device=cpu` written in the op.
    That CPU is the graph's own device: the cast stays on the device, the backward is captured
    once and replayed (it had been recorded anew at each call, each cast a value read), and
    training follows eager autocast's."""
    from xlaprof.torch import _compile

    def net():
        return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, 1, 1, bias=False), torch.nn.BatchNorm2d(8),
                                   torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 4))

    torch.manual_seed(0)
    eager, ours = net(), net()
    ours.load_state_dict(eager.state_dict())
    model = torch.compile(ours, backend="xlaprof")
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt = torch.optim.SGD(ours.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(3)
    before = _compile.stats()
    for i in range(6):
        x, y = torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 4, (4,), generator=g)
        losses = []
        for m, o in ((eager, opt_e), (model, opt)):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(m(x), y)
            o.zero_grad()
            loss.backward()
            o.step()
            losses.append(loss.item())
        # bfloat16's own rounding, in a different order: a few parts in a thousand.
        assert losses[1] == pytest.approx(losses[0], rel=1e-2), (i, losses)
    for (name, a), b in zip(eager.state_dict().items(), ours.state_dict().values()):
        torch.testing.assert_close(b, a, rtol=2e-2, atol=1e-2, msg=name)
    after = _compile.stats()
    assert after["uncaptured"] == before["uncaptured"] and after["recorded_runs"] == before["recorded_runs"], after
    assert after["replays"] - before["replays"] == 2 * 6 - 2, after  # forward and backward, after the captures


def test_the_backend_is_found_without_importing_xlaprof(tmp_path):
    program = tmp_path / "plain.py"
    program.write_text(
        "import torch\n"
        "f = torch.compile(lambda x: torch.sin(x) * 2, backend='xlaprof')\n"
        "x = torch.linspace(0, 1, 5)\n"
        "assert torch.allclose(f(x), torch.sin(x) * 2)\n"
        "import sys; print('xlaprof' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().endswith("True")


def test_grouped_products_of_mixture_of_experts_layers_stay_on_the_device():
    moe = pytest.importorskip("transformers.integrations.moe")
    g = torch.Generator().manual_seed(0)
    x, w, grad = torch.randn(9, 3, generator=g), torch.randn(4, 3, 5, generator=g), torch.randn(9, 5, generator=g)
    offs = torch.tensor([2, 2, 6, 9])  # an empty group among them
    before = dict(xt.fallbacks())
    got = torch.ops.transformers.grouped_mm_fallback(x.to(DEV), w.to(DEV), offs.to(DEV))
    torch.testing.assert_close(got.cpu(), moe._grouped_mm_fallback(x, w, offs), rtol=1e-5, atol=1e-5)
    gx, gw = torch.ops.transformers.grouped_mm_fallback_backward(x.to(DEV), w.to(DEV), offs.to(DEV), grad.to(DEV))
    rx, rw = moe._grouped_mm_fallback_bwd(x, w, offs, grad)
    torch.testing.assert_close(gx.cpu(), rx, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gw.cpu(), rw, rtol=1e-5, atol=1e-5)
    assert xt.fallbacks() == before


def test_the_profile_shows_dynamo_findings_and_the_engine_runs_of_each_compiled_graph(tmp_path):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 4)
            self.scale = 1.0

        def forward(self, x):
            y = self.lin(x) * self.scale
            print("", end="")  # a graph break
            return y.relu()

    torch._dynamo.reset()
    model = Net().to(DEV)
    compiled = torch.compile(model, backend="xlaprof")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with xp.profile() as p:
        for _ in range(4):
            compiled(torch.randn(4, 8, device=DEV)).sum().backward()
            opt.step()
            opt.zero_grad()
            xt.step()
        model.scale = 0.5
        compiled(torch.randn(4, 8, device=DEV))
        xt.sync()
    kinds = [d["kind"] for d in p.diagnostics()]
    assert "GraphBreak" in kinds
    recompiles = [d for d in p.diagnostics() if d["kind"] == "Recompile"]
    # Dynamo's guard explains the one recompile; the graphs captured at one call (forward,
    # backward, the pieces around the break) are not the engine's recompiles.
    assert len(recompiles) == 1 and "self.scale == 1.0" in recompiles[0]["message"], recompiles
    p.export(str(tmp_path / "p.json"), "json")
    import json

    data = json.loads((tmp_path / "p.json").read_text())
    ran = [s for s in data["profile"]["syncs"] if s["cause"] == "CompiledGraph"]
    assert len(ran) >= 4 * 3, "each call's forward pieces and backward run as the engine's syncs"
    assert all(s.get("hash") for s in ran)


def test_a_compiled_optimizer_step_ends_each_step_of_the_profile():
    # torch.compile(opt.step) traces the optimizer's step hooks into its graph, where they never
    # run: the step ends where the optimizer's compiled graph has run, in a profile that saw the
    # compiles and in one started after them.
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _mlp().to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    forward, step = torch.compile(model, backend="xlaprof"), torch.compile(opt.step, backend="xlaprof")

    def train(steps):
        for _ in range(steps):
            x, y = torch.randn(16, 12), torch.randint(0, 5, (16,))
            torch.nn.functional.cross_entropy(forward(x.to(DEV)), y.to(DEV)).backward()
            step()
            opt.zero_grad()
        xt.wait()

    with xp.profile() as p:
        train(6)
    assert p.steps == 6, p.report()
    # The steps are the program's: its compiles are in the first two (the optimizer's state
    # appears in the first), none after.
    p.assert_max_compiles(0, after_step=2)
    with xp.profile() as later:
        train(4)
    assert later.steps == 4, later.report()
    later.assert_max_compiles(0)


def test_a_loop_that_also_ends_its_steps_counts_each_iteration_once():
    # The optimizer's step hook ends a compiled program's step; a loop that calls `xt.step()`
    # after it ends the same iteration, which is one step, not two (41 iterations once read
    # "82 steps", every per-step figure halved). A device loader's step right after a step of
    # the loop's own ran nothing and is no step either.
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _mlp().to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    forward = torch.compile(model, backend="xlaprof")
    batches = [(torch.randn(16, 12), torch.randint(0, 5, (16,))) for _ in range(7)]
    with xp.profile() as p:
        for x, y in batches:
            torch.nn.functional.cross_entropy(forward(x.to(DEV)), y.to(DEV)).backward()
            opt.step()
            opt.zero_grad()
            xt.step()
    assert p.steps == 7, p.report()

    lazy = _mlp().to(DEV)
    opt = torch.optim.SGD(lazy.parameters(), lr=1e-2)
    with xp.profile() as p:
        for x, y in xt.DeviceLoader(batches):
            torch.nn.functional.cross_entropy(lazy(x), y).backward()
            opt.step()
            opt.zero_grad()
            xt.step()
    assert p.steps == 7, p.report()

    # A compiled loop whose steps its optimizer ended, then a lazy program in a profile of its
    # own: that program's first step is its own, not the compiled loop's last iteration.
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for x, y in batches[:2]:
        torch.nn.functional.cross_entropy(forward(x.to(DEV)), y.to(DEV)).backward()
        opt.step()
        opt.zero_grad()
    with xp.profile() as p:
        w = torch.ones(4, device=DEV)
        for _ in range(3):
            w = w * 2
            xt.step()
    assert p.steps == 3, p.report()


def test_a_loop_that_steps_two_optimizers_counts_each_iteration_once():
    # A GAN steps its discriminator's optimizer and its generator's each iteration: one step of
    # the loop, not two, whether the optimizers' steps run eagerly (their hooks) or compiled.
    torch._dynamo.reset()
    torch.manual_seed(0)
    for compiled in (False, True):
        d = _mlp().to(DEV)
        g = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.ReLU(), torch.nn.Linear(24, 5)).to(DEV)
        opt_d, opt_g = torch.optim.Adam(d.parameters()), torch.optim.Adam(g.parameters())
        step_d, step_g = opt_d.step, opt_g.step
        if compiled:
            step_d, step_g = torch.compile(step_d, backend="xlaprof"), torch.compile(step_g, backend="xlaprof")
        fd, fg = torch.compile(d, backend="xlaprof"), torch.compile(g, backend="xlaprof")
        with xp.profile() as p:
            for _ in range(5):
                x = torch.randn(16, 12).to(DEV)
                fd(x).square().mean().backward()
                step_d()
                opt_d.zero_grad()
                fg(x).square().mean().backward()
                step_g()
                opt_g.zero_grad()
            xt.wait()
        assert p.steps == 5, (compiled, p.report())
    # The two dropped, one optimizer of a model made afresh (a notebook's cell run again): each
    # of its steps is a step again.
    del opt_d, opt_g, step_d, step_g
    model = _mlp().to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    forward = torch.compile(model, backend="xlaprof")
    with xp.profile() as p:
        for _ in range(3):
            forward(torch.randn(16, 12).to(DEV)).square().mean().backward()
            opt.step()
            opt.zero_grad()
    assert p.steps == 3, p.report()


def test_a_compiled_optimizer_step_breaks_only_where_the_program_does():
    # The package's own step hook (which ends a profile's steps) is traced into the optimizer's
    # graph, not a graph break; a hook of the program's that breaks is found at its line, the
    # compiled function named by torch's frame, never by this extension's Rust source.
    torch._dynamo.reset()
    model = torch.nn.Linear(4, 2).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    step = torch.compile(opt.step, backend="xlaprof")

    def train(steps):
        for _ in range(steps):
            model(torch.randn(3, 4).to(DEV)).sum().backward()
            step()
            opt.zero_grad()

    with xp.profile() as p:
        train(3)
    assert [d for d in p.diagnostics() if d["kind"] == "GraphBreak"] == [], p.report()

    def hook(optimizer, args, kwargs):
        torch._dynamo.graph_break()  # LINE_HOOK

    torch._dynamo.reset()
    opt.register_step_post_hook(hook)
    with xp.profile() as p:
        train(3)
    breaks = [d for d in p.diagnostics() if d["kind"] == "GraphBreak"]
    assert len(breaks) == 1, p.report()
    import inspect

    lines, start = inspect.getsourcelines(test_a_compiled_optimizer_step_breaks_only_where_the_program_does)
    line = start + next(i for i, l in enumerate(lines) if "LINE_HOOK" in l and "if" not in l)
    message = breaks[0]["message"]
    assert f"test_torch_compile_backend.py:{line} in hook" in message, message
    assert ".rs:" not in message and "optimizer.py" in message, message
