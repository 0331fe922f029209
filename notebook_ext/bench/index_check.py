"""What the index check costs a training step. The bridge checks every index against the size
it indexes, as torch's CPU and CUDA kernels do (on by default; `XLAPROF_CHECK=0` turns it off):
each indexing op adds its indices' smallest and largest value to the step's graph, and the
step's sync reads them back with its results (`xlaprof/torch/_check.py`). Here the zoo's models
that index (token embeddings, position ids, gathers: tests/zoo) and a GPT-2 are trained lazily,
each in a process of its own, in rounds of steps alternating with the check and without it (a
process's speed drifts more than the check costs, on shared cores); each figure is the median
over the rounds of a round's median step. The rounds without it still route indexing ops
through the check's Python wrapper (a microsecond an op), which the process turned on.

    .venv/bin/python notebook_ext/bench/index_check.py                    # the zoo's language models, GPT-2 small
    .venv/bin/python notebook_ext/bench/index_check.py gpt2 bert --rounds 9
    XLAPROF_DEVICE=cuda python notebook_ext/bench/index_check.py gpt2-realistic

`gpt2-small` is GPT-2 at 4 layers, d=256, sequence 128, batch 4; `gpt2-realistic` the GPU
figures' size (12 layers, d=768, sequence 512, batch 8: notebook_ext/bench/torch_gpu.py).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Tuple

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests" / "zoo"))
sys.path.insert(0, str(HERE))

GPT2_SIZES = {"gpt2-small": (4, 256, 4, 128, 4), "gpt2-realistic": (12, 768, 12, 512, 8)}


def zoo_models() -> List[str]:
    import zoo

    return [name for name, (family, *_) in zoo.MODELS.items() if family in ("decoder", "encoder", "encoder-decoder")]


def gpt2_step(size: str) -> Callable[[], None]:
    """GPT-2 at `size` on the device: one lazy AdamW step."""
    import torch
    import transformers

    import xlaprof.torch as xt

    layers, width, heads, seq, batch = GPT2_SIZES[size]
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=layers, n_embd=width, n_head=heads, n_positions=1024,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(config).to(xt.device())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, config.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(1))

    def step() -> None:
        loss = model(input_ids=ids.to(xt.device()), labels=ids.to(xt.device())).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        xt.step()

    return step


def zoo_step(name: str) -> Callable[[], None]:
    """`name` of the zoo on the device: one lazy AdamW step on its next batch."""
    import torch
    import zoo

    import xlaprof.torch as xt

    torch.manual_seed(0)
    model = zoo.MODELS[name][1]().to(xt.device())
    steps = zoo.train(name, model, xt.device(), 1 << 30, xt.step)
    return lambda: next(steps) and None


def one(name: str, steps: int, rounds: int) -> Dict[str, Any]:
    """`name` trained in this process, rounds of `steps` alternating without the check and with
    it: each side's median round, in ms a step."""
    import xlaprof.torch as xt
    from xlaprof.torch import _check

    step = gpt2_step(name) if name in GPT2_SIZES else zoo_step(name)

    def round_ms(checked: bool) -> float:
        _check.ENABLED = checked
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            step()
            xt.wait()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e3

    for checked in (False, True, False, True):  # each side's graphs compiled
        round_ms(checked)
    off, on = [], []
    for _ in range(rounds):
        off.append(round_ms(False))
        on.append(round_ms(True))
    return {"off_ms": statistics.median(off), "on_ms": statistics.median(on)}


def measure(name: str, steps: int, rounds: int) -> Tuple[float, float]:
    env = {**os.environ, "XLAPROF_CHECK": "1", "PYTHONWARNINGS": "ignore"}
    run = subprocess.run([sys.executable, __file__, "--one", name, "--steps", str(steps), "--rounds", str(rounds)],
                         capture_output=True, text=True, env=env, timeout=1800)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode or not lines:
        raise RuntimeError(f"{name}: " + (run.stderr.strip().splitlines() or ["no output"])[-1])
    row = json.loads(lines[-1])
    return row["off_ms"], row["on_ms"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="zoo models, gpt2-small or gpt2-realistic (default: the zoo's "
                                              "language models and gpt2-small)")
    ap.add_argument("--steps", type=int, default=5, help="steps a round")
    ap.add_argument("--rounds", type=int, default=7, help="rounds each way")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.steps, args.rounds)))
        return
    names = args.models or zoo_models() + ["gpt2-small"]
    print(f"{'model':<15} {'unchecked ms':>12} {'checked ms':>10} {'cost':>7}", flush=True)
    costs = []
    for name in names:
        try:
            a, b = measure(name, args.steps, args.rounds)
        except RuntimeError as e:
            print(f"{name:<15} error: {str(e)[:120]}", flush=True)
            continue
        costs.append(b / a - 1)
        print(f"{name:<15} {a:>12.2f} {b:>10.2f} {100 * (b / a - 1):>+6.1f}%", flush=True)
    if costs:
        print(f"median cost {100 * statistics.median(costs):+.1f} %, largest {100 * max(costs):+.1f} % "
              f"({len(costs)} models, {args.rounds} rounds each way of {args.steps} steps, alternating)")


if __name__ == "__main__":
    main()
