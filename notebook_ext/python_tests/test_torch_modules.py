"""Modules and devices as on CUDA: moving a module keeps its parameter objects (tied weights stay
one parameter), mixing a CPU tensor into a device op is an error at the user's line, and a
negative size is refused where it is given."""

import inspect
import os

import pytest
import torch

import xlaprof as xp
import xlaprof.torch as xt

DEV = xt.device()
HERE = os.path.basename(__file__)


def this_line() -> int:
    return inspect.currentframe().f_back.f_lineno


class Tied(torch.nn.Module):
    """A language model's shape in miniature: the output projection is the embedding."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(50, 16)
        self.body = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh(), torch.nn.LayerNorm(16))
        self.head = torch.nn.Linear(16, 50, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("scale", torch.tensor([0.5, 2.0]))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.embed(ids)) * self.scale[1])


def test_moving_a_module_keeps_its_parameter_objects_and_ties():
    model = Tied()
    before = list(model.parameters())
    names = [n for n, _ in model.named_parameters()]
    frozen = model.body[0].bias
    frozen.requires_grad_(False)
    model.embed.weight.label = "shared"  # an attribute set on a parameter, as libraries do
    calls = []
    model.body.register_forward_hook(lambda m, i, o: calls.append(tuple(o.shape)))

    model.to(DEV)

    after = list(model.parameters())
    assert len(after) == len(before) == 5 and [n for n, _ in model.named_parameters()] == names
    assert all(a is b for a, b in zip(after, before)), "each parameter is the same object, as on CUDA"
    assert model.head.weight is model.embed.weight
    assert all(p.device == DEV for p in after) and model.scale.device == DEV
    assert isinstance(model.embed.weight, torch.nn.Parameter) and model.embed.weight.label == "shared"
    assert frozen.requires_grad is False and model.embed.weight.requires_grad is True

    # ... and back to the CPU, still one parameter, the same objects.
    model.cpu()
    assert model.head.weight is model.embed.weight and model.embed.weight.device.type == "cpu"
    assert all(a is b for a, b in zip(model.parameters(), before))

    # Module hooks run on the device. After a forward pass (whose graph torch may still hold),
    # moving back keeps one parameter even where torch cannot swap the objects.
    model.to(DEV)
    model(torch.tensor([[1, 2, 3]], device=DEV))
    assert calls == [(1, 3, 16)]
    model.cpu()
    assert model.head.weight is model.embed.weight and len(list(model.parameters())) == 5
    assert all(p.device.type == "cpu" for p in model.parameters())


def test_a_tied_model_trains_as_on_the_cpu_with_an_optimizer_made_before_the_move():
    cpu, dev = Tied(), Tied()
    opt_cpu = torch.optim.AdamW(cpu.parameters(), lr=1e-2)
    opt_dev = torch.optim.AdamW(dev.parameters(), lr=1e-2)  # before .to(): as on CUDA, it follows
    dev.to(DEV)
    g = torch.Generator().manual_seed(3)
    for step in range(20):
        ids = torch.randint(0, 50, (4, 7), generator=g)
        losses = []
        for model, opt, move in ((cpu, opt_cpu, lambda t: t), (dev, opt_dev, lambda t: t.to(DEV))):
            logits = model(move(ids))
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 50), move(ids).reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss)
        xt.step()
        assert losses[1].item() == pytest.approx(losses[0].item(), rel=1e-5), f"step {step}"
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
        assert torch.allclose(q.cpu(), p.detach(), rtol=1e-5, atol=1e-6), name


def test_gradient_hooks_registered_before_the_move_run_on_the_device_and_back():
    # A hook on a parameter (gradient clipping or masking, as pruning and libraries do it) is
    # registered when the model is built, on the CPU, and must still run after `.to(device)`, as
    # on CUDA. Both kinds: the hook that changes the gradient, and the one after it accumulates.
    def build():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
        model[0].weight.register_hook(lambda g: g.clamp(-0.01, 0.01))
        return model

    accumulated = []
    cpu, dev = build(), build()
    dev[2].bias.register_post_accumulate_grad_hook(lambda p: accumulated.append(p.device))
    dev.to(DEV)
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(1))
    for model, move in ((cpu, lambda t: t), (dev, lambda t: t.to(DEV))):
        model(move(x)).pow(2).sum().backward()
    clipped = dev[0].weight.grad.cpu()
    assert clipped.abs().max().item() == pytest.approx(0.01), "the clipping hook ran"
    for p, q in zip(cpu.parameters(), dev.parameters()):
        assert torch.allclose(q.grad.cpu(), p.grad, rtol=1e-5, atol=1e-7)
    assert accumulated == [DEV]

    # Back on the CPU, the hooks still run.
    dev.cpu().zero_grad()
    dev(x).pow(2).sum().backward()
    assert dev[0].weight.grad.abs().max().item() == pytest.approx(0.01)
    assert accumulated == [DEV, torch.device("cpu")]


def test_the_state_dict_round_trips_through_the_device():
    model = Tied()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    model.to(DEV)
    assert list(model.state_dict()) == list(state)
    other = Tied().to(DEV)
    with torch.no_grad():
        for p in other.parameters():
            p.zero_()
    other.load_state_dict({k: v.to(DEV) for k, v in model.state_dict().items()})
    back = {k: v.cpu() for k, v in other.state_dict().items()}
    for k, v in state.items():
        assert torch.equal(back[k], v), k
    assert other.head.weight is other.embed.weight


def test_a_hugging_face_language_model_keeps_its_tied_head():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=1, n_head=2)
    model = transformers.GPT2LMHeadModel(cfg)
    count = len(list(model.parameters()))
    model.to(DEV)
    assert len(list(model.parameters())) == count
    assert model.lm_head.weight is model.transformer.wte.weight


def test_a_cpu_tensor_in_a_device_op_is_an_error_at_the_users_line():
    x = torch.ones(3, 4, device=DEV)
    before = dict(xt.fallbacks())
    with pytest.raises(RuntimeError) as e:
        line = this_line(); x + torch.ones(3, 4)  # noqa: E702
    message = str(e.value)
    assert "same device" in message and "xlaprof:0" in message and "cpu" in message, message
    assert f"{HERE}:{line}" in message and "[3, 4]" in message, message
    with pytest.raises(RuntimeError, match="same device"):
        torch.mm(x, torch.ones(4, 2))
    # torch allows a 0-dim CPU tensor beside device tensors, and CPU indices.
    assert (x * torch.tensor(2.0)).sum().item() == 24.0
    assert x[torch.tensor([0, 2])].shape == (2, 4)
    assert xt.fallbacks() == before  # nothing of this ran on the CPU


def test_a_negative_size_is_an_error_at_the_users_line():
    with pytest.raises(ValueError) as e:
        line = this_line(); torch.randn(-3, 4, device=DEV)  # noqa: E702
    assert "non-negative" in str(e.value) and f"{HERE}:{line}" in str(e.value), str(e.value)
    with pytest.raises(ValueError) as e:
        line = this_line(); torch.zeros(2, -1, device=DEV)  # noqa: E702
    assert f"{HERE}:{line}" in str(e.value), str(e.value)
    for make in (lambda: xp.randn(-3, 4), lambda: xp.zeros(-1), lambda: xp.full((2, -2), 1.0),
                 lambda: xp.rand(3, -4), lambda: xp.ones(-5)):
        with pytest.raises(xp.ShapeError, match="non-negative"):
            make()


def test_a_lazy_module_moved_before_its_first_call_is_made_on_the_device():
    """As on CUDA: `.to(device)` keeps an uninitialized parameter uninitialized; the first call
    makes it on the device, in place, so an optimizer made before the call trains it."""
    torch.manual_seed(0)
    before = dict(xt.fallbacks())
    model = torch.nn.Sequential(torch.nn.LazyLinear(8), torch.nn.ReLU(), torch.nn.LazyLinear(3)).to(DEV)
    weight = model[0].weight
    assert isinstance(weight, torch.nn.parameter.UninitializedParameter)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 5, device=DEV), torch.randn(16, 3, device=DEV)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert model[0].weight is weight and isinstance(weight, torch.nn.Parameter)
    assert not isinstance(weight, torch.nn.parameter.UninitializedParameter)
    assert weight.device == DEV and tuple(weight.shape) == (8, 5) and tuple(model[2].weight.shape) == (3, 8)
    assert weight.grad is not None and weight.grad.device == DEV
    assert losses[-1] < losses[0], losses
    assert xt.fallbacks() == before


_FAILING_BACKWARD = """
import torch, xlaprof.torch as xt
from xlaprof.torch.lowerings import registry

