"""Where a compiled optimizer's step counts live: a compiled AdamW training step (the model and
`opt.step` under `torch.compile(backend="xlaprof")`) with its step counts on the device (what the
backend does, as Dynamo does on CUDA) against the same step with them on the CPU (torch's own
placement for a device it does not know as a GPU: computed by torch at each call, uploaded and
written back). Both in one process, rounds of 10 steps alternating; medians and minimums.

    .venv/bin/python notebook_ext/bench/compiled_optimizer.py [mlp gpt2] [--rounds 30]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time
from typing import Callable, Dict, List

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
from torch._dynamo.variables.optimizer import OptimizerVariable  # noqa: E402

import torch_compile  # noqa: E402  (the workloads)
import xlaprof.torch as xt  # noqa: E402


def compiled_step(name: str, counts_on_device: bool) -> Callable[[], torch.Tensor]:
    """A compiled training step of `name`, warmed up; its optimizer's state is made with the step
    counts where asked (the placement is decided when Dynamo first traces the step)."""
    device_too = OptimizerVariable._safe_to_set_capturable
    OptimizerVariable._safe_to_set_capturable = device_too if counts_on_device else device_too.gpu_only
    try:
        model, make_batch, loss_of = torch_compile.workload(name)
        model.to(xt.device())
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        forward, opt_step = torch.compile(model, backend="xlaprof"), torch.compile(opt.step, backend="xlaprof")
        batch = {k: v.to(xt.device()) for k, v in make_batch(torch.Generator().manual_seed(1)).items()}

        def step() -> torch.Tensor:
            loss = loss_of(forward, batch)
            loss.backward()
            opt_step()
            opt.zero_grad()
            return loss

        for _ in range(6):
            step().item()
    finally:
        OptimizerVariable._safe_to_set_capturable = device_too
    where = next(iter(opt.state.values()))["step"].device.type
    assert (where != "cpu") == counts_on_device, where
    return step


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workloads", nargs="*", default=["mlp", "gpt2"])
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    print(f"{'workload':<9} {'step counts':<12} {'median ms':>9} {'min ms':>7}")
    for name in args.workloads:
        steps = {"on the CPU": compiled_step(name, False), "on device": compiled_step(name, True)}
        times: Dict[str, List[float]] = {k: [] for k in steps}
        for _ in range(args.rounds):
            for where, step in steps.items():
                t = time.perf_counter()
                for _ in range(10):
                    loss = step()
                loss.item()
                times[where].append((time.perf_counter() - t) / 10 * 1e3)
        for where, ms in times.items():
            print(f"{name:<9} {where:<12} {statistics.median(ms):9.2f} {min(ms):7.2f}")
        ratio = statistics.median(times["on device"]) / statistics.median(times["on the CPU"])
        print(f"{name:<9} on device / on the CPU: {ratio:.2f}")


if __name__ == "__main__":
    main()
