"""The MLP training step of torch_compile.py written directly in JAX: 784-512-512-10 with ReLU,
batch 64, cross-entropy (mean over the batch), AdamW as torch's defaults make it (lr 1e-3, betas
0.9 and 0.999, eps 1e-8, weight decay 0.01), one jitted step. The same XLA compiles it, so its
step beside the compiled PyTorch step tells the engine's lowering and launches from what XLA's
CPU code makes of these shapes. Prints one JSON row: the steady step's median and the first step
(trace and compile included). With --split (for compiled_split.py): the device time of the forward
(also with the weights as torch keeps them, [out, in]), of the forward and backward, of AdamW alone
and of the whole step, each a program of its own.

    /path/to/python-with-jax notebook_ext/bench/mlp_jax.py [--split]
"""

import json
import statistics
import sys
import time

import jax
import jax.numpy as jnp

from adamw_jax import adamw, initial

SIZES, BATCH = (784, 512, 512, 10), 64
WARM, MEASURED = 5, 20  # as torch_compile.py's STEPS["mlp"]


def init(key):
    """torch.nn.Linear's initialization: uniform in +-1/sqrt(fan_in), weights and biases."""
    params = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
        key, kw, kb = jax.random.split(key, 3)
        bound = 1.0 / n_in ** 0.5
        params.append({"w": jax.random.uniform(kw, (n_in, n_out), jnp.float32, -bound, bound),
                       "b": jax.random.uniform(kb, (n_out,), jnp.float32, -bound, bound)})
    return params


def logits(params, x):
    for i, p in enumerate(params):
        x = x @ p["w"] + p["b"]
        if i < len(params) - 1:
            x = jax.nn.relu(x)
    return x


def loss_fn(params, x, y):
    logp = jax.nn.log_softmax(logits(params, x), -1)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], -1))


@jax.jit
def step(params, m, v, t, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return (*adamw(params, m, v, t, grads), loss)


def state():
    params = init(jax.random.PRNGKey(0))
    return (params, *initial(params))


def split():
    """Each part as a program of its own, timed to its end: medians of 50 runs, in ms."""
    params, m, v, t = state()
    x = jax.random.normal(jax.random.PRNGKey(2), (BATCH, SIZES[0]), jnp.float32)
    y = jax.random.randint(jax.random.PRNGKey(3), (BATCH,), 0, SIZES[-1])
    forward, grad, opt = jax.jit(logits), jax.jit(jax.value_and_grad(loss_fn)), jax.jit(adamw)
    # The weights as torch's Linear keeps them, [out, in], each product against the transpose.
    as_torch = [{"w": p["w"].T.copy(), "b": p["b"]} for p in params]
    forward_torch = jax.jit(lambda ps, x: logits([{"w": p["w"].T, "b": p["b"]} for p in ps], x))
    _, grads = grad(params, x, y)
    parts = {"forward": lambda: forward(params, x),
             "forward, torch's weight layout": lambda: forward_torch(as_torch, x),
             "forward+backward": lambda: grad(params, x, y),
             "AdamW": lambda: opt(params, m, v, t, grads),
             "whole step": lambda: step(params, m, v, t, x, y)}
    out = {}
    for name, run in parts.items():
        times = []
        for i in range(60):
            start = time.perf_counter()
            jax.block_until_ready(run())
            times.append(time.perf_counter() - start)
        out[name] = statistics.median(times[10:]) * 1e3
    print(json.dumps(out))


def main():
    params, m, v, t = state()
    key = jax.random.PRNGKey(1)
    times = []
    for _ in range(WARM + MEASURED):
        key, kx, ky = jax.random.split(key, 3)
        x = jax.random.normal(kx, (BATCH, SIZES[0]), jnp.float32)
        y = jax.random.randint(ky, (BATCH,), 0, SIZES[-1])
        jax.block_until_ready((x, y))
        start = time.perf_counter()
        params, m, v, t, loss = step(params, m, v, t, x, y)
        loss = float(loss)
        times.append(time.perf_counter() - start)
    print(json.dumps({"workload": "mlp", "mode": "jax", "step_ms": statistics.median(times[WARM:]) * 1e3,
                      "first_s": times[0], "loss": loss}))


if __name__ == "__main__":
    split() if "--split" in sys.argv else main()
