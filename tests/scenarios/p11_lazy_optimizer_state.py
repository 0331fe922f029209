"""A hand-written Adam whose moments are created on the first update, as torch.optim does.

Report: https://github.com/pytorch/pytorch/pull/98647 (Adam's state is created on the first
step, so tracing takes the init path once and a different path on the second try).
"""
# expect: LazyState @planted
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
params = [
    xp.tensor(rng.standard_normal((32, 10), dtype=np.float32) * 0.1, requires_grad=True),
    xp.tensor(np.zeros(10, dtype=np.float32), requires_grad=True),
]
state = {}


def adam_step(params, lr=1e-2, b1=0.9, b2=0.999, eps=1e-8):
    new = []
    for k, p in enumerate(params):
        if k not in state:
            state[k] = (p * 0.0, p * 0.0)  # planted
        m, v = state[k]
        m = m * b1 + p.grad * (1 - b1)
        v = v * b2 + p.grad * p.grad * (1 - b2)
        state[k] = (m, v)
        new.append((p - m / (v.sqrt() + eps) * lr).detach().requires_grad_())
    return new


for i in range(6):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(x @ params[0] + params[1], y)
    loss.backward()
    params = adam_step(params)
    xp.step()
