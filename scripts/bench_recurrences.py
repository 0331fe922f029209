"""Recurrences over time on the device beside torch's CPU eager, in the same run: an LSTM, a GRU
and an RNN training step (two layers, hidden 64, batch 8, 200 steps) and a CTC loss with its gradient
(500 steps, batch 8, 32 classes, targets up to 100 labels). The first step's time includes XLA's
compile, which for a recurrence recorded step by step grows faster than its steps: each of these
is a loop in the compiled program.

    .venv/bin/python scripts/bench_recurrences.py [--steps 200]
    XLAPROF_DEVICE=cuda python scripts/bench_recurrences.py --peer cuda    # beside CUDA eager (cuDNN)
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, Tuple

import torch

import xlaprof.torch as xt


def timed(step: Callable[[], None], repeats: int = 5) -> Tuple[float, float]:
    """The first call's time and the median of ``repeats`` after two more, in ms."""
    start = time.perf_counter()
    step()
    first = time.perf_counter() - start
    for _ in range(2):
        step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return first * 1e3, statistics.median(times) * 1e3


def recurrent(kind: type, device: str, steps: int) -> Callable[[], None]:
    torch.manual_seed(0)
    layer = kind(32, 64, num_layers=2).to(device)
    x = torch.randn(steps, 8, 32).to(device)

    def step() -> None:
        out, _ = layer(x)
        out.square().mean().backward()
        float(layer.weight_hh_l0.grad.sum())  # waits for the device

    return step


def ctc(device: str) -> Callable[[], None]:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(500, 8, 32, generator=g)
    targets = torch.randint(1, 32, (8, 100), generator=g)
    lengths = torch.full((8,), 500), torch.randint(50, 101, (8,), generator=g)
    moved = [t.to(device) for t in (logits, targets, *lengths)]

    def step() -> None:
        x = moved[0].detach().requires_grad_()
        loss = torch.nn.functional.ctc_loss(x.log_softmax(2), *moved[1:])
        loss.backward()
        float(x.grad.sum())

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="time steps of the recurrent layers")
    parser.add_argument("--peer", default="cpu", help="torch's eager device to compare with (cpu, cuda)")
    args = parser.parse_args()
    rows = [
        (f"LSTM, {args.steps} steps (loop)", lambda d: recurrent(torch.nn.LSTM, d, args.steps)),
        (f"GRU, {args.steps} steps (loop)", lambda d: recurrent(torch.nn.GRU, d, args.steps)),
        (f"RNN, {args.steps} steps (loop)", lambda d: recurrent(torch.nn.RNN, d, args.steps)),
        ("CTC loss, 500 steps (loop)", ctc),
    ]
    peer = f"{args.peer.upper()} eager"
    print(f"{'workload':32s} {'xlaprof':>9s} {peer:>10s} {'ratio':>6s} {'first step':>11s} {'eager first':>12s}")
    for name, make in rows:
        first, step = timed(make(xt.device().type))
        first_cpu, step_cpu = timed(make(args.peer))
        print(f"{name:32s} {step:7.1f}ms {step_cpu:8.1f}ms {step / step_cpu:5.2f}x {first / 1e3:9.2f} s "
              f"{first_cpu / 1e3:10.2f} s")


if __name__ == "__main__":
    main()
