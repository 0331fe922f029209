"""Some batches arrive as float64 (NumPy's default), others as float32.

Report: https://github.com/jax-ml/jax/issues/4274 ("How to detect recompilation reason?": a
weakly typed scalar changed the argument's type and the function compiled a second time).
"""
# expect: Recompile @planted | dtype | f64
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)

for i in range(6):
    batch = rng.standard_normal((16, 32))
    if i % 2 == 0:
        batch = batch.astype(np.float32)
    x = xp.tensor(batch).float()  # planted
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
