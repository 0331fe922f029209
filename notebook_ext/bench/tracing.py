"""Figures for the Python API (a benchmark, not a test): the cost of recording one op from
Python (also while a profile records, which times each call for the line profiler), and the
overhead of the %xla_profile magic on a cell that trains an MLP for 50 steps.

    .venv/bin/python notebook_ext/bench/tracing.py

Compare the per-op figure with the Rust API's (`cargo run --release -p xlaprof -- bench`, its
"tracing per op" line). PyTorch/XLA cannot be installed in this environment, so no figure for
its per-op tracing cost is given here.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import xlaprof as xp


def per_op_ns(fn, ops_per_call: int, calls: int = 20_000, repeats: int = 5) -> float:
    best = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        best.append((time.perf_counter_ns() - start) / (calls * ops_per_call))
        xp.sync()  # drops the recorded graph before the next round
    return min(best)


def tracing_figures() -> None:
    a = xp.randn(64, 64, seed=1)
    b = xp.randn(64, 64, seed=2)
    xp.sync()
    print("Python per-op tracing cost (best of 5 rounds of 20,000 calls):")
    print(f"  binding only (locate the caller, no op)   {per_op_ns(xp._native._trace_cost_probe, 1):8.0f} ns")
    print(f"  a + b        (tensor op)                  {per_op_ns(lambda: a + b, 1):8.0f} ns")
    print(f"  a.relu()     (composite: 2 IR nodes)      {per_op_ns(lambda: a.relu(), 1):8.0f} ns")
    print(f"  a * 2.0      (host scalar + op)           {per_op_ns(lambda: a * 2.0, 1):8.0f} ns")
    print(f"  a @ b                                     {per_op_ns(lambda: a @ b, 1):8.0f} ns")

    def chain():
        # The Rust bench's workload (`xlaprof bench`): x = x * 1.0001 + 0.5, 1,000 times.
        x = a
        for _ in range(1000):
            x = x * 1.0001 + 0.5
        return x

    print(f"  chain x = x * 1.0001 + 0.5 (as xlaprof bench) {per_op_ns(chain, 2000, calls=10):4.0f} ns")
    with xp.profile():  # the line profiler times each call (its tracing column)
        recorded = per_op_ns(chain, 2000, calls=10)
    print(f"  the chain while a profile records             {recorded:4.0f} ns")


def make_batch(rng: np.random.Generator, batch: int = 64, features: int = 32, classes: int = 10):
    x = rng.standard_normal((batch, features)).astype(np.float32)
    y = rng.integers(0, classes, size=batch).astype(np.int64)
    return xp.from_numpy(x), xp.from_numpy(y)


class Mlp(xp.nn.Module):
    def __init__(self) -> None:
        self.net = xp.nn.Sequential(
            xp.nn.Linear(32, 128, seed=1), xp.nn.ReLU(), xp.nn.Linear(128, 10, seed=2)
        )

    def forward(self, x):
        return self.net(x)


def train(steps: int) -> None:
    rng = np.random.default_rng(0)
    model = Mlp()
    opt = xp.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(steps):
        x, y = make_batch(rng)
        loss = xp.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        xp.step()


def magic_figures(rounds: int = 5) -> None:
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_line_magic("load_ext", "xlaprof")
    ip.user_ns["train"] = train
    train(50)  # compiles once; both timings below are warm
    plain, profiled = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        train(50)
        plain.append(time.perf_counter() - start)
        start = time.perf_counter()
        ip.run_cell_magic("xla_profile", "--no-widget", "train(50)")
        profiled.append(time.perf_counter() - start)
    p, q = statistics.median(plain), statistics.median(profiled)
    print(f"\n50 MLP training steps (64x32 -> 128 -> 10, SGD), median of {rounds}:")
    print(f"  plain                 {p * 1e3:8.1f} ms")
    print(f"  under %%xla_profile   {q * 1e3:8.1f} ms   (overhead {100 * (q - p) / p:+.1f}%)")
    start = time.perf_counter()
    profile = ip.run_cell_magic("xla_profile", "", "train(50)")
    html = profile._repr_html_()
    print(f"  with the widget drawn {1e3 * (time.perf_counter() - start):8.1f} ms ({len(html) // 1024} KiB of HTML)")


if __name__ == "__main__":
    tracing_figures()
    magic_figures()
