"""How far float32 training drifts from float64, on the engine and in torch's own CPU eager.

A model whose float32 training amplifies rounding (ResNet-18's, where AdamW's first step turns
the rounding of near-zero gradients into different updates) cannot be held to a loss gap against
CPU eager: two float32 runs differ by the order they add in. This trains one zoo model the same
steps five ways from the same initial weights and batches, and prints each step's loss gap to the
float64 run (torch's CPU eager in float64: the truth to rounding's order): torch's float32 eager
on one thread and on this machine's threads, the engine's float32 lazily and under
``torch.compile(backend="xlaprof")``. A wrong lowering shows as a gap far above eager's own; an
engine as exact as torch's float32 stays in the band torch's two thread counts make.
``--dtype bfloat16`` trains the four runs in bfloat16 instead (a model cast to it, as bf16
training does), still against float64: the engine's reductions and normalizations round as
torch's do, so its drift is eager's.

Where rounding is amplified, when a run departs is chance: one ReLU whose input is within
rounding of zero (-4e-8 in float64) goes the other way, its gradient differs by that one
value, and AdamW carries the difference on. One draw of weights and batches tells little;
``--seeds N`` trains N draws and prints, for each way, the median of the largest gap and of
the first step over 1e-4, which is what to compare. ``--ops`` instead feeds each of the
model's modules (its leaves: a convolution, a batch norm) the same float32 input, taken from a
float64 forward pass, and prints how far torch's float32 and the engine's outputs are from the
module's float64 output on that input: which op rounds more than torch's.

    .venv/bin/python tests/zoo/rounding.py resnet18 [--steps 20] [--dtype bfloat16] [--seeds 8] [--ops]
"""

from __future__ import annotations

import argparse
import copy
import statistics
from typing import Dict, List

import zoo

DEPARTED = 1e-4  # a gap to float64 past which a run has left it


def losses(name: str, how: str, steps: int, dtype: str = "float32", seed: int = 0) -> List[float]:
    import torch

    if how.startswith("eager"):
        threads = torch.get_num_threads()
        torch.set_num_threads(1 if how == "eager, 1 thread" else threads)
        try:
            return zoo.train_eager(name, steps, "cpu", "float64" if how == "eager, float64" else dtype,
                                   seed)["losses"]
        finally:
            torch.set_num_threads(threads)
    import xlaprof.torch as xt

    torch.manual_seed(seed)
    model = zoo.MODELS[name][1]().to(xt.device(), getattr(torch, dtype))
    compiled = how == "engine, compiled"
    end_step = (lambda: None) if compiled else xt.step
    return [loss for loss, _ in zoo.train(name, model, xt.device(), steps, end_step,
                                          "xlaprof" if compiled else "", dtype, seed)]


def gaps(values: List[float], truth: List[float]) -> List[float]:
    return [abs(v - t) / max(abs(t), 1e-12) for v, t in zip(values, truth)]


def departure(gap: List[float]) -> int:
    """The first step (from 1) whose gap is over `DEPARTED`; one past the last if none is."""
    return next((i + 1 for i, g in enumerate(gap) if g > DEPARTED), len(gap) + 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help=f"any of: {' '.join(zoo.MODELS)}")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    ap.add_argument("--seeds", type=int, default=1, help="draws of weights and batches (medians over them)")
    ap.add_argument("--ops", action="store_true", help="each module's rounding on the same input, not training")
    args = ap.parse_args()
    if args.model not in zoo.MODELS:
        ap.error(f"unknown model {args.model}; the zoo has: {' '.join(zoo.MODELS)}")
    import torch

    ways = ["eager, float64", "eager, 1 thread", f"eager, {torch.get_num_threads()} threads",
            "engine, lazy", "engine, compiled"]
    if args.ops:
        return by_module(args.model)
    if args.seeds > 1:
        return by_seeds(args.model, ways, args.steps, args.dtype, args.seeds)
    runs: Dict[str, List[float]] = {how: losses(args.model, how, args.steps, args.dtype) for how in ways}
    truth = runs.pop(ways[0])
    print(f"{args.model}: each {args.dtype} step's loss, relative to float64 eager's ({args.steps} AdamW steps)")
    print(f"{args.dtype + ' run':<20} {'largest':>8}  by step")
    for how, values in runs.items():
        gap = gaps(values, truth)
        print(f"{how:<20} {max(gap):>8.1e}  " + " ".join(f"{g:.0e}" for g in gap), flush=True)


def by_seeds(model: str, ways: List[str], steps: int, dtype: str, seeds: int) -> None:
    """Each way's largest gap and departure step over `seeds` draws, and their medians."""
    largest: Dict[str, List[float]] = {how: [] for how in ways[1:]}
    departs: Dict[str, List[int]] = {how: [] for how in ways[1:]}
    for seed in range(seeds):
        truth = losses(model, ways[0], steps, dtype, seed)
        for how in ways[1:]:
            gap = gaps(losses(model, how, steps, dtype, seed), truth)
            largest[how].append(max(gap))
            departs[how].append(departure(gap))
    print(f"{model}: {dtype} loss gaps to float64 eager's over {seeds} draws of weights and batches "
          f"({steps} AdamW steps; departed: first step over {DEPARTED:.0e}, {steps + 1} if none)")
    print(f"{dtype + ' run':<20} {'largest':>8} {'departed':>9}  by draw (largest / departed)")
    for how in ways[1:]:
        draws = " ".join(f"{g:.0e}/{d}" for g, d in zip(largest[how], departs[how]))
        print(f"{how:<20} {statistics.median(largest[how]):>8.1e} {statistics.median(departs[how]):>9}  {draws}",
              flush=True)


def by_module(name: str) -> None:
    """Each leaf module's float32 output on its float64 input rounded to float32, relative to
    its float64 output on that same rounded input: torch's CPU eager, the engine, and their ratio."""
    import torch

    import xlaprof.torch as xt

    _, build, make_batch, loss_of = zoo.MODELS[name]
    torch.manual_seed(0)
    model = build().double()
    leaves = {n: m for n, m in model.named_modules() if n and not list(m.children())}
    inputs: Dict[str, object] = {}
    def keep(n: str, args: tuple) -> None:  # (a hook that returns a value replaces the output)
        inputs.setdefault(n, args[0].detach() if args and torch.is_tensor(args[0]) else None)

    for n, m in leaves.items():
        m.register_forward_hook(lambda m, i, o, n=n: keep(n, i))
    batch = make_batch(torch.Generator().manual_seed(1))
    loss_of(model, {k: v.double() if v.is_floating_point() else v for k, v in batch.items()})

    def rel(a: object, b: object) -> float:
        return float((a.double() - b).norm() / max(float(b.norm()), 1e-300))

    print(f"{name}: each module's float32 output on the same input, relative to float64's")
    print(f"{'module':<28} {'kind':<18} {'eager':>8} {'engine':>8} {'ratio':>6}")
    for n, m in leaves.items():
        x = inputs.get(n)
        if x is None or not x.is_floating_point():
            continue
        x = x.float()
        with torch.no_grad():
            truth = m(x.double())
            if truth.norm() == 0:
                continue
            eager = rel(copy.deepcopy(m).float()(x), truth)
            engine = rel(copy.deepcopy(m).float().to(xt.device())(x.to(xt.device())).cpu(), truth)
        print(f"{n:<28} {type(m).__name__:<18} {eager:>8.1e} {engine:>8.1e} {engine / max(eager, 1e-30):>6.2f}",
              flush=True)


if __name__ == "__main__":
    main()
