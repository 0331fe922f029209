"""The "mark the step" idiom: sync() and then step(), with nothing pending in between.

Report: https://github.com/pytorch/xla/issues/5094 (confusion over the order of the loader's
mark_step, optimizer_step and closures; a sync right before the step boundary splits nothing).
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
    xp.sync()
    xp.step()
