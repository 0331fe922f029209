"""Depthwise convolutions, the layers of MobileNet, EfficientNet, ConvNeXt and Mamba, at the sizes
those models train at: a depthwise convolution, batch norm and SiLU, forward and backward, on the
xlaprof device (lazily, one graph a step) beside torch's CPU eager, and with ``--jax PYTHON`` the
same layer's convolution in JAX: XLA's own convolution, the same compiler, so the row tells what
the engine's lowering makes of these layers from what XLA makes of a convolution. The engine writes
a depthwise convolution as a sum over its kernel's taps (``core/src/ops/conv.rs``); XLA's CPU code
runs the convolution and its kernel gradient over every pair of channels.

    .venv/bin/python notebook_ext/bench/depthwise.py [--jax /path/to/python-with-jax]

Each row: the first step (trace, compile, run) and the median steady step, in ms.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# name -> (batch, channels, height, width, kernel height, kernel width, stride)
LAYERS = {
    "mobilenet_v2 3x3/2": (8, 144, 28, 28, 3, 3, 2),
    "efficientnet 5x5": (8, 240, 14, 14, 5, 5, 1),
    "convnext 7x7": (8, 192, 28, 28, 7, 7, 1),
    "mamba 1-d k4": (8, 768, 1, 128, 1, 4, 1),
}
STEPS = 12

JAX = """
import json, sys, time, statistics
import jax, jax.numpy as jnp
from jax import lax
n, c, h, w, kh, kw, s = json.loads(sys.argv[1])
x = jax.random.normal(jax.random.PRNGKey(0), (n, c, h, w))
k = jax.random.normal(jax.random.PRNGKey(1), (c, 1, kh, kw)) * 0.1
def layer(x, k):
    y = lax.conv_general_dilated(x, k, (s, s), [(kh // 2, kh // 2), (kw // 2, kw // 2)], feature_group_count=c,
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))
    mean = y.mean((0, 2, 3), keepdims=True)
    y = (y - mean) * lax.rsqrt(((y - mean) ** 2).mean((0, 2, 3), keepdims=True) + 1e-5)
    return jnp.mean(jax.nn.silu(y) ** 2)
step = jax.jit(jax.grad(layer, argnums=(0, 1)))
times = []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    jax.block_until_ready(step(x, k))
    times.append(time.perf_counter() - t)
print(json.dumps([times[0], statistics.median(times[2:])]))
"""


def torch_layer(device, n, c, h, w, kh, kw, s):
    import torch

    torch.manual_seed(0)
    layer = torch.nn.Sequential(
        torch.nn.Conv2d(c, c, (kh, kw), stride=s, padding=(kh // 2, kw // 2), groups=c, bias=False),
        torch.nn.BatchNorm2d(c), torch.nn.SiLU()).to(device)
    x = torch.randn(n, c, h, w).to(device).requires_grad_()
    return layer, x


def run_torch(device, shape):
    import xlaprof.torch as xt

    layer, x = torch_layer(device, *shape)
    times = []
    for _ in range(STEPS):
        t = time.perf_counter()
        layer(x).square().mean().backward()
        if device != "cpu":
            xt.step()
            xt.wait()
        times.append(time.perf_counter() - t)
    return times[0], statistics.median(times[2:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jax", default="", help="a Python with jax: XLA's own convolution beside ours")
    args = ap.parse_args()
    import xlaprof.torch as xt

    print(f"{'layer':<20} {'mode':<16} {'first ms':>9} {'step ms':>8} {'vs eager':>8}")
    for name, shape in LAYERS.items():
        rows = [("torch CPU eager", run_torch("cpu", shape)), ("xlaprof", run_torch(xt.device(), shape))]
        if args.jax:
            # (On a GPU, JAX must not take most of its memory up front: this process holds some.)
            env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
            out = subprocess.run([args.jax, "-c", JAX, json.dumps(shape), str(STEPS)], capture_output=True,
                                 text=True, env=env)
            rows.append(("JAX (XLA's conv)", json.loads(out.stdout) if out.returncode == 0 else (float("nan"),) * 2))
        eager = rows[0][1][1]
        for mode, (first, step) in rows:
            print(f"{name:<20} {mode:<16} {first * 1e3:>9.1f} {step * 1e3:>8.2f} {step / eager:>7.2f}x", flush=True)


if __name__ == "__main__":
    main()
