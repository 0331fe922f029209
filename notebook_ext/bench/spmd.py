"""Figures for training on several devices: the MLP 784-512-512-10 SGD step (lr 0.01, ReLU, mean
cross-entropy, batch 256) with its batch split over 1, 2 and 4 CPU devices, and JAX's `jit` of the
same step with the same shardings measured in the same run (medians of steps 5..30; each step
waits for its result). The all-reduce's share of the step: an all-reduce of the gradients' size
(669,706 floats) timed alone on the same devices, over the step time (the CPU plugin has no
per-op timing).

With `--torch`, the same step written in torch on the xlaprof device (the same initial weights,
batches and shardings: `xt.mark_sharding` on each batch), run lazily and under
`torch.compile(backend="xlaprof")` (the model and `opt.step` compiled, each graph captured once
as a partitioned program and replayed).

    .venv/bin/python notebook_ext/bench/spmd.py [--jax PYTHON] [--torch]

`--jax PYTHON` names a Python with `jax` installed (e.g. a venv's); JAX then runs in a
subprocess with XLA's 4 host devices.
"""

import json
import statistics
import subprocess
import sys
import time

import numpy as np

STEPS, BATCH, LR = 30, 256, 0.01
SIZES = [784, 512, 512, 10]


ALL_REDUCE = """
import statistics, time, numpy as np, xlaprof as xp
devices = {devices}
mesh = xp.get_1d_mesh("data", devices)
x = xp.tensor(np.ones((devices, 669706), np.float32))
xp.mark_sharding(x, mesh, ("data", None))
times = []
for i in range(30):
    t = time.perf_counter()
    s = x.sum(0)
    xp.sync()
    times.append(time.perf_counter() - t)
print(statistics.median(times[5:]) * 1e3)
"""


