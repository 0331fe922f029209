"""JAX executing the bench's chain (x = x * 1.0001 + 0.5, 1,000 times, f32[64,64]) two ways:
back to back, as JAX's own peer script times it, and after `host_us` microseconds of host work
between calls, which is how xlaprof's figure is taken (it traces the next chain between
executions). On a machine with few cores XLA's worker threads go idle during host work and the
next execution starts cold, so only the second figure compares like with like.

    python scripts/bench_jax_chain.py HOST_US   (prints one JSON object)
"""
import json
import sys
import time

import jax
import jax.numpy as jnp

host_us = float(sys.argv[1]) if len(sys.argv) > 1 else 1000.0
x = jnp.ones((64, 64), jnp.float32)


def chain(x):
    for _ in range(1000):
        x = x * 1.0001 + 0.5
    return x


compiled = jax.jit(chain).lower(x).compile()
compiled(x).block_until_ready()


def median_us(gap_s, calls=200):
    times = []
    for _ in range(calls):
        if gap_s:
            start, garbage = time.perf_counter(), []
            while time.perf_counter() - start < gap_s:
                garbage.append(object())  # allocating, as tracing does
        start = time.perf_counter()
        compiled(x).block_until_ready()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2] * 1e6


print(json.dumps({
    "back_to_back_us": median_us(0),
    "after_host_work_us": median_us(host_us / 1e6),
    "host_us": host_us,
}))
