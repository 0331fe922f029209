"""The demo that `bash scripts/demo.sh` runs: a PyTorch training loop on the xlaprof device, as
a PyTorch/XLA user writes it, recorded by the profiler, then its report and where to look next.

    .venv/bin/python samples/torch/demo.py [--out demo.xlaprof]

The loop has two mistakes that real lazy-tensor programs make, so the report has something to
find:
- the data set does not divide into whole batches: the last, smaller batch of each epoch
  compiles another graph (a recompile, explained by the input whose shape changed);
- a guard against a diverging loss reads the loss before the step ends (`loss.item()`): a
  hidden sync, so every step runs as two graphs instead of one.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import time

import torch

import xlaprof as xp
import xlaprof.torch as xt

SAMPLES, BATCH, EPOCHS = 1000, 64, 2  # 1000 = 15 batches of 64 and one of 40
ROOT = pathlib.Path(__file__).resolve().parents[2]


def data() -> tuple:
    """Ten classes, each a random prototype image plus noise (nothing downloaded)."""
    g = torch.Generator().manual_seed(42)
    prototypes = torch.randn(10, 784, generator=g)
    labels = torch.randint(0, 10, (SAMPLES,), generator=g)
    images = prototypes[labels] + 4.0 * torch.randn(SAMPLES, 784, generator=g)
    return images, labels


def train(dev: torch.device) -> list:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10),
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images, labels = data()
    losses = []
    for epoch in range(EPOCHS):
        for start in range(0, SAMPLES, BATCH):  # the last batch is smaller: a recompile
            x = images[start:start + BATCH].to(dev)
            y = labels[start:start + BATCH].to(dev)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            if loss.item() > 100:  # a guard that reads the loss mid-step: a hidden sync
                raise RuntimeError(f"the loss diverged: {loss.item()}")
            loss.backward()
            opt.step()
            opt.zero_grad()
            xt.step()
            losses.append(loss)
        print(f"  epoch {epoch + 1}: loss {losses[-1].item():.4f}")
    return losses


def command() -> str:
    """How to run the `xlaprof` command here: the checkout's build, else the installed one."""
    built = pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target") / "release" / "xlaprof"
    if built.exists():
        return os.path.relpath(built)
    return shutil.which("xlaprof") or "cargo run --release -p xlaprof --"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="demo.xlaprof", help="where the profile is written")
    args = ap.parse_args()
    print(f"xlaprof demo: a torch MLP (784-256-256-10, AdamW) trained on the xlaprof device under the "
          f"profiler;\n  {SAMPLES} samples in batches of {BATCH}, {EPOCHS} epochs; profile: {args.out}\n")
    t = time.perf_counter()
    with xp.profile("demo: a torch training loop") as p:
        train(xt.device())
    p.save(args.out)
    print(f"  trained in {time.perf_counter() - t:.1f} s\n")
    print(p.report(short=True))
    xlaprof = command()
    print("Where to look next:")
    print(f"  {xlaprof} view {args.out}      the terminal UI: timeline, findings, graphs, lines")
    print(f"  {xlaprof} gui {args.out}       the desktop viewer")
    print(f"  {xlaprof} report {args.out}    the whole report, with PyTorch/XLA's metrics and counters")
    print(f"  {xlaprof} report {args.out} --format chrome -o demo.json   a Perfetto / chrome://tracing trace")
    print("  in a notebook: %load_ext xlaprof, then %%xla_profile above a cell: the interactive view")
    print("  the fixes: drop the last, smaller batch (or pad it), and read the loss after xt.step()")


if __name__ == "__main__":
    main()
