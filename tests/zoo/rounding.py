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

    .venv/bin/python tests/zoo/rounding.py resnet18 [--steps 20] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
from typing import Dict, List

import zoo


def losses(name: str, how: str, steps: int, dtype: str = "float32") -> List[float]:
    import torch

    if how.startswith("eager"):
        threads = torch.get_num_threads()
        torch.set_num_threads(1 if how == "eager, 1 thread" else threads)
        try:
            return zoo.train_eager(name, steps, "cpu", "float64" if how == "eager, float64" else dtype)["losses"]
        finally:
            torch.set_num_threads(threads)
    import xlaprof.torch as xt

    torch.manual_seed(0)
    model = zoo.MODELS[name][1]().to(xt.device(), getattr(torch, dtype))
    compiled = how == "engine, compiled"
    end_step = (lambda: None) if compiled else xt.step
    return [loss for loss, _ in zoo.train(name, model, xt.device(), steps, end_step,
                                          "xlaprof" if compiled else "", dtype)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help=f"any of: {' '.join(zoo.MODELS)}")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    args = ap.parse_args()
    if args.model not in zoo.MODELS:
        ap.error(f"unknown model {args.model}; the zoo has: {' '.join(zoo.MODELS)}")
    import torch

    ways = ["eager, float64", "eager, 1 thread", f"eager, {torch.get_num_threads()} threads",
            "engine, lazy", "engine, compiled"]
    runs: Dict[str, List[float]] = {how: losses(args.model, how, args.steps, args.dtype) for how in ways}
    truth = runs.pop(ways[0])
    print(f"{args.model}: each {args.dtype} step's loss, relative to float64 eager's ({args.steps} AdamW steps)")
    print(f"{args.dtype + ' run':<20} {'largest':>8}  by step")
    for how, values in runs.items():
        gaps = [abs(v - t) / max(abs(t), 1e-12) for v, t in zip(values, truth)]
        print(f"{how:<20} {max(gaps):>8.1e}  " + " ".join(f"{g:.0e}" for g in gaps), flush=True)


if __name__ == "__main__":
    main()
