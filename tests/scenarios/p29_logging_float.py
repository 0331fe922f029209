"""Logging the loss to a metrics writer as a Python float inside the step.

Report: https://github.com/pytorch/xla/issues/2231 (printing 7 scalars took 2.4 s and
SummaryWriter.add_scalar 4.1 s against a 3 s step; the answer was a step closure).
"""
# expect: HiddenSync @planted
import numpy as np

import xlaprof as xp


class Writer:
    def __init__(self):
        self.rows = []

    def add_scalar(self, name, value, step):
        self.rows.append((name, value, step))


rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)
writer = Writer()

for i in range(6):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    writer.add_scalar("loss", float(loss), i)  # planted
    opt.step()
    xp.step()
