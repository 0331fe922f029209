"""torch.compile(backend="xlaprof") with fused steps (`XLAPROF_FUSED_STEPS=1`): each run of a
captured graph is recorded into the lazy trace, and a step's graphs, with the lazy code between
them, run as one program. Checked against torch's CPU eager (many steps, parameters too), with
the step's program counted: one per step, compiled once."""

import copy

import pytest

torch = pytest.importorskip("torch")

import xlaprof as xp  # noqa: E402
import xlaprof.torch as xt  # noqa: E402
from xlaprof.torch import _compile  # noqa: E402

DEV = xt.device()


@pytest.fixture(autouse=True)
def fused(monkeypatch):
    # New captures (a fresh Dynamo) in the fused mode; the earlier ones keep theirs.
    monkeypatch.setattr(_compile, "FUSED_STEPS", True)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Dropout(0.0), torch.nn.Linear(32, 5))


def _beside(eager, lr):
    """A copy of ``eager`` on the device and AdamW for each, the copy and its optimizer's step
    compiled: ``(ours, model, opt_e, opt, step)``."""
    ours = copy.deepcopy(eager).to(DEV)
    opt_e = torch.optim.AdamW(eager.parameters(), lr=lr)
    opt = torch.optim.AdamW(ours.parameters(), lr=lr)
    return ours, torch.compile(ours, backend="xlaprof"), opt_e, opt, torch.compile(opt.step, backend="xlaprof")


@pytest.mark.parametrize("read_each_step", [True, False])
def test_a_compiled_step_is_one_program_and_trains_like_cpu_eager(read_each_step):
    torch.manual_seed(0)
    eager = _mlp()
    ours, model, opt_e, opt, step = _beside(eager, 1e-2)
    uncaptured = _compile.stats()["uncaptured"]  # counted for the process: other tests' too
    g = torch.Generator().manual_seed(3)
    losses, losses_e, counts = [], [], []
    for i in range(20):
        x, y = torch.randn(16, 12, generator=g), torch.randint(0, 5, (16,), generator=g)
        loss_e = torch.nn.functional.cross_entropy(eager(x), y)
        loss_e.backward()
        opt_e.step()
        opt_e.zero_grad()
        # The loss outside the compiled model: lazy code between the forward and the backward.
        loss = torch.nn.functional.cross_entropy(model(x.to(DEV)), y.to(DEV))
        loss.backward()
        step()
        opt.zero_grad()
        losses_e.append(loss_e.item())
        losses.append(loss.item() if read_each_step else loss.detach())
        counts.append(xp.counters())
    losses = [float(v) if read_each_step else v.item() for v in losses]
    assert losses == pytest.approx(losses_e, rel=1e-5)
    for p, q in zip(eager.parameters(), ours.parameters()):
        torch.testing.assert_close(q.cpu(), p.detach(), rtol=1e-5, atol=1e-5)
    first, last = counts[4], counts[-1]
    assert last["compiles"] == first["compiles"], "the step's program compiled again"
    # One program a step: the forward, the loss, the backward and AdamW together.
    assert last["executions"] - first["executions"] == 15
    assert _compile.stats()["uncaptured"] == uncaptured


def test_a_loop_that_never_reads_runs_a_program_per_call_and_not_a_growing_one():
    f = torch.compile(lambda x: x * 2 + 1, backend="xlaprof")
    x = torch.zeros(4, device=DEV)
    for _ in range(5):
        x = f(x)
    before = xp.counters()
    for _ in range(30):
        x = f(x)
    after = xp.counters()
    # Each call computes the previous one's results (a step ends where a graph runs again).
    assert after["executions"] - before["executions"] == 30
    assert after["compiles"] == before["compiles"]
    want = torch.zeros(4)
    for _ in range(35):
        want = want * 2 + 1
    torch.testing.assert_close(x.cpu(), want)


def test_each_run_draws_new_random_numbers():
    f = torch.compile(lambda x: torch.nn.functional.dropout(x, 0.5, training=True), backend="xlaprof")
    x = torch.ones(4000, device=DEV)
    a, b, c = f(x), f(x), f(x)
    draws = [r.cpu() for r in (a, b, c)]
    assert not torch.equal(draws[0], draws[1]) and not torch.equal(draws[1], draws[2])
    for r in draws:
        assert set(r.unique().tolist()) == {0.0, 2.0}
        assert 0.45 < (r == 0).float().mean().item() < 0.55


def test_a_hugging_face_gpt2_trains_like_cpu_eager():
    import sys
    import pathlib

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "samples" / "torch"))
    import models

    torch.manual_seed(0)
    eager = models.gpt2()
    ours, model, opt_e, opt, step = _beside(eager, 1e-3)
    g = torch.Generator().manual_seed(1)
    for i in range(8):
        batch = models.gpt2_batch(g)
        loss_e = models.hf_loss(eager, batch)
        loss_e.backward()
        opt_e.step()
        opt_e.zero_grad()
        loss = models.hf_loss(model, {k: v.to(DEV) for k, v in batch.items()})
        loss.backward()
        step()
        opt.zero_grad()
        assert loss.item() == pytest.approx(loss_e.item(), rel=1e-4), f"step {i}"
    for p, q in zip(eager.parameters(), ours.parameters()):
        torch.testing.assert_close(q.cpu(), p.detach(), rtol=1e-4, atol=1e-4)


class _SetsAttributeOnFirstCall(torch.nn.Module):
    """As transformers' classification models set `config.problem_type` on their first call
    with labels: Dynamo compiles the forward again at the second step (BERT, ViT, Swin)."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.mode = torch.nn.Linear(8, 16), torch.nn.Linear(16, 3), None

    def forward(self, x):
        if self.mode is None:
            self.mode = "set"
        return self.b(torch.relu(self.a(x)))


def test_a_graph_compiled_again_at_the_second_step_settles_by_the_third():
    # The step that captures the new forward computes in two programs (the capture's sync, then
    # the read), the steps after it in one: one compile more, at step 3, then none. Before the
    # read computed the whole step even where the loss was computed already, the boundary moved
    # to the backward's call, and steps 3 and 4 each compiled a program of their own.
    torch.manual_seed(0)
    model = _SetsAttributeOnFirstCall().to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    f, step = torch.compile(model, backend="xlaprof"), torch.compile(opt.step, backend="xlaprof")
    g = torch.Generator().manual_seed(1)
    compiles = []
    for _ in range(6):
        x, y = torch.randn(4, 8, generator=g).to(DEV), torch.randint(0, 3, (4,), generator=g).to(DEV)
        loss = torch.nn.functional.cross_entropy(f(x), y)
        loss.backward()
        step()
        opt.zero_grad()
        loss.item()
        compiles.append(xp.counters()["compiles"])
    assert compiles[2:] == [compiles[2]] * 4, compiles
