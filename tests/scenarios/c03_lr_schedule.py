"""A learning-rate schedule as a Python float that changes every step.

Report: https://github.com/pytorch/pytorch/pull/69634 (Adam's step size, a Python float, was
burned into the lazy IR as a constant and recompiled every step). Here host scalars are graph
inputs, so the schedule compiles once.
"""
# expect: nothing
import math

import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)

for i in range(8):
    opt.lr = 0.1 * 0.5 * (1 + math.cos(math.pi * i / 8))
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model(x), y) * (1.0 + 0.01 * i)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
