"""Accuracy accumulated as a Python number inside the step.

Report: https://github.com/pytorch/xla/issues/1412 ("IR Compilation takes 25 minutes each
time": 23562 `item()` calls in 232 steps from progress logging).
"""
# expect: HiddenSync @planted
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)
correct = 0

for i in range(6):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    logits = model(x)
    correct += int((logits.argmax(1) == y).sum().item())  # planted
    loss = xp.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
print("accuracy", correct / 96)