def broken(*args, **kwargs):
    raise ValueError("the backward's lowering failed")

registry.FUNCTIONAL[torch.ops.aten.hardshrink_backward.default] = broken
x = torch.randn(4, device=xt.device(), requires_grad=True)
try:
    torch.nn.functional.hardshrink(x).sum().backward()
except ValueError as e:
    print("raised:", e)
print("still running")
"""


def test_an_error_in_a_builtin_backward_nodes_op_is_raised_and_the_process_lives(tmp_path):
    """torch unwinds a failed built-in backward node through its device guard with the op's
    error pending; the guard's answer keeps the error, which backward() raises (it ended the
    process with `std::terminate` before)."""
    import subprocess
    import sys

    script = tmp_path / "failing_backward.py"
    script.write_text(_FAILING_BACKWARD)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "raised: the backward's lowering failed" in run.stdout, run.stdout + run.stderr[-2000:]
    assert "still running" in run.stdout


def test_a_moved_module_names_its_parameters_and_buffers_after_the_callers_variable():
    from xlaprof.torch._tensor import value

    net = Tied().to(DEV)
    assert value(net.embed.weight).name == "net.embed.weight"  # the tied head: its first name
    assert value(net.body[2].bias).name == "net.body.2.bias"
    assert value(net.scale).name == "net.scale"
    other = Tied()
    other.to(DEV)  # a statement: the variable that holds it
    assert value(other.body[0].weight).name == "other.body.0.weight"


def test_findings_name_a_parameter_by_its_name_and_an_input_by_its_variable(tmp_path):
    # A batch whose dtype changes is named by the variable its line assigns, never by its number
    # in the graph. The parameters keep their names through the optimizer's in-place updates
    # (each step a new value): the graphs before and after the change name them as inputs. A
    # reference to a parameter kept across a step compiles nothing (its buffer is not donated
    # that step, by the executable the step has).
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "import xlaprof.torch as xt\n"
        "dev = xt.device()\n"
        "torch.manual_seed(0)\n"
        "model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(dev)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "kept = None\n"
        "for step in range(8):\n"
        "    batch = torch.randn(4, 8, dtype=torch.float64 if step == 6 else torch.float32).to(dev)\n"
        "    loss = model(batch.float()).square().mean()\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    if step == 3:\n"
        "        kept = model[2].weight.detach()\n"
        "    xt.step()\n"
    )
    out = tmp_path / "train.xlaprof"
    env = dict(os.environ, XLAPROF_PROFILE=str(out))
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    p = xp.load(str(out))
    recompiles = [d for d in p.diagnostics() if d["kind"] == "Recompile"]
    assert len(recompiles) == 1, p.report()  # the dtype change; the kept reference, nothing
    text = recompiles[0]["message"] + " " + (recompiles[0].get("advice") or "")
    assert "`batch` made at train.py:9" in text and "f64" in text, p.report()
    for ir in ("input 0", "input 1", "%", "parameter("):
        assert ir not in text, (ir, text)
    before, after = recompiles[0]["graphs"][:2]
    diff = p._data().graph_diff(before, after)
    for side in ("a", "b"):
        names = {name for _shape, name, _at in diff[side]["inputs"] if name}
        assert {"model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias"} <= names, names
