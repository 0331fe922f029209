"""A curriculum that widens the context with the step counter: a slice bound from Python.

Report: https://github.com/pytorch/xla/issues/3604 (adding a schedule driven by the step
counter to the MNIST example caused unintended compilations).
"""
# expect: RecompileStorm @planted | limit
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
w = xp.tensor(rng.standard_normal((64, 1), dtype=np.float32) * 0.1, requires_grad=True)
opt = xp.optim.SGD([w], lr=0.01)

for i in range(8):
    x = xp.tensor(rng.standard_normal((16, 64), dtype=np.float32))
    width = 32 + 4 * i
    window = x[:, :width]  # planted
    loss = (window @ w[:width]).pow(2.0).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
