"""What `detect_anomaly()` costs when nothing is NaN: the GPT-2 training step of samples/torch
(small config, AdamW) on the device, with and without the check, in alternating rounds of one
process (medians). The check is one more output of each sync's program (its results' sum of
`x - x`: the small ones concatenated and summed in one pass, each large one where it is) and one
scalar read per sync, and donation is off while it looks (a graph's inputs must survive it, to
run again if it finds a NaN).

    .venv/bin/python notebook_ext/bench/debug_tools.py
    XLAPROF_DEVICE=cuda python notebook_ext/bench/debug_tools.py --size realistic --rounds 5

`--size realistic` is the GPT-2 of the GPU figures (12 layers, d=768, sequence 512, batch 8:
notebook_ext/bench/torch_gpu.py), where the step is the device's work and no longer the host's.
"""

import argparse
import contextlib
import pathlib
import statistics
import sys
import time

import torch

import xlaprof.torch as xt

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "samples" / "torch"))
from models import MODELS  # noqa: E402

STEPS = 10


def model_and_batch(size: str):
    """The GPT-2 of samples/torch (`small`) or of the GPU figures (`realistic`), its batch and loss."""
    if size == "small":
        build, make_batch, loss_of = MODELS["gpt2"]
        return build(), make_batch(torch.Generator().manual_seed(1)), loss_of, "2 layers, d=64, seq 32, batch 4"
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    import torch_gpu

    layers, width, _, seq, batch = torch_gpu.SIZES[size]
    ids = torch.randint(0, 50257, (batch, seq), generator=torch.Generator().manual_seed(1))
    return (torch_gpu.gpt2(size), {"input_ids": ids, "labels": ids}, lambda m, b: m(**b).loss,
            f"{layers} layers, d={width}, seq {seq}, batch {batch}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=("small", "realistic"), default="small")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    dev = xt.device()
    torch.manual_seed(0)
    model, batch, loss_of, shape = model_and_batch(args.size)
    model = model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = {k: v.to(dev) for k, v in batch.items()}

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
            xt.wait()  # the round's last step done (the host runs a step ahead of the device)
            return (time.perf_counter() - t) / STEPS

    for ctx in (contextlib.nullcontext, xt.detect_anomaly):  # compiles, both ways
        for _ in range(3):
            rounds(ctx)
    off, on = [], []
    for _ in range(args.rounds):
        off.append(rounds(contextlib.nullcontext))
        on.append(rounds(xt.detect_anomaly))
    a, b = statistics.median(off), statistics.median(on)
    print(f"GPT-2 ({shape}) AdamW step on the device ({dev}), medians of {args.rounds} "
          f"alternating rounds of {STEPS}: {a * 1e3:.2f} ms, under detect_anomaly() {b * 1e3:.2f} ms "
          f"(cost {100 * (b / a - 1):+.1f} %)")


if __name__ == "__main__":
    main()
