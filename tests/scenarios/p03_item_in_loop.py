"""`loss.item()` every step, before the step ends.

Report: https://github.com/pytorch/xla/issues/1777 (Adafactor ~10 s per iteration: a Python
sqrt of a tensor and `loss.item()` every step forced graph executions).
"""
# expect: HiddenSync @planted
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)
running = 0.0

for i in range(6):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    running += loss.item()  # planted
    xp.step()
print(f"mean loss {running / 6:.3f}")
