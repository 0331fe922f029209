"""The last batch of each epoch is smaller: 100 samples in batches of 32 leave 4.

Report: https://github.com/pytorch/xla/pull/1279 (without drop_last the last MNIST batch was
[96, 1, 28, 28] instead of [128, ...], a new graph in the epoch's last step).
"""
# expect: Recompile @planted | dimension 0 | 32 | 4 | drop_last
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
data = rng.standard_normal((100, 32), dtype=np.float32)
labels = rng.integers(0, 10, 100)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(2):
    for i in range(0, 100, 32):
        x = xp.tensor(data[i : i + 32])  # planted
        y = xp.tensor(labels[i : i + 32])
        loss = xp.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        xp.step()
