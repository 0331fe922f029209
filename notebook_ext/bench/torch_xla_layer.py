"""What the torch_xla layer costs (``xlaprof.torch_xla``): it maps calls, not ops, so a program's
aten ops are recorded as ``xlaprof.torch`` records them, and a step is ``xt.step()``. Measured in
one process, alternating blocks, medians:

- recording cost per aten op: the 1,000-op chain ``x * 1.0001 + 0.5`` on f32[64,64], recorded (not
  run) with the layer installed, and with the whole program recorded as the runner records it
  (``python -m xlaprof.torch_xla`` keeps the process's profile for ``met.metrics_report()``);
- a step: ``xm.mark_step()`` against ``xt.step()`` on a small graph found in the cache, and
  ``torch_xla.compile``'s call of the same step against the bare function with ``xt.step()``.

    .venv/bin/python notebook_ext/bench/torch_xla_layer.py
"""

import statistics
import time

import torch

import xlaprof as xp
import xlaprof.torch as xt
import xlaprof.torch_xla

xlaprof.torch_xla.install()

import torch_xla  # noqa: E402
import torch_xla.core.xla_model as xm  # noqa: E402

DEV = torch_xla.device()


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def chain(x):
    for _ in range(500):  # two aten ops each
        x = x * 1.0001 + 0.5
    return x


def per_op_us():
    x = torch.randn(64, 64).to(DEV)
    t = median_time(lambda: chain(x), 7)
    xt.sync()
    return t / 1000 * 1e6


def step_us(end_step, w):
    def one():
        w.mul_(0.999).add_(0.001)
        end_step()

    for _ in range(5):
        one()
    return median_time(one, 200) * 1e6


def compiled_step_us(w):
    @torch_xla.compile
    def body():
        w.mul_(0.999).add_(0.001)

    for _ in range(5):
        body()
    return median_time(body, 200) * 1e6


def bare_step_us(w):
    def body():
        w.mul_(0.999).add_(0.001)
        xt.step()

    for _ in range(5):
        body()
    return median_time(body, 200) * 1e6


def main():
    w = torch.ones(256, 256).to(DEV)
    rows = {"per aten op, recorded": [], "per aten op, recorded, whole program profiled": [],
            "xt.step()": [], "xm.mark_step()": [], "function + xt.step()": [], "torch_xla.compile(function)": []}
    for _ in range(3):
        rows["per aten op, recorded"].append(per_op_us())
        rows["xt.step()"].append(step_us(xt.step, w))
        rows["xm.mark_step()"].append(step_us(xm.mark_step, w))
        rows["function + xt.step()"].append(bare_step_us(w))
        rows["torch_xla.compile(function)"].append(compiled_step_us(w))
        with xp.profile():
            rows["per aten op, recorded, whole program profiled"].append(per_op_us())
    print(f"{'':48s} {'us (median of 3 blocks)':>24s}")
    for name, values in rows.items():
        print(f"{name:48s} {statistics.median(values):24.2f}")


if __name__ == "__main__":
    main()
