"""Gradient accumulation: the optimizer steps only on every fourth micro-batch, inside the
same step as the others.

Report: https://github.com/pytorch/xla/issues/3593 (OOM and slow steps with gradient
accumulation: where should mark_step go when the update runs every k micro-batches?).
"""
# expect: Recompile @planted
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)

for i in range(12):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model(x), y) * 0.25
    loss.backward()
    if (i + 1) % 4 == 0:
        opt.step()  # planted
        opt.zero_grad()
    xp.step()
