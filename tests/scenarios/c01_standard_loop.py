"""The canonical loop: fixed batch shape, one step() at the end of each step.

Report: https://github.com/pytorch/xla/issues/1368 ("How to tell if a graph recompilation is
happening?": the user diffed CompileTime counts to check a loop like this one compiled once).
"""
# expect: nothing
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)

for i in range(8):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
