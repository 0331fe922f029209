"""Normalization constants made on the device before the loop, still pending at step 1.

Report: https://github.com/pytorch/xla/issues/2327 ("First pass and second-pass through
training loop compiles": steps 1 and 2 had different graphs on almost every model).
"""
# expect: Warmup @planted
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)
mean = xp.full([32], 0.5)
std = xp.ones(32) * 2.0  # planted

for i in range(6):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model((x - mean) / std), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
