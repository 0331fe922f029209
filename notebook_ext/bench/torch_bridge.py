"""Figures for the torch bridge, with torch's CPU eager measured in the same run (medians):

- recording cost per aten op: the 1,000-op chain `x * 1.0001 + 0.5` on f32[64,64] written in torch,
  recorded (not run) on the xlaprof device, beside the same chain on a wrapper subclass that does
  nothing (what any `__torch_dispatch__` device pays per op);
- the MLP 784-512-512-10 SGD step written in torch (batch 64): on the device (one graph per step,
  after warm-up) and in torch's CPU eager;
- the Hugging Face GPT-2 training step of samples/torch (small config, AdamW): on the device and in
  torch's CPU eager, and the device's first step (trace, compile, run).

Each step on the device is also split in two: recording its aten ops on the host, then the sync
that finds the step's graph compiled and runs it (on the CPU plugin, on the host's own cores).

    .venv/bin/python notebook_ext/bench/torch_bridge.py
"""

import statistics
import time

import torch

import xlaprof.torch as xt

DEV = xt.device()


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def chain(x: torch.Tensor) -> torch.Tensor:
    for _ in range(500):  # two aten ops each
        x = x * 1.0001 + 0.5
    return x


def recording_per_op() -> float:
    x = torch.randn(64, 64, device=DEV)
    xt.sync()

    t = median_time(lambda: chain(x), 7)
    xt.sync()
    return t / 1000


class _NoOp(torch.Tensor):
    """A wrapper subclass whose every op does nothing but make its result: the floor any
    ``__torch_dispatch__`` device pays per aten op, measured beside ours."""

    @staticmethod
    def __new__(cls, shape: torch.Size, dtype: torch.dtype) -> "_NoOp":
        return torch.Tensor._make_wrapper_subclass(cls, shape, dtype=dtype)

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return _NoOp(args[0].shape, args[0].dtype)


def no_op_per_op() -> float:
    x = _NoOp(torch.Size([64, 64]), torch.float32)
    return median_time(lambda: chain(x), 7) / 1000


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                               torch.nn.ReLU(), torch.nn.Linear(512, 10))


def training_step(loss_of, opt: torch.optim.Optimizer, device: torch.device, phases=None):
    """One step on `device`: loss, backward, update; on ours, the step's graph run to the end.
    `phases`, a list, gets (recording, graph) seconds of each step on ours: the host recording the
    step's aten ops, then the sync that finds the step's graph compiled and runs it."""

    def one() -> None:
        start = time.perf_counter()
        loss_of().backward()
        opt.step()
        opt.zero_grad()
        if device == DEV:
            recorded = time.perf_counter()
            xt.step()
            xt.sync()
            if phases is not None:
                phases.append((recorded - start, time.perf_counter() - recorded))

    return one


def median_phases(phases: list):
    """The median of each phase of the steps in ``phases`` (see `training_step`), or None."""
    return tuple(statistics.median(p[i] for p in phases) for i in (0, 1)) if phases else None


def sgd_step_time(device: torch.device, steps: int = 30):
    """The median step, and on ours the medians of its two phases (see `training_step`)."""
    model = mlp().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 784).to(device)
    y = torch.randint(0, 10, (64,)).to(device)
    phases: list = []
    one = training_step(lambda: torch.nn.functional.cross_entropy(model(x), y), opt, device, phases)
    for _ in range(3):  # warm-up: compiles, lazily created state
        one()
    phases.clear()
    step = median_time(one, steps)
    split = median_phases(phases)
    return step, split


def gpt2_step_times(steps: int = 10):
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "samples" / "torch"))
    from models import MODELS

    build, make_batch, loss_of = MODELS["gpt2"]
    out = {}
    for device in (torch.device("cpu"), DEV):  # eager first: see `main`
        torch.manual_seed(0)
        model = build().to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        batch = {k: v.to(device) for k, v in make_batch(torch.Generator().manual_seed(1)).items()}
        phases: list = []
        one = training_step(lambda: loss_of(model, batch), opt, device, phases)
        t = time.perf_counter()
        one()
        first = time.perf_counter() - t
        one()  # the optimizer's state appears on the first step: its second compile
        phases.clear()
        step = median_time(one, steps)
        split = median_phases(phases)
        out[device.type] = (first, step, split)
    return out


def main() -> None:
    per_op, floor = recording_per_op(), no_op_per_op()
    print(f"recording, per aten op (torch chain x*1.0001+0.5, f32[64,64]): {per_op * 1e6:.2f} us; "
          f"a no-op wrapper subclass: {floor * 1e6:.2f} us (ours beyond it: {(per_op - floor) * 1e6:.2f} us)")
    # Eager runs first: after the device's steps, torch's CPU kernels run slower in the same
    # process (GPT-2's eager step by half), which would flatter the ratios.
    eager, _ = sgd_step_time(torch.device("cpu"))
    ours, (recording, graph) = sgd_step_time(DEV)
    print(f"MLP 784-512-512-10 SGD step: xlaprof {ours * 1e3:.2f} ms (recording {recording * 1e3:.2f} ms, "
          f"the step's graph {graph * 1e3:.2f} ms), torch CPU eager {eager * 1e3:.2f} ms "
          f"(ratio {ours / eager:.2f}; the graph alone {graph / eager:.2f})")
    g = gpt2_step_times()
    (first, ours, (recording, graph)), (_, eager, _) = g[DEV.type], g["cpu"]
    print(f"GPT-2 (2 layers, d=64, seq 32, batch 4) AdamW step: xlaprof {ours * 1e3:.2f} ms "
          f"(recording {recording * 1e3:.2f} ms, the step's graph {graph * 1e3:.2f} ms), torch CPU eager "
          f"{eager * 1e3:.2f} ms (ratio {ours / eager:.2f}); first step on the device {first:.2f} s "
          f"(trace, compile, run)")


if __name__ == "__main__":
    main()
