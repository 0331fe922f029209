"""Where a compiled training step's time goes: each program the step runs, timed alone on the
device, beside the step's wall time; with --jax PYTHON, the same step written in JAX, split the
same way (forward, forward and backward, AdamW alone) and whole (one jitted program).

A step under `torch.compile(model)` and `torch.compile(opt.step)` runs several programs: the
forward graph, the lazy code between the compiled calls (torch_compile.py's loss is computed
outside the compiled model), the backward graph and the optimizer's. Here the host waits for each
program before it goes on (`XLAPROF_RUN_AHEAD=0`), so each execution's time is the device's alone;
the step's wall time minus their sum is then the host's share (guards, wrappers, launches, the
lazy code's recording, and the events of the profiler that times the programs). XLA fuses across
the forward, the backward and the optimizer only inside one program: JAX's whole step against its
parts tells what the split costs on the device.

    .venv/bin/python notebook_ext/bench/compiled_split.py [mlp gpt2] [--jax /path/to/python]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time
from typing import Any, Dict, List

from torch_compile import json_row

HERE = pathlib.Path(__file__).resolve().parent
WARM, MEASURED = 10, 60


def split(name: str) -> Dict[str, Any]:
    """The compiled step of ``name`` (torch_compile.py's workload): its wall time and each
    program's execution, medians over the measured steps, in the order the step runs them."""
    os.environ["XLAPROF_RUN_AHEAD"] = "0"  # read when the engine starts, below
    import polars as pl
    import torch

    import xlaprof as xp
    import xlaprof.torch as xt
    from torch_compile import workload

    device = xt.device()
    model, make_batch, loss_of = workload(name)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    forward, opt_step = torch.compile(model, backend="xlaprof"), torch.compile(opt.step, backend="xlaprof")
    g = torch.Generator().manual_seed(1)
    batches = [{k: v.to(device) for k, v in make_batch(g).items()} for _ in range(10)]
    walls: List[float] = []
    with xp.Profile(f"{name} compiled step") as profile:
        for i in range(WARM + MEASURED):
            start = time.perf_counter()
            loss = loss_of(forward, batches[i % len(batches)])
            loss.backward()
            opt_step()
            opt.zero_grad()
            loss.item()
            walls.append(time.perf_counter() - start)
    tables = profile.to_polars()
    # Each program's runs after its first WARM (the warm-up steps' runs, its compile's among them).
    runs = (tables["executions"].sort("start_ns")
            .with_columns(pl.int_range(pl.len()).over("graph").alias("nth"))
            .filter(pl.col("nth") >= WARM))
    programs = (runs.group_by("graph")
                .agg(pl.len().alias("runs"), pl.col("start_ns").min().alias("first"),
                     (pl.col("duration_ns").median() / 1e3).alias("us"))
                .join(tables["graphs"].select("graph", "nodes", "inputs", "outputs"), on="graph")
                .join(tables["compiles"].unique("graph", keep="first").select("graph", "source"), on="graph", how="left")
                .sort("first"))
    return {"workload": name, "step_ms": statistics.median(walls[WARM:]) * 1e3,
            "programs": [{k: r[k] for k in ("runs", "us", "nodes", "inputs", "outputs", "source")}
                         for r in programs.iter_rows(named=True)]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="*", default=["mlp"])
    ap.add_argument("--jax", help="a Python with JAX, for the MLP's step split in JAX")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(split(args.one)))
        return
    for name in args.workloads:
        row = json_row([sys.executable, __file__, "--one", name], {**os.environ, "PYTHONWARNINGS": "ignore"})
        if "error" in row:
            print(f"{name}: error: {row['error']}")
            continue
        device_ms = sum(p["us"] for p in row["programs"]) / 1e3
        print(f"{name}, compiled (backend=\"xlaprof\"): step {row['step_ms']:.2f} ms wall, "
              f"{device_ms:.2f} ms on the device in {len(row['programs'])} programs, "
              f"{row['step_ms'] - device_ms:.2f} ms the host's")
        print(f"  {'device us':>9} {'nodes':>6} {'in':>4} {'out':>4}  compiled at")
        for p in row["programs"]:
            print(f"  {p['us']:>9.1f} {p['nodes']:>6} {p['inputs']:>4} {p['outputs']:>4}  {p['source'] or '-'}")
        if name == "mlp" and args.jax:
            parts = json_row([args.jax, str(HERE / "mlp_jax.py"), "--split"])
            if "error" in parts:
                print(f"mlp, JAX: error: {parts['error']}")
                continue
            print("mlp, JAX (device time, each program alone): " +
                  ", ".join(f"{k} {v:.2f} ms" for k, v in parts.items()))


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
