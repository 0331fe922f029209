"""Dropout with a new random mask every step.

Report: https://github.com/pytorch/xla/pull/1932 (dropout's seed moved from an embedded
constant to device data, so a new mask no longer means a new graph).
"""
# expect: nothing
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
fc1 = xp.nn.Linear(32, 64, seed=1)
fc2 = xp.nn.Linear(64, 10, seed=2)
opt = xp.optim.SGD(fc1.parameters() + fc2.parameters(), lr=0.1)

for i in range(8):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    h = xp.dropout(fc1(x).relu(), p=0.2, training=True, seed=100 + i)
    loss = xp.cross_entropy(fc2(h), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
