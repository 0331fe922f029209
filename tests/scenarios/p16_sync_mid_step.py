"""An extra sync between the forward and the backward pass.

Report: https://github.com/huggingface/transformers/pull/13896 (review: `xm.mark_step()` "is
not meant to be called more than once per iteration").
"""
# expect: MidStepSync @planted
import numpy as np

import xlaprof as xp

rng = np.random.default_rng(0)
model = xp.nn.Sequential(xp.nn.Linear(32, 64, seed=1), xp.nn.ReLU(), xp.nn.Linear(64, 10, seed=2))
opt = xp.optim.SGD(model.parameters(), lr=0.1)

for i in range(6):
    x = xp.tensor(rng.standard_normal((16, 32), dtype=np.float32))
    y = xp.tensor(rng.integers(0, 10, 16))
    loss = xp.cross_entropy(model(x), y)
    xp.sync()  # planted
    opt.zero_grad()
    loss.backward()
    opt.step()
    xp.step()
