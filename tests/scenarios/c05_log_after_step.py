"""The loss read for logging every few steps, after step() (already computed).

Report: https://github.com/pytorch/xla/issues/2231 (the user wanted losses to stay on the TPU
and reach the CPU only every 100 steps; the answer: read after the step, or in a closure).
"""
# expect: nothing
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)

for i in range(9):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
    if i % 3 == 0:
        print(f"step {i}: loss {loss.item():.4f}")
