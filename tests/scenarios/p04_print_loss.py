"""Printing the loss tensor inside the step.

Report: https://github.com/pytorch/xla/issues/7596 ("Print(tensor) takes a very long time!":
print ran the whole pending graph; a mark_step before the print fixed it).
"""
# expect: HiddenSync @planted
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)

for i in range(6):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model(x), y)
    print(f"step {i}: loss {loss}")  # planted
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
