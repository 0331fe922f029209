"""What `detect_anomaly()` costs when nothing is NaN: the GPT-2 training step of samples/torch
(small config, AdamW) on the device, with and without the check, in alternating rounds of one
process (medians). The check is one more output of each sync's program (its results' sum of
`x - x`, fused into one pass) and one scalar read per sync, and donation is off while it looks
(a graph's inputs must survive it, to run again if it finds a NaN).

    .venv/bin/python notebook_ext/bench/debug_tools.py
"""

import contextlib
import pathlib
import statistics
import sys
import time

import torch

import xlaprof.torch as xt

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "samples" / "torch"))
from models import MODELS  # noqa: E402

build, make_batch, loss_of = MODELS["gpt2"]
ROUNDS, STEPS = 15, 10


def main() -> None:
    dev = xt.device()
    torch.manual_seed(0)
    model = build().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = {k: v.to(dev) for k, v in make_batch(torch.Generator().manual_seed(1)).items()}

    def step() -> None:
        loss = loss_of(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        xt.step()

    def rounds(ctx) -> float:
        with ctx():
            t = time.perf_counter()
            for _ in range(STEPS):
                step()
            return (time.perf_counter() - t) / STEPS

    for ctx in (contextlib.nullcontext, xt.detect_anomaly):  # compiles, both ways
        for _ in range(3):
            rounds(ctx)
    off, on = [], []
    for _ in range(ROUNDS):
        off.append(rounds(contextlib.nullcontext))
        on.append(rounds(xt.detect_anomaly))
    a, b = statistics.median(off), statistics.median(on)
    print(f"GPT-2 (2 layers, d=64, seq 32, batch 4) AdamW step on the device, medians of {ROUNDS} "
          f"alternating rounds of {STEPS}: {a * 1e3:.2f} ms, under detect_anomaly() {b * 1e3:.2f} ms "
          f"(cost {100 * (b / a - 1):+.1f} %)")


if __name__ == "__main__":
    main()
