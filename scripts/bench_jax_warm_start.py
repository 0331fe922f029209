"""JAX's first MLP step (784-512-512-10, SGD, batch 64) in a new process, its persistent
compilation cache cold and then warm: the peer of `xlaprof bench`'s warm start. Each figure is
timed as ours is: from after the backend is up (JAX's `jax.devices()`, our plugin load) to the
end of the first step, making the model's tensors from host values included.

    python scripts/bench_jax_warm_start.py   (prints one JSON object)
"""
import json
import subprocess
import sys
import tempfile
import time


def first_step(cache_dir: str) -> dict:
    import numpy as np
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.devices()
    sizes = [784, 512, 512, 10]

    # The step of the JAX peer's `bench_c_mlp.py` (which runs its benchmark when imported, so its
    # definitions are written out here), with this script's host-made parameters.
    def loss_of(params, x, y):
        for i, (w, b) in enumerate(params):
            x = x @ w + b
            if i < len(params) - 1:
                x = jax.nn.relu(x)
        logp = jax.nn.log_softmax(x)
        return -jnp.mean(jnp.sum(logp * jax.nn.one_hot(y, 10), axis=-1))

    @jax.jit
    def step(params, x, y):
        loss, grads = jax.value_and_grad(loss_of)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss

    start = time.perf_counter()
    rng = np.random.default_rng(0)
    params = [(jnp.asarray(rng.uniform(-1, 1, (a, b)).astype(np.float32) / np.sqrt(a)),
               jnp.asarray(rng.uniform(-1, 1, b).astype(np.float32) / np.sqrt(a)))
              for a, b in zip(sizes[:-1], sizes[1:])]
    x = jnp.asarray(rng.standard_normal((64, 784), dtype=np.float32))
    y = jnp.asarray(rng.integers(0, 10, 64).astype(np.int32))
    made = time.perf_counter()
    jax.block_until_ready(step(params, x, y))
    end = time.perf_counter()
    return {"ms": (end - start) * 1e3, "making_tensors_ms": (made - start) * 1e3,
            "first_call_ms": (end - made) * 1e3}


def main() -> None:
    if len(sys.argv) > 1:  # a child: one first step with the cache in argv[1]
        print(json.dumps(first_step(sys.argv[1])))
        return
    with tempfile.TemporaryDirectory(prefix="jax-bench-cache-") as cache:
        def child() -> dict:
            out = subprocess.run([sys.executable, __file__, cache], check=True,
                                 capture_output=True, text=True).stdout
            return json.loads(out.strip().splitlines()[-1])

        cold, warm = child(), child()
    print(json.dumps({"cold_start_ms": cold["ms"], "warm_start_ms": warm["ms"],
                      "warm_start_phases": warm}))


if __name__ == "__main__":
    main()
