"""Trains a real model with AdamW on the xlaprof device, each step beside torch's CPU eager.

    .venv/bin/python samples/torch/train.py gpt2        # or bert, resnet18
    xlaprof run -- .venv/bin/python samples/torch/train.py bert

Prints each step's two losses, the device's step time and its compiles so far, then the aten ops
that ran on the CPU fallback (none, for these models).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import torch

import xlaprof as xp
import xlaprof.torch as xt

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from models import MODELS  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    build, make_batch, loss_of = MODELS[args.model]
    dev = xt.device()

    torch.manual_seed(0)
    eager = build()
    lazy = build()
    lazy.load_state_dict(eager.state_dict())
    lazy = lazy.to(dev)
    opt_eager = torch.optim.AdamW(eager.parameters(), lr=1e-3)
    opt_lazy = torch.optim.AdamW(lazy.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    for step in range(args.steps):
        batch = make_batch(g)

        start = time.perf_counter()
        loss = loss_of(lazy, {k: v.to(dev) for k, v in batch.items()})
        loss.backward()
        opt_lazy.step()
        opt_lazy.zero_grad()
        xt.step()
        ours = loss.item()
        seconds = time.perf_counter() - start

        ref = loss_of(eager, batch)
        ref.backward()
        opt_eager.step()
        opt_eager.zero_grad()
        print(f"step {step}: loss {ours:.6f} (CPU eager {ref.item():.6f}), {seconds * 1e3:.1f} ms, "
              f"compiles so far {xp.counters()['compiles']}", flush=True)
    print(f"CPU fallbacks: {xt.fallbacks() or 'none'}")


if __name__ == "__main__":
    main()
