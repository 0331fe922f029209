"""The Llama training step of torch_compile.py written directly in JAX: the same shapes (4 layers,
hidden 256, 4 heads, MLP 1024, vocabulary 1024, sequence 256, batch 8), RMSNorm, rotary
embeddings, causal attention, SwiGLU, untied head, cross-entropy on the shifted tokens, AdamW
(lr 1e-3, weight decay 0.01), one jitted step. XLA compiles it as it compiles our lowering of the
PyTorch model, so the two steps' times tell our lowering from XLA's code generation. Prints one
JSON row: the steady step's median and the first step (trace and compile included).

    /path/to/python-with-jax notebook_ext/bench/llama_jax.py
"""

import json
import statistics
import time

import jax
import jax.numpy as jnp

from adamw_jax import adamw, initial

VOCAB, HIDDEN, MLP, LAYERS, HEADS, SEQ, BATCH = 1024, 256, 1024, 4, 4, 256, 8
HEAD = HIDDEN // HEADS


def init(key):
    def dense(key, n_in, n_out):
        return jax.random.normal(key, (n_in, n_out), jnp.float32) * 0.02

    keys = iter(jax.random.split(key, 4 + 7 * LAYERS))
    layers = []
    for _ in range(LAYERS):
        layers.append({
            "attn_norm": jnp.ones(HIDDEN), "mlp_norm": jnp.ones(HIDDEN),
            "q": dense(next(keys), HIDDEN, HIDDEN), "k": dense(next(keys), HIDDEN, HIDDEN),
            "v": dense(next(keys), HIDDEN, HIDDEN), "o": dense(next(keys), HIDDEN, HIDDEN),
            "gate": dense(next(keys), HIDDEN, MLP), "up": dense(next(keys), HIDDEN, MLP),
            "down": dense(next(keys), MLP, HIDDEN),
        })
    return {"embed": dense(next(keys), VOCAB, HIDDEN), "layers": layers, "norm": jnp.ones(HIDDEN),
            "head": dense(next(keys), HIDDEN, VOCAB)}


def rms_norm(x, w):
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * w


def rotary(x):
    half = HEAD // 2
    freq = 1.0 / (10000.0 ** (jnp.arange(0, half, dtype=jnp.float32) / half))
    angle = jnp.arange(SEQ, dtype=jnp.float32)[:, None] * freq[None, :]
    cos = jnp.concatenate([jnp.cos(angle)] * 2, -1)
    sin = jnp.concatenate([jnp.sin(angle)] * 2, -1)
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def loss_fn(params, ids):
    x = params["embed"][ids]
    mask = jnp.tril(jnp.ones((SEQ, SEQ), bool))
    for p in params["layers"]:
        h = rms_norm(x, p["attn_norm"])

        def heads(w):
            return (h @ w).reshape(BATCH, SEQ, HEADS, HEAD).transpose(0, 2, 1, 3)

        q, k, v = rotary(heads(p["q"])), rotary(heads(p["k"])), heads(p["v"])
        scores = jnp.where(mask, q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(HEAD), -jnp.inf)
        att = jax.nn.softmax(scores, -1) @ v
        x = x + att.transpose(0, 2, 1, 3).reshape(BATCH, SEQ, HIDDEN) @ p["o"]
        h = rms_norm(x, p["mlp_norm"])
        x = x + (jax.nn.silu(h @ p["gate"]) * (h @ p["up"])) @ p["down"]
    logits = rms_norm(x, params["norm"]) @ params["head"]
    logp = jax.nn.log_softmax(logits[:, :-1], -1)
    return -jnp.mean(jnp.take_along_axis(logp, ids[:, 1:, None], -1))


@jax.jit
def step(params, m, v, t, ids):
    loss, grads = jax.value_and_grad(loss_fn)(params, ids)
    return (*adamw(params, m, v, t, grads), loss)


def main():
    params = init(jax.random.PRNGKey(0))
    m, v, t = initial(params)
    key = jax.random.PRNGKey(1)
    times = []
    for i in range(7):
        key, sub = jax.random.split(key)
        ids = jax.random.randint(sub, (BATCH, SEQ), 0, VOCAB)
        start = time.perf_counter()
        params, m, v, t, loss = step(params, m, v, t, ids)
        loss = float(loss)
        times.append(time.perf_counter() - start)
    print(json.dumps({"workload": "llama", "mode": "jax", "step_ms": statistics.median(times[2:]) * 1e3,
                      "first_s": times[0], "loss": loss}))


if __name__ == "__main__":
    main()
