"""An AdamW step alone, over a model's worth of large tensors (six 2048x2048 `Linear` layers by
default: 12 tensors, 100 MB of parameters): torch's eager (its foreach kernels; on CUDA with
`XLAPROF_DEVICE=cuda`, where the engine runs on the CUDA plugin), the lazy
path (`xt.step()` after `opt.step()`), `torch.compile(opt.step, backend="xlaprof")`, and with
--jax PYTHON the same update written in JAX (`adamw_jax.py`, jitted with the state donated), each
in a process of its own. Per mode: the median step and the minor page faults per step (memory
touched for the first time: outputs written to new buffers instead of the donated old ones).

What it measures is what donation buys: a step that writes parameters and moments into their own
buffers reads and writes the state once, where a step whose donations are paired wrongly copies
inputs and outputs (XLA must keep an input alive while another output overwrites it), and one
that donates nothing writes a second copy of the state to fresh memory every step.

    .venv/bin/python notebook_ext/bench/optimizer_step.py [--layers 6] [--width 2048] [--jax PYTHON]

On a GPU the page faults say nothing of the device's memory; the step times are the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time
from typing import Any, Dict

HERE = pathlib.Path(__file__).resolve().parent
STEPS, WARM = 20, 5
# Eager runs where the engine does: on CUDA beside the CUDA plugin.
EAGER = "cuda" if os.environ.get("XLAPROF_DEVICE") == "cuda" else "cpu"

JAX_PROGRAM = """
import json, resource, statistics, sys, time
import jax, jax.numpy as jnp
sys.path.insert(0, {here!r})
from adamw_jax import adamw, initial
layers, width = {layers}, {width}
key = jax.random.PRNGKey(0)
params = [(jax.random.normal(key, (width, width)) * 0.02, jnp.zeros((width,))) for _ in range(layers)]
grads = jax.tree.map(jnp.ones_like, params)
m, v, t = initial(params)
step = jax.jit(adamw, donate_argnums=(0, 1, 2, 3))
times, faults = [], []
for i in range({steps} + {warm}):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    params, m, v, t = step(params, m, v, t, grads)
    jax.block_until_ready(params)
    if i >= {warm}:
        times.append(time.perf_counter() - start)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
print(json.dumps({{"step_ms": statistics.median(times) * 1e3, "faults": statistics.median(faults)}}))
"""


def run_torch(mode: str, layers: int, width: int) -> Dict[str, Any]:
    import torch

    device: Any = EAGER
    if mode != "eager":
        import xlaprof.torch as xt

        device = xt.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    step = torch.compile(opt.step, backend="xlaprof") if mode == "compiled" else opt.step

    def one() -> None:
        step()
        if mode == "lazy":
            xt.step()
        if mode != "eager":
            xt.wait()
        elif device == "cuda":
            torch.cuda.synchronize()

    times, faults = [], []
    for i in range(STEPS + WARM):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        one()
        if i >= WARM:
            times.append(time.perf_counter() - start)
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    return {"step_ms": statistics.median(times) * 1e3, "faults": statistics.median(faults)}


def in_process(cmd: list) -> Dict[str, Any]:
    run = subprocess.run(cmd, capture_output=True, text=True)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode or not lines:
        return {"error": (run.stderr.strip().splitlines() or ["?"])[-1][:100]}
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--jax", help="a Python with JAX, for the same update written in JAX")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_torch(args.one, args.layers, args.width)))
        return
    mb = args.layers * (args.width * args.width + args.width) * 4 / 1e6
    print(f"AdamW step over {2 * args.layers} tensors ({mb:.0f} MB of parameters), {STEPS} steps after {WARM};"
          f" eager on {EAGER}")
    print(f"{'mode':<10} {'step ms':>9} {'faults/step':>12}")
    size = ["--layers", str(args.layers), "--width", str(args.width)]
    rows = [(mode, in_process([sys.executable, __file__, "--one", mode] + size))
            for mode in ("eager", "lazy", "compiled")]
    if args.jax:
        program = JAX_PROGRAM.format(here=str(HERE), layers=args.layers, width=args.width, steps=STEPS, warm=WARM)
        rows.append(("jax", in_process([args.jax, "-c", program])))
    for mode, r in rows:
        if "error" in r:
            print(f"{mode:<10} error: {r['error']}")
        else:
            print(f"{mode:<10} {r['step_ms']:>9.2f} {r['faults']:>12.0f}", flush=True)


if __name__ == "__main__":
    main()
