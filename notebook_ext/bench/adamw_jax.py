"""AdamW in JAX as torch's `torch.optim.AdamW` makes it with its defaults (lr 1e-3, betas 0.9 and
0.999, eps 1e-8, weight decay 0.01), for the bench's programs written in JAX (`mlp_jax.py`,
`llama_jax.py`): the same update as the PyTorch steps they stand beside."""

import jax
import jax.numpy as jnp

LR, BETAS, EPS, DECAY = 1e-3, (0.9, 0.999), 1e-8, 0.01


def initial(params):
    """The optimizer's state for ``params``: both moments zero, no step taken."""
    return jax.tree.map(jnp.zeros_like, params), jax.tree.map(jnp.zeros_like, params), jnp.zeros((), jnp.float32)


def adamw(params, m, v, t, grads):
    """One step: the new parameters, moments and step count."""
    t = t + 1
    m = jax.tree.map(lambda m, g: BETAS[0] * m + (1 - BETAS[0]) * g, m, grads)
    v = jax.tree.map(lambda v, g: BETAS[1] * v + (1 - BETAS[1]) * g * g, v, grads)
    c1, c2 = 1 - BETAS[0] ** t, 1 - BETAS[1] ** t

    def update(p, m, v):
        p = p * (1 - LR * DECAY)
        return p - LR * (m / c1) / (jnp.sqrt(v / c2) + EPS)

    return jax.tree.map(update, params, m, v), m, v, t
