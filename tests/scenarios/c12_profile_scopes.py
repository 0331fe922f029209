"""Named regions around forward, backward and update: scopes annotate, they split nothing.

Report: https://github.com/pytorch/xla/issues/943 ("How to start looking at xla code?": the
advice was to read the metrics and profile named regions of the step).
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
    with xp.profile_scope("forward"):
        loss = xp.cross_entropy(model(x), y)
    with xp.profile_scope("backward"):
        opt.zero_grad()
        loss.backward()
    with xp.profile_scope("update"):
        opt.step()
    xp.step()
