"""A step counter kept as a tensor, used in the loss (a warm-up ramp).

Report: https://github.com/pytorch/xla/issues/990 ("hyperparameter scheduling": does changing
lr or momentum recompile, and where should scheduler.step() go?).
"""
# expect: nothing
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)

for i in range(8):
    step_t = xp.tensor(np.float32(i))
    ramp = (step_t / 8.0).clamp(0.0, 1.0)
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model(x), y) * ramp
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