def last_line(python: str, code: str, *args: str) -> str:
    """Runs `code` in a new `python` (the engine's device count is fixed when it starts): the
    last line it printed."""
    out = subprocess.run([python, "-c", code, *args], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def xlaprof_all_reduce_ms(devices: int) -> float:
    """A sum over the split dimension: one all-reduce of the gradients' size per execution."""
    code = ALL_REDUCE.format(devices=devices)
    return float(last_line(sys.executable, code))


def xlaprof_step_ms(devices: int) -> float:
    """One process per device count: the engine's device count is fixed when it starts."""
    code = f"""
import statistics, time, numpy as np, xlaprof as xp
mesh = xp.get_1d_mesh("data", {devices}) if {devices} > 1 else None
rng = np.random.default_rng(0)
params = []
for din, dout in zip({SIZES}[:-1], {SIZES}[1:]):
    w = xp.tensor((rng.standard_normal((dout, din)) * np.sqrt(2.0 / din)).astype(np.float32), requires_grad=True)
    b = xp.zeros(dout, requires_grad=True)
    params += [w, b]
opt = xp.optim.SGD(params, lr={LR})
times = []
for i in range({STEPS} + 1):
    x = xp.tensor(rng.standard_normal(({BATCH}, 784)).astype(np.float32))
    y = xp.tensor(rng.integers(0, 10, {BATCH}))
    t = time.perf_counter()
    if mesh is not None:
        xp.mark_sharding(x, mesh, ("data", None))
        xp.mark_sharding(y, mesh, ("data",))
    h = x
    for j in range(0, len(params), 2):
        h = h @ params[j].T + params[j + 1]
        if j < len(params) - 2:
            h = h.relu()
    loss = xp.cross_entropy(h, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
    loss.item()
    times.append(time.perf_counter() - t)
print(statistics.median(times[5:]) * 1e3)
"""
    return float(last_line(sys.executable, code))


TORCH = f"""
import statistics, sys, time, numpy as np, torch, xlaprof as xp, xlaprof.torch as xt
devices, compiled = int(sys.argv[1]), sys.argv[2] == "compiled"
mesh = xp.get_1d_mesh("data", devices) if devices > 1 else None
dev = xt.device()
rng = np.random.default_rng(0)
layers = []
for din, dout in zip({SIZES}[:-1], {SIZES}[1:]):
    lin = torch.nn.Linear(din, dout)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy((rng.standard_normal((dout, din)) * np.sqrt(2.0 / din)).astype(np.float32)))
        lin.bias.zero_()
    layers += [lin, torch.nn.ReLU()]
model = torch.nn.Sequential(*layers[:-1]).to(dev)
opt = torch.optim.SGD(model.parameters(), lr={LR})
forward, step = (torch.compile(model, backend="xlaprof"), torch.compile(opt.step, backend="xlaprof")) if compiled else (model, opt.step)
times = []
for i in range({STEPS} + 1):
    x = torch.from_numpy(rng.standard_normal(({BATCH}, 784)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, {BATCH}))
    t = time.perf_counter()
    x, y = x.to(dev), y.to(dev)
    if mesh is not None:
        xt.mark_sharding(x, mesh, ("data", None))
        xt.mark_sharding(y, mesh, ("data",))
    loss = torch.nn.functional.cross_entropy(forward(x), y)
    loss.backward()
    step()
    opt.zero_grad()
    if not compiled:
        xt.step()
    loss.item()
    times.append(time.perf_counter() - t)
print(statistics.median(times[5:]) * 1e3)
"""


def torch_step_ms(devices: int, mode: str) -> float:
    """The step in torch, lazy or compiled: one process per device count and mode."""
    return float(last_line(sys.executable, TORCH, str(devices), mode))


JAX = f"""
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
import statistics, time, numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
sizes, B, LR, STEPS = {SIZES}, {BATCH}, {LR}, {STEPS}

def loss_fn(params, x, y):
    for i, (w, b) in enumerate(params):
        x = x @ w + b
        if i < len(params) - 1:
            x = jax.nn.relu(x)
    logp = jax.nn.log_softmax(x)
    return -jnp.mean(jnp.sum(logp * jax.nn.one_hot(y, 10), axis=-1))

def step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads), loss

def run(devices):
    mesh = Mesh(np.array(jax.devices()[:devices]), ("data",))
    batch, whole = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    rng = np.random.default_rng(0)
    params = [(jax.device_put((rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32), whole),
               jax.device_put(np.zeros(b, np.float32), whole)) for a, b in zip(sizes[:-1], sizes[1:])]
    jstep = jax.jit(step)
    times = []
    for i in range(STEPS + 1):
        x = rng.standard_normal((B, 784)).astype(np.float32)
        y = rng.integers(0, 10, B).astype(np.int32)
        t = time.perf_counter()
        x, y = jax.device_put(x, batch), jax.device_put(y, batch)
        params, loss = jstep(params, x, y)
        float(loss)
        jax.block_until_ready(params)
        times.append(time.perf_counter() - t)
    return statistics.median(times[5:]) * 1e3

import json
print(json.dumps({{"1": run(1), "2": run(2), "4": run(4)}}))
"""


def main() -> None:
    figures = {}
    for devices in (1, 2, 4):
        figures[f"xlaprof, {devices} device(s), step (ms)"] = xlaprof_step_ms(devices)
    if "--torch" in sys.argv:
        for mode in ("lazy", "compiled"):
            for devices in (1, 2, 4):
                figures[f"torch {mode}, {devices} device(s), step (ms)"] = torch_step_ms(devices, mode)
    jax_ms = None
    if "--jax" in sys.argv:
        python = sys.argv[sys.argv.index("--jax") + 1]
        jax_ms = json.loads(last_line(python, JAX))
        for devices in (1, 2, 4):
            figures[f"JAX, {devices} device(s), step (ms)"] = jax_ms[str(devices)]
    for devices in (2, 4):
        ms = xlaprof_all_reduce_ms(devices)
        step = figures[f"xlaprof, {devices} device(s), step (ms)"]
        figures[f"all-reduce of the gradients alone, {devices} devices (ms)"] = ms
        figures[f"its share of the {devices}-device step (%)"] = 100 * ms / step
    for name, value in figures.items():
        print(f"  {name:<52} {value:8.3f}")
    if jax_ms is not None:
        for devices in (1, 2, 4):
            ratio = figures[f"xlaprof, {devices} device(s), step (ms)"] / jax_ms[str(devices)]
            print(f"  xlaprof / JAX, {devices} device(s): {ratio:.2f}")
            if "--torch" in sys.argv:
                for mode in ("lazy", "compiled"):
                    ratio = figures[f"torch {mode}, {devices} device(s), step (ms)"] / jax_ms[str(devices)]
                    print(f"  torch {mode} / JAX, {devices} device(s): {ratio:.2f}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
