"""What the torch_xla layer costs (``xlaprof.torch_xla``): it maps calls, not ops, so a program's
aten ops are recorded as ``xlaprof.torch`` records them, and a step is ``xt.step()``. Measured in
one process, blocks in alternating order, medians:

- recording cost per aten op: the 1,000-op chain ``x * 1.0001 + 0.5`` on f32[64,64], recorded (not
  run) with the layer installed, and with the whole program recorded as the runner records it
  (``python -m xlaprof.torch_xla`` keeps the process's profile for ``met.metrics_report()``);
- a step: a small update ended by ``xm.mark_step()`` against the same ended by ``xt.step()``
  (a graph found in the cache), and the update as a ``torch_xla.compile``d function's call;
  and what the call alone costs, on a step with nothing pending (the fastest of 5 x 20,000).

    .venv/bin/python notebook_ext/bench/torch_xla_layer.py
"""

import statistics
import timeit

import torch

import xlaprof as xp
import xlaprof.torch as xt
import xlaprof.torch_xla

xlaprof.torch_xla.install()

import torch_xla  # noqa: E402
import torch_xla.core.xla_model as xm  # noqa: E402
from torch_bridge import median_time  # noqa: E402  (this folder's: the bridge's bench)

DEV = torch_xla.device()


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
    """A small update of ``w`` ended by ``end_step`` (found in the cache after warm-up)."""
    def one():
        w.mul_(0.999).add_(0.001)
        end_step()

    for _ in range(5):
        one()
    return median_time(one, 200) * 1e6


def compiled_step_us(w):
    """The same update as a ``torch_xla.compile``d function, whose call ends the step."""
    @torch_xla.compile
    def body():
        w.mul_(0.999).add_(0.001)

    for _ in range(5):
        body()
    return median_time(body, 200) * 1e6


def empty_step_us(end_step):
    """A step with nothing pending: what the call itself costs."""
    return min(timeit.repeat(end_step, number=20000, repeat=5)) / 20000 * 1e6


def per_op_profiled_us():
    with xp.profile():
        return per_op_us()


def main():
    w = torch.ones(256, 256).to(DEV)
    rows = {
        "per aten op, recorded": per_op_us,
        "per aten op, recorded, whole program profiled": per_op_profiled_us,
        "xt.step(), nothing pending": lambda: empty_step_us(xt.step),
        "xm.mark_step(), nothing pending": lambda: empty_step_us(xm.mark_step),
        "update + xt.step()": lambda: step_us(xt.step, w),
        "update + xm.mark_step()": lambda: step_us(xm.mark_step, w),
        "torch_xla.compile(update)()": lambda: compiled_step_us(w),
    }
    times = {name: [] for name in rows}
    for block in range(6):
        # Each figure first in some blocks and last in others: a figure measured after
        # another runs on a warmer (or busier) machine.
        for name in (list(rows) if block % 2 == 0 else list(reversed(rows))):
            times[name].append(rows[name]())
    print(f"{'':48s} {'us (median of 6 blocks)':>24s}")
    for name, values in times.items():
        print(f"{name:48s} {statistics.median(values):24.2f}")


if __name__ == "__main__":
    main()
